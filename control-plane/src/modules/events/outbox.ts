import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import { queueCustomerMail } from '../customer-emails/repository';

/** The envelope version providers code against (spec 6.2: a date-form string). */
export const API_VERSION = '2025-10-01';

export interface OutboxEvent {
  providerId: string;
  environment: Environment;
  type: string;
  object: Record<string, unknown>;
  previousAttributes?: Record<string, unknown> | null;
  requestId?: string | null;
  idempotencyKey?: string | null;
  at: Date;
  /** A stable id makes writing the same event twice a no-op (events derived from retried requests). */
  id?: string;
}

const CUSTOMER_KEYS = ['customer', 'customerId', 'customer_id', 'customerRef'] as const;
const isCustomerId = (value: unknown): value is string =>
  typeof value === 'string' && value.startsWith(`${ID.customer}_`);

/**
 * The customer an event is about: a customer.* event's own object (credit events aside, which
 * are about a balance), else the first customer id the object names (objects of different ages
 * spell the field differently; only a `cus_` id counts, never an external reference).
 */
export function customerOf(type: string, object: Record<string, unknown>): string | null {
  if (type.startsWith('customer.') && !type.startsWith('customer.credit.'))
    return isCustomerId(object.id) ? object.id : null;
  for (const key of CUSTOMER_KEYS) {
    const value = object[key];
    if (isCustomerId(value)) return value;
    const nested = value !== null && typeof value === 'object' ? (value as { id?: unknown }).id : undefined;
    if (isCustomerId(nested)) return nested;
  }
  return null;
}

export const unixSeconds = (date: Date): number => Math.floor(date.getTime() / 1000);

/** Writes the event envelope of spec 6.2; call it with the transaction that made the change. */
export async function writeEvent(db: Queryable, event: OutboxEvent): Promise<string> {
  const id = event.id ?? newId(ID.event);
  const customerId = customerOf(event.type, event.object);
  const envelope = {
    id,
    type: event.type,
    created: unixSeconds(event.at),
    api_version: API_VERSION,
    data: { object: event.object, previous_attributes: event.previousAttributes ?? null },
    livemode: event.environment === 'live',
    request: { id: event.requestId ?? null, idempotency_key: event.idempotencyKey ?? null },
  };
  const inserted = await db.query(
    `INSERT INTO outbox_events (id, provider_id, environment, type, payload, created_at, customer_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (id) DO NOTHING`,
    [id, event.providerId, event.environment, event.type, envelope, event.at, customerId],
  );
  if (inserted.rowCount === 0) return id;
  // Its deliveries, in the same transaction: one per enabled endpoint that takes this type. An
  // event of a sandbox test clock carries the clock's (later) time, yet is sent at once.
  await db.query(
    `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
     SELECT 'whd_' || substr(md5($1 || e.id), 1, 26), $1, e.id, 'pending', 0, LEAST($2, now()), $2, $2
       FROM webhook_endpoints e
      WHERE e.provider_id = $3 AND e.environment = $4 AND e.status = 'enabled' AND e.deleted_at IS NULL
        AND (cardinality(e.enabled_events) = 0 OR $5 = ANY(e.enabled_events))`,
    [id, event.at, event.providerId, event.environment, event.type],
  );
  // The mail to the customer it calls for, if its provider sends that kind (customer-emails).
  await queueCustomerMail(db, { ...event, eventId: id, customerId });
  return id;
}
