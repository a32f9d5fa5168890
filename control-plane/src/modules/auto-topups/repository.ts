import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export interface AutoTopUpRow {
  id: string;
  provider_id: string;
  environment: Environment;
  customer_id: string;
  product_id: string;
  threshold: string;
  packs: number;
  status: 'active' | 'stopped';
  attempts: number;
  failures: number;
  retry_at: Date | null;
  last_failure: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Creates the customer's setting, or replaces it (active again, its failures forgotten). */
export async function upsertAutoTopUp(
  db: Queryable,
  row: Pick<AutoTopUpRow, 'id' | 'provider_id' | 'environment' | 'customer_id' | 'product_id' | 'packs'> & {
    threshold: number;
    at: Date;
  },
): Promise<AutoTopUpRow> {
  const { rows } = await db.query<AutoTopUpRow>(
    `INSERT INTO credit_auto_topups (id, provider_id, environment, customer_id, product_id, threshold, packs, status,
                                     created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8, $8)
     ON CONFLICT (customer_id) DO UPDATE
        SET product_id = EXCLUDED.product_id, threshold = EXCLUDED.threshold, packs = EXCLUDED.packs,
            status = 'active', failures = 0, retry_at = NULL, last_failure = NULL, updated_at = EXCLUDED.updated_at
     RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.customer_id,
      row.product_id,
      row.threshold,
      row.packs,
      row.at,
    ],
  );
  const saved = rows[0];
  if (saved === undefined) throw new Error('auto top-up upsert returned no row');
  return saved;
}

export async function findAutoTopUp(db: Queryable, customerId: string): Promise<AutoTopUpRow | undefined> {
  const { rows } = await db.query<AutoTopUpRow>('SELECT * FROM credit_auto_topups WHERE customer_id = $1', [
    customerId,
  ]);
  return rows[0];
}

/** The setting, locked for the caller's transaction: one top-up decision at a time per customer. */
export async function lockAutoTopUp(db: Queryable, customerId: string): Promise<AutoTopUpRow | undefined> {
  const { rows } = await db.query<AutoTopUpRow>(
    'SELECT * FROM credit_auto_topups WHERE customer_id = $1 FOR UPDATE',
    [customerId],
  );
  return rows[0];
}

export async function deleteAutoTopUp(db: Queryable, customerId: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM credit_auto_topups WHERE customer_id = $1', [customerId]);
  return (rowCount ?? 0) > 0;
}

/** What one attempt left: its count, the failures in a row, whether it stopped, when to retry. */
export async function recordAttempt(
  db: Queryable,
  id: string,
  outcome: {
    attempts: number;
    failures: number;
    status: 'active' | 'stopped';
    retryAt: Date | null;
    lastFailure: string | null;
    at: Date;
  },
) {
  await db.query(
    `UPDATE credit_auto_topups
        SET attempts = $2, failures = $3, status = $4, retry_at = $5, last_failure = $6, updated_at = $7
      WHERE id = $1`,
    [
      id,
      outcome.attempts,
      outcome.failures,
      outcome.status,
      outcome.retryAt,
      outcome.lastFailure,
      outcome.at,
    ],
  );
}

/**
 * Customers (not deleted) whose active setting may fire now: the balance (0 without a row) under the
 * threshold, and no failed attempt holding it back.
 */
export async function dueAutoTopUps(
  db: Queryable,
  at: Date,
): Promise<Array<{ customer_id: string; provider_id: string; environment: Environment }>> {
  const { rows } = await db.query<{ customer_id: string; provider_id: string; environment: Environment }>(
    `SELECT a.customer_id, a.provider_id, a.environment
       FROM credit_auto_topups a JOIN customers c ON c.id = a.customer_id
            LEFT JOIN credit_balances b ON b.customer_id = a.customer_id
      WHERE a.status = 'active' AND c.status <> 'deleted' AND (a.retry_at IS NULL OR a.retry_at <= $1)
        AND COALESCE(b.balance, 0) < a.threshold`,
    [at],
  );
  return rows;
}
