import type { Static } from '@sinclair/typebox';
import type { Pool } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findCustomer } from '../customers/repository';
import { EVENT_TYPE_SET } from '../webhooks/catalog';
import { type EventPosition, findEvent, listEvents } from './repository';
import type { EventQuery } from './schemas';

export const cursorOf = (position: EventPosition): string =>
  Buffer.from(`${position.createdAt.toISOString()}|${position.id}`).toString('base64url');

/** A cursor this service made, or a 400 naming it: a hand-made one is never guessed at. */
export function positionOf(cursor: string): EventPosition {
  const [at, id, extra] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(at ?? '');
  if (id === undefined || id === '' || extra !== undefined || Number.isNaN(createdAt.getTime()))
    throw new ValidationError([
      { path: '/cursor', message: 'is not a cursor this API gave', location: 'querystring' },
    ]);
  return { createdAt, id };
}

/**
 * The events the outbox recorded (what webhooks deliver), newest first: all of them, a
 * customer's, or some types'. A customer named but not found is 404, as elsewhere.
 */
export class EventService {
  constructor(private readonly pool: Pool) {}

  async list(auth: AuthContext, query: Static<typeof EventQuery>) {
    const types = query.type?.split(',').map((t) => t.trim());
    const unknown = types?.filter((t) => !EVENT_TYPE_SET.has(t)) ?? [];
    if (unknown.length > 0)
      throw new ValidationError([
        {
          path: '/type',
          message: `names no event type: ${unknown.slice(0, 5).join(', ')}`,
          location: 'querystring',
        },
      ]);
    let customerId: string | undefined;
    if (query.customerRef !== undefined) {
      const customer = await findCustomer(this.pool, auth, query.customerRef);
      if (customer === undefined)
        throw new NotFoundError('customer_not_found', `No customer ${query.customerRef}`);
      customerId = customer.id;
    }
    const rows = await listEvents(this.pool, auth, {
      customerId,
      types,
      ...(query.cursor === undefined ? {} : { after: positionOf(query.cursor) }),
      limit: query.limit,
    });
    const data = rows.slice(0, query.limit);
    const last = data.at(-1);
    return {
      data: data.map((row) => row.payload),
      nextCursor:
        rows.length > query.limit && last !== undefined
          ? cursorOf({ createdAt: last.created_at, id: last.id })
          : null,
    };
  }

  async get(auth: AuthContext, id: string) {
    const row = await findEvent(this.pool, auth, id);
    if (row === undefined) throw new NotFoundError('event_not_found', `No event ${id}`);
    return row.payload;
  }
}
