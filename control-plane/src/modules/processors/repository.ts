import type { Queryable } from '../../db/pool';

export interface ConnectionRow {
  provider_id: string;
  processor: 'stripe';
  secret_key_sealed: string;
  webhook_secret_sealed: string;
  key_last4: string;
  key_mode: 'live' | 'test';
  account: string;
  connected_at: Date;
}

export async function findConnection(
  db: Queryable,
  providerId: string,
  processor: 'stripe',
): Promise<ConnectionRow | undefined> {
  const { rows } = await db.query<ConnectionRow>(
    'SELECT * FROM processor_connections WHERE provider_id = $1 AND processor = $2',
    [providerId, processor],
  );
  return rows[0];
}

/** Connects, or replaces the keys of, a provider's processor account. */
export async function upsertConnection(db: Queryable, row: ConnectionRow): Promise<ConnectionRow> {
  const { rows } = await db.query<ConnectionRow>(
    `INSERT INTO processor_connections (provider_id, processor, secret_key_sealed, webhook_secret_sealed, key_last4, key_mode,
                                        account, connected_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (provider_id, processor) DO UPDATE
        SET secret_key_sealed = EXCLUDED.secret_key_sealed, webhook_secret_sealed = EXCLUDED.webhook_secret_sealed,
            key_last4 = EXCLUDED.key_last4, key_mode = EXCLUDED.key_mode, account = EXCLUDED.account,
            connected_at = EXCLUDED.connected_at
     RETURNING *`,
    [
      row.provider_id,
      row.processor,
      row.secret_key_sealed,
      row.webhook_secret_sealed,
      row.key_last4,
      row.key_mode,
      row.account,
      row.connected_at,
    ],
  );
  const stored = rows[0];
  if (stored === undefined) throw new Error('processor connection upsert returned no row');
  return stored;
}

export async function deleteConnection(
  db: Queryable,
  providerId: string,
  processor: 'stripe',
): Promise<boolean> {
  const result = await db.query(
    'DELETE FROM processor_connections WHERE provider_id = $1 AND processor = $2',
    [providerId, processor],
  );
  return (result.rowCount ?? 0) > 0;
}

/**
 * Claims a processor event for this transaction: false when it was applied before (a redelivery).
 * Concurrent deliveries of one event wait on each other here, so it is applied once.
 */
export async function claimEvent(
  db: Queryable,
  event: { providerId: string; processor: string; eventId: string; type: string; outcome: string; at: Date },
): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO processor_events (provider_id, processor, event_id, type, outcome, received_at)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    [event.providerId, event.processor, event.eventId, event.type, event.outcome, event.at],
  );
  return (result.rowCount ?? 0) > 0;
}

/** What applying a claimed event came to (applied, ignored, or why it matched nothing of ours). */
export async function setEventOutcome(
  db: Queryable,
  event: { providerId: string; processor: string; eventId: string; outcome: string },
): Promise<void> {
  await db.query(
    'UPDATE processor_events SET outcome = $4 WHERE provider_id = $1 AND processor = $2 AND event_id = $3',
    [event.providerId, event.processor, event.eventId, event.outcome],
  );
}
