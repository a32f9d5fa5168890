import type { Static } from '@sinclair/typebox';
import type { Queryable } from '../../db/pool';
import type { KeysetPosition } from '../../http/keyset';
import type { AuthContext as Tenant } from '../../tenancy';
import type { Event } from './schemas';

export interface EventRow {
  id: string;
  type: string;
  /** The envelope writeEvent stored. */
  payload: Static<typeof Event>;
  created_at: Date;
}

/**
 * A page of the tenant's events, newest first, optionally of one customer and of some types,
 * resuming strictly older than `after` in (created_at, id) order; `limit + 1` rows, the extra one
 * only telling whether another page exists.
 */
export async function listEvents(
  db: Queryable,
  tenant: Tenant,
  options: {
    customerId?: string | undefined;
    types?: string[] | undefined;
    after?: KeysetPosition;
    limit: number;
  },
): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT id, type, payload, created_at FROM outbox_events
      WHERE provider_id = $1 AND environment = $2
        AND ($3::text IS NULL OR customer_id = $3)
        AND ($4::text[] IS NULL OR type = ANY($4))
        AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6))
      ORDER BY created_at DESC, id DESC LIMIT $7`,
    [
      tenant.providerId,
      tenant.environment,
      options.customerId ?? null,
      options.types ?? null,
      options.after?.createdAt ?? null,
      options.after?.id ?? null,
      options.limit + 1,
    ],
  );
  return rows;
}

export async function findEvent(db: Queryable, tenant: Tenant, id: string): Promise<EventRow | undefined> {
  const { rows } = await db.query<EventRow>(
    'SELECT id, type, payload, created_at FROM outbox_events WHERE provider_id = $1 AND environment = $2 AND id = $3',
    [tenant.providerId, tenant.environment, id],
  );
  return rows[0];
}
