import { ValidationError } from '../errors';

/** Where a newest-first list stopped: its last row's time and id (the id breaks ties). */
export interface KeysetPosition {
  createdAt: Date;
  id: string;
}

/** The opaque `nextCursor` of a position. */
export const cursorOf = (position: KeysetPosition): string =>
  Buffer.from(`${position.createdAt.toISOString()}|${position.id}`).toString('base64url');

/** A cursor this API made, or a 400 naming it: a hand-made one is never guessed at. */
export function positionOf(cursor: string): KeysetPosition {
  const [at, id, extra] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(at ?? '');
  if (id === undefined || id === '' || extra !== undefined || Number.isNaN(createdAt.getTime()))
    throw new ValidationError([
      { path: '/cursor', message: 'is not a cursor this API gave', location: 'querystring' },
    ]);
  return { createdAt, id };
}

/**
 * One page of a list read with one row more than `limit` (that row says a next page exists):
 * the page's items, and the cursor of its last row when there is more.
 */
export function keysetPage<Row extends { created_at: Date; id: string }, Item>(
  rows: readonly Row[],
  limit: number,
  toItem: (row: Row) => Item,
): { data: Item[]; nextCursor: string | null } {
  const data = rows.slice(0, limit);
  const last = data.at(-1);
  return {
    data: data.map(toItem),
    nextCursor:
      rows.length > limit && last !== undefined
        ? cursorOf({ createdAt: last.created_at, id: last.id })
        : null,
  };
}
