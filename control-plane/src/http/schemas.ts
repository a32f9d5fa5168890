import { type TSchema, Type } from '@sinclair/typebox';

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: 'Machine-readable error code' }),
    errors: Type.Optional(
      Type.Array(
        Type.Object({ path: Type.String(), message: Type.String(), location: Type.Optional(Type.String()) }),
      ),
    ),
  },
  { additionalProperties: true, description: 'RFC 9457 problem details' },
);

/** The error statuses every authenticated route can answer with. */
export const errorResponses = { 400: Problem, 401: Problem, 404: Problem } as const;

export const ListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export const page = <T extends TSchema>(item: T) =>
  Type.Object({ data: Type.Array(item), nextCursor: Type.Union([Type.String(), Type.Null()]) });

export const Metadata = Type.Record(Type.String(), Type.String({ maxLength: 500 }), {
  maxProperties: 50,
  propertyNames: { minLength: 1, maxLength: 40 },
  description: 'Your own key-value data: up to 50 keys of 40 characters, string values up to 500',
});

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });

export const encodeCursor = (id: string): string => Buffer.from(id).toString('base64url');

export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  return Buffer.from(cursor, 'base64url').toString('utf8');
}

/** Rows fetched with limit + 1: the extra row only tells whether another page exists. */
export function toPage<R extends { id: string }, T>(rows: R[], limit: number, map: (row: R) => T) {
  const data = rows.slice(0, limit);
  const last = data.at(-1);
  return {
    data: data.map(map),
    nextCursor: rows.length > limit && last !== undefined ? encodeCursor(last.id) : null,
  };
}

/** A string enum that keeps its literal type and shows as `enum` in OpenAPI. */
export const stringEnum = <const T extends readonly string[]>(values: T, description?: string) =>
  Type.Unsafe<T[number]>({
    type: 'string',
    enum: [...values],
    ...(description === undefined ? {} : { description }),
  });

/** A value or null, in a response. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** An optional request field that null clears. */
export const nullable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));
