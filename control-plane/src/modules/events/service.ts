import type { Static } from '@sinclair/typebox';
import type { Pool } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import { keysetPage, positionOf } from '../../http/keyset';
import type { AuthContext } from '../../tenancy';
import { customerFilter } from '../customers/filter';
import { EVENT_TYPE_SET } from '../webhooks/catalog';
import { findEvent, listEvents } from './repository';
import type { EventQuery } from './schemas';

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
    const customerId = await customerFilter(this.pool, auth, query.customerRef);
    const rows = await listEvents(this.pool, auth, {
      customerId,
      types,
      ...(query.cursor === undefined ? {} : { after: positionOf(query.cursor) }),
      limit: query.limit,
    });
    return keysetPage(rows, query.limit, (row) => row.payload);
  }

  async get(auth: AuthContext, id: string) {
    const row = await findEvent(this.pool, auth, id);
    if (row === undefined) throw new NotFoundError('event_not_found', `No event ${id}`);
    return row.payload;
  }
}
