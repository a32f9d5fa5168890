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

/**
 * The provider's live ledger movements of the Stripe balance in [from, to), each with the Stripe
 * object it concerns and its gross amount as Stripe's balance shows it (a payment before fees;
 * refunds, disputes and payouts negative, their reversals positive).
 */
export async function stripeMovements(
  db: Queryable,
  providerId: string,
  window: { from: Date; to: Date },
): Promise<Array<{ kind: string; stripe_id: string | null; amount: string; currency: string; ref: string }>> {
  const { rows } = await db.query(
    `SELECT le.kind, le.currency, le.source_id AS ref,
            CASE le.kind
              WHEN 'payment' THEN (SELECT p.processor_payment_intent FROM payments p WHERE p.id = le.source_id AND p.processor = 'stripe')
              WHEN 'refund' THEN (SELECT r.processor_refund FROM refunds r WHERE r.id = le.source_id)
              WHEN 'refund_reversal' THEN (SELECT r.processor_refund FROM refunds r WHERE r.id = le.source_id)
              WHEN 'dispute' THEN (SELECT d.processor_dispute FROM disputes d WHERE d.id = le.source_id)
              WHEN 'dispute_reversal' THEN (SELECT d.processor_dispute FROM disputes d WHERE d.id = le.source_id)
              ELSE (SELECT po.processor_payout FROM payouts po WHERE po.id = le.source_id)
            END AS stripe_id,
            CASE le.kind
              WHEN 'payment' THEN (SELECT p.amount FROM payments p WHERE p.id = le.source_id)
              ELSE sum(le.amount) FILTER (WHERE le.account = 'processor_balance')
            END AS amount
       FROM ledger_entries le
      WHERE le.provider_id = $1 AND le.environment = 'live' AND le.occurred_at >= $2 AND le.occurred_at < $3
        AND le.kind IN ('payment', 'refund', 'refund_reversal', 'dispute', 'dispute_reversal', 'payout', 'payout_reversal')
      GROUP BY le.transaction_id, le.kind, le.source_id, le.currency
      ORDER BY min(le.occurred_at), le.transaction_id`,
    [providerId, window.from, window.to],
  );
  return rows;
}

/** Providers with Stripe connected (the daily reconciliation's list). */
export async function connectedProviders(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ provider_id: string }>(
    "SELECT provider_id FROM processor_connections WHERE processor = 'stripe' ORDER BY provider_id",
  );
  return rows.map((r) => r.provider_id);
}
