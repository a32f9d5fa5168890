import { Type } from '@sinclair/typebox';
import { ListQuery, page } from '../../http/schemas';

/** An event as webhooks deliver it (spec 6.2), the same envelope, read back. */
export const Event = Type.Object(
  {
    id: Type.String(),
    type: Type.String(),
    created: Type.Integer({ description: 'Unix seconds (a test clock’s time for its events)' }),
    api_version: Type.String(),
    data: Type.Object({
      object: Type.Record(Type.String(), Type.Unknown()),
      previous_attributes: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
    }),
    livemode: Type.Boolean(),
    request: Type.Object({
      id: Type.Union([Type.String(), Type.Null()]),
      idempotency_key: Type.Union([Type.String(), Type.Null()]),
    }),
  },
  { additionalProperties: true },
);

export const EventPage = page(Event);

export const EventQuery = Type.Object(
  {
    ...ListQuery.properties,
    customerRef: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'Only events about this customer (id or externalRef)',
      }),
    ),
    type: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2000,
        description: 'Only these types, comma-separated (see /v1/sdk/webhooks/event-types)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EventParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
