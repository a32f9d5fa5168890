import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

/** A charge the processor made (migration 051): see journal.ts. */
export interface ProcessorChargeRow {
  provider_id: string;
  environment: Environment;
  idempotency_key: string;
  attempt_key: string;
  customer_id: string;
  payment_id: string;
  processor: string;
  processor_payment_intent: string;
  amount: number;
  currency: string;
  /** What the processor was asked with (migration 053; null on older rows). */
  metadata: Record<string, string> | null;
  status: 'unrecorded' | 'recorded' | 'refunding' | 'refunded' | 'refund_failed';
  processor_refund: string | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

type Scope = { providerId: string; environment: Environment };

export type AttemptCharge = Pick<
  ProcessorChargeRow,
  'idempotency_key' | 'status' | 'payment_id' | 'amount' | 'currency' | 'metadata'
>;

/** The charges made for one attempt, oldest first, locked until the caller's transaction ends. */
export async function lockAttemptCharges(
  db: Queryable,
  scope: Scope,
  attemptKey: string,
): Promise<AttemptCharge[]> {
  const { rows } = await db.query(
    `SELECT idempotency_key, status, payment_id, amount, currency, metadata FROM processor_charges
      WHERE provider_id = $1 AND environment = $2 AND attempt_key = $3
      ORDER BY created_at, idempotency_key FOR UPDATE`,
    [scope.providerId, scope.environment, attemptKey],
  );
  return rows;
}

type NewCharge = Omit<ProcessorChargeRow, 'status' | 'processor_refund' | 'failure_reason' | 'updated_at'>;

/** A charge's first eleven columns, in the order both inserts below name them. */
const chargeValues = (row: NewCharge) => [
  row.provider_id,
  row.environment,
  row.idempotency_key,
  row.attempt_key,
  row.customer_id,
  row.payment_id,
  row.processor,
  row.processor_payment_intent,
  row.amount,
  row.currency,
  row.metadata === null ? null : JSON.stringify(row.metadata),
];

/** Writes a charge the processor made; a row already there for its key is kept as it is. */
export async function insertProcessorCharge(db: Queryable, row: ProcessorChargeRow): Promise<void> {
  await db.query(
    `INSERT INTO processor_charges (provider_id, environment, idempotency_key, attempt_key, customer_id, payment_id,
                                    processor, processor_payment_intent, amount, currency, metadata, status,
                                    processor_refund, failure_reason, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
     ON CONFLICT DO NOTHING`,
    [
      ...chargeValues(row),
      row.status,
      row.processor_refund,
      row.failure_reason,
      row.created_at,
      row.updated_at,
    ],
  );
}

/**
 * Writes a charge the processor announced, unrecorded, when it names a customer of the scope and
 * no row holds its key yet. Answers the intent of the row that holds the key afterwards
 * (undefined when none does: the customer is not the scope's).
 */
export async function learnProcessorCharge(db: Queryable, row: NewCharge): Promise<string | undefined> {
  const inserted = await db.query<{ processor_payment_intent: string }>(
    `INSERT INTO processor_charges (provider_id, environment, idempotency_key, attempt_key, customer_id, payment_id,
                                    processor, processor_payment_intent, amount, currency, metadata, status,
                                    created_at, updated_at)
     SELECT $1, $2, $3, $4, c.id, $6, $7, $8, $9, $10, $11, 'unrecorded', $12, $12
       FROM customers c WHERE c.id = $5 AND c.provider_id = $1 AND c.environment = $2
     ON CONFLICT DO NOTHING
     RETURNING processor_payment_intent`,
    [...chargeValues(row), row.created_at],
  );
  if (inserted.rows[0] !== undefined) return inserted.rows[0].processor_payment_intent;
  // A statement of its own: it sees a row committed while the insert waited on it.
  const { rows } = await db.query<{ processor_payment_intent: string }>(
    `SELECT processor_payment_intent FROM processor_charges
      WHERE provider_id = $1 AND environment = $2 AND idempotency_key = $3`,
    [row.provider_id, row.environment, row.idempotency_key],
  );
  return rows[0]?.processor_payment_intent;
}

/** The charge as recorded by payment `paymentId`: answers whether an unrecorded row was there. */
export async function markChargeRecorded(
  db: Queryable,
  scope: Scope,
  key: string,
  paymentId: string,
  at: Date,
): Promise<boolean> {
  const updated = await db.query(
    `UPDATE processor_charges SET status = 'recorded', payment_id = $4, updated_at = $5
      WHERE provider_id = $1 AND environment = $2 AND idempotency_key = $3 AND status = 'unrecorded'`,
    [scope.providerId, scope.environment, key, paymentId, at],
  );
  return (updated.rowCount ?? 0) > 0;
}

/**
 * Charges to act on: unrecorded since before `unrecordedBefore`, or with a refund under way;
 * oldest first, at most `limit`.
 */
export async function dueCharges(
  db: Queryable,
  unrecordedBefore: Date,
  limit: number,
): Promise<Array<Pick<ProcessorChargeRow, 'provider_id' | 'environment' | 'idempotency_key'>>> {
  const { rows } = await db.query(
    `SELECT provider_id, environment, idempotency_key FROM processor_charges
      WHERE (status = 'unrecorded' AND created_at < $1) OR status = 'refunding'
      ORDER BY created_at LIMIT $2`,
    [unrecordedBefore, limit],
  );
  return rows;
}

/** One charge, locked for the caller's transaction; undefined when another holds it. */
export async function lockCharge(
  db: Queryable,
  scope: Scope,
  key: string,
): Promise<ProcessorChargeRow | undefined> {
  const { rows } = await db.query(
    `SELECT * FROM processor_charges
      WHERE provider_id = $1 AND environment = $2 AND idempotency_key = $3 FOR UPDATE SKIP LOCKED`,
    [scope.providerId, scope.environment, key],
  );
  return rows[0];
}

/** Whether a succeeded payment records the processor's charge `intent` (under another key). */
export async function intentRecorded(db: Queryable, scope: Scope, intent: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM payments WHERE provider_id = $1 AND environment = $2 AND processor_payment_intent = $3
        AND status = 'succeeded' LIMIT 1`,
    [scope.providerId, scope.environment, intent],
  );
  return rows.length > 0;
}

/** Where the charge's refund stands. */
export async function setChargeStatus(
  db: Queryable,
  scope: Scope,
  key: string,
  change: Pick<ProcessorChargeRow, 'status' | 'processor_refund' | 'failure_reason'>,
  at: Date,
): Promise<void> {
  await db.query(
    `UPDATE processor_charges SET status = $4, processor_refund = $5, failure_reason = $6, updated_at = $7
      WHERE provider_id = $1 AND environment = $2 AND idempotency_key = $3`,
    [
      scope.providerId,
      scope.environment,
      key,
      change.status,
      change.processor_refund,
      change.failure_reason,
      at,
    ],
  );
}
