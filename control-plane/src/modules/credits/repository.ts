import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import type { MOVEMENT_KINDS } from './schemas';

export type CreditKind = (typeof MOVEMENT_KINDS)[number];

export interface LedgerRow {
  id: string;
  customer_id: string;
  kind: CreditKind;
  amount: number;
  balance_after: number;
  reason: string | null;
  product_ref: string | null;
  metadata: Record<string, string>;
  created_at: Date;
}

type Tenant = { providerId: string; environment: Environment };

/** The provider's low-balance threshold (credits), 100 when unset. */
export async function lowBalanceThreshold(db: Queryable, providerId: string): Promise<number> {
  const { rows } = await db.query<{ low_balance_threshold: number }>(
    'SELECT low_balance_threshold FROM providers WHERE id = $1',
    [providerId],
  );
  return rows[0]?.low_balance_threshold ?? 100;
}

export async function setLowBalanceThreshold(db: Queryable, providerId: string, value: number, at: Date) {
  await db.query('UPDATE providers SET low_balance_threshold = $2, updated_at = $3 WHERE id = $1', [
    providerId,
    value,
    at,
  ]);
}

export async function findBalance(
  db: Queryable,
  customerId: string,
): Promise<{ balance: number; updated_at: Date } | undefined> {
  const { rows } = await db.query<{ balance: number; updated_at: Date }>(
    'SELECT balance, updated_at FROM credit_balances WHERE customer_id = $1',
    [customerId],
  );
  return rows[0];
}

/** The balance row, created at 0 when missing, locked for the rest of the transaction. */
export async function lockBalance(db: Queryable, customerId: string, at: Date): Promise<number> {
  await db.query(
    'INSERT INTO credit_balances (customer_id, balance, updated_at) VALUES ($1, 0, $2) ON CONFLICT (customer_id) DO NOTHING',
    [customerId, at],
  );
  const { rows } = await db.query<{ balance: number }>(
    'SELECT balance FROM credit_balances WHERE customer_id = $1 FOR UPDATE',
    [customerId],
  );
  return rows[0]?.balance ?? 0;
}

/** The balance row with its usage totals, created at 0 when missing, locked for the transaction. */
export async function lockUsageTotals(
  db: Queryable,
  customerId: string,
  at: Date,
): Promise<{ balance: number; usageDebited: number; usageCalls: number }> {
  await lockBalance(db, customerId, at);
  const { rows } = await db.query<{ balance: string; usage_debited: string; usage_calls: string }>(
    'SELECT balance, usage_debited, usage_calls FROM credit_balances WHERE customer_id = $1',
    [customerId],
  );
  const row = rows[0];
  return {
    balance: Number(row?.balance ?? 0),
    usageDebited: Number(row?.usage_debited ?? 0),
    usageCalls: Number(row?.usage_calls ?? 0),
  };
}

/** The balance after a usage debit, with the usage totals it brought the customer up to. */
export async function setUsageDebited(
  db: Queryable,
  customerId: string,
  totals: { balance: number; usageDebited: number; usageCalls: number },
  at: Date,
) {
  await db.query(
    'UPDATE credit_balances SET balance = $2, usage_debited = $3, usage_calls = $4, updated_at = $5 WHERE customer_id = $1',
    [customerId, totals.balance, totals.usageDebited, totals.usageCalls, at],
  );
}

/**
 * Every credit ever made available to each customer: the balance plus what usage has been
 * debited from it. The cap of the customer's credit counter.
 */
export async function fundedCredits(db: Queryable, customerIds: string[]): Promise<Map<string, number>> {
  if (customerIds.length === 0) return new Map();
  const { rows } = await db.query<{ customer_id: string; funded: string }>(
    'SELECT customer_id, (balance + usage_debited)::text AS funded FROM credit_balances WHERE customer_id = ANY($1)',
    [customerIds],
  );
  return new Map(rows.map((r) => [r.customer_id, Number(r.funded)]));
}

/** Credits of usage debited so far, per customer of a tenant. */
export async function usageDebited(db: Queryable, tenant: Tenant): Promise<Map<string, number>> {
  const { rows } = await db.query<{ customer_id: string; usage_debited: string }>(
    `SELECT b.customer_id, b.usage_debited FROM credit_balances b JOIN customers c ON c.id = b.customer_id
      WHERE c.provider_id = $1 AND c.environment = $2`,
    [tenant.providerId, tenant.environment],
  );
  return new Map(rows.map((r) => [r.customer_id, Number(r.usage_debited)]));
}

/** Tenants with a plan paid from credits (usage-based, pre-paid): the ones whose usage spends credits. */
export async function creditPaidTenants(db: Queryable): Promise<Tenant[]> {
  const { rows } = await db.query<{ provider_id: string; environment: Environment }>(
    `SELECT DISTINCT provider_id, environment FROM plans WHERE type = 'usage-based' AND billing_model = 'pre-paid'`,
  );
  return rows.map((r) => ({ providerId: r.provider_id, environment: r.environment }));
}

export async function setBalance(db: Queryable, customerId: string, balance: number, at: Date) {
  await db.query('UPDATE credit_balances SET balance = $2, updated_at = $3 WHERE customer_id = $1', [
    customerId,
    balance,
    at,
  ]);
}

export async function listMovements(
  db: Queryable,
  customerId: string,
  page: { before: string | null; limit: number },
): Promise<LedgerRow[]> {
  const { rows } = await db.query<LedgerRow>(
    'SELECT * FROM credit_ledger WHERE customer_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3',
    [customerId, page.before, page.limit],
  );
  return rows;
}

/** The movement written under this idempotency key, if any. */
export async function findMovementByKey(
  db: Queryable,
  tenant: Tenant,
  key: string,
): Promise<LedgerRow | undefined> {
  const { rows } = await db.query<LedgerRow>(
    'SELECT * FROM credit_ledger WHERE provider_id = $1 AND environment = $2 AND idempotency_key = $3',
    [tenant.providerId, tenant.environment, key],
  );
  return rows[0];
}

export async function insertMovement(
  db: Queryable,
  row: LedgerRow & { provider_id: string; environment: Environment; idempotency_key: string | null },
): Promise<LedgerRow> {
  const { rows } = await db.query<LedgerRow>(
    `INSERT INTO credit_ledger (id, provider_id, environment, customer_id, kind, amount, balance_after, reason, product_ref,
                                idempotency_key, metadata, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.customer_id,
      row.kind,
      row.amount,
      row.balance_after,
      row.reason,
      row.product_ref,
      row.idempotency_key,
      row.metadata,
      row.created_at,
    ],
  );
  const inserted = rows[0];
  if (inserted === undefined) throw new Error('ledger insert returned no row');
  return inserted;
}
