import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export interface PayoutRow {
  id: string;
  provider_id: string;
  environment: Environment;
  amount: number;
  currency: string;
  status: 'pending' | 'paid' | 'failed';
  scheduled_for: string | null;
  arrival_date: Date;
  failure_reason: string | null;
  processor_payout: string;
  sandbox_failure: string | null;
  created_at: Date;
  updated_at: Date;
}

type Tenant = { providerId: string; environment: Environment };

/** Serialises payouts of one balance for the rest of the caller's transaction. */
export async function lockBalance(db: Queryable, tenant: Tenant, currency: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [
    `payout:${tenant.providerId}:${tenant.environment}:${currency}`,
  ]);
}

/** Stores a payout; undefined when that day's scheduled payout of the balance exists already. */
export async function insertPayout(db: Queryable, row: PayoutRow): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(
    `INSERT INTO payouts (id, provider_id, environment, amount, currency, status, scheduled_for, arrival_date, failure_reason,
                          processor_payout, sandbox_failure, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (provider_id, environment, currency, scheduled_for) WHERE scheduled_for IS NOT NULL DO NOTHING
     RETURNING *, scheduled_for::text`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.amount,
      row.currency,
      row.status,
      row.scheduled_for,
      row.arrival_date,
      row.failure_reason,
      row.processor_payout,
      row.sandbox_failure,
      row.created_at,
      row.updated_at,
    ],
  );
  return rows[0];
}

/**
 * The next pending sandbox payout that has arrived, locked (SKIP LOCKED: replicas share the
 * work). A processor's payouts (Stripe's po_…) are settled by its events, never by the date.
 */
export async function lockNextArrived(db: Queryable, now: Date): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(
    `SELECT *, scheduled_for::text FROM payouts WHERE status = 'pending' AND arrival_date <= $1
        AND processor_payout LIKE 'po\\_sandbox\\_%'
      ORDER BY arrival_date, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
    [now],
  );
  return rows[0];
}

/** A payout by the processor's id for it, locked, within one provider's environment. */
export async function lockPayoutByProcessorId(
  db: Queryable,
  tenant: Tenant,
  processorPayout: string,
): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(
    `SELECT *, scheduled_for::text FROM payouts WHERE provider_id = $1 AND environment = $2 AND processor_payout = $3
      FOR UPDATE`,
    [tenant.providerId, tenant.environment, processorPayout],
  );
  return rows[0];
}

export async function settlePayout(
  db: Queryable,
  id: string,
  change: { status: 'paid' | 'failed'; failureReason: string | null; at: Date },
): Promise<PayoutRow> {
  const { rows } = await db.query<PayoutRow>(
    `UPDATE payouts SET status = $2, failure_reason = $3, updated_at = $4 WHERE id = $1 AND status = 'pending'
     RETURNING *, scheduled_for::text`,
    [id, change.status, change.failureReason, change.at],
  );
  const row = rows[0];
  if (row === undefined) throw new Error(`payout ${id} is not pending`);
  return row;
}

export async function findPayout(db: Queryable, tenant: Tenant, id: string): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(
    'SELECT *, scheduled_for::text FROM payouts WHERE provider_id = $1 AND environment = $2 AND id = $3',
    [tenant.providerId, tenant.environment, id],
  );
  return rows[0];
}

export async function listPayouts(
  db: Queryable,
  tenant: Tenant,
  page: { after: string | null; status: string | null; limit: number },
): Promise<PayoutRow[]> {
  const { rows } = await db.query<PayoutRow>(
    `SELECT *, scheduled_for::text FROM payouts WHERE provider_id = $1 AND environment = $2
       AND ($3::text IS NULL OR id > $3) AND ($4::text IS NULL OR status = $4) ORDER BY id LIMIT $5`,
    [tenant.providerId, tenant.environment, page.after, page.status, page.limit],
  );
  return rows;
}
