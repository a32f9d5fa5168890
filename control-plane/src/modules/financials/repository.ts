import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import type { Account } from '../ledger/repository';

type Tenant = { providerId: string; environment: Environment };

/** Sums of each account's entries in [from, to), and how many there were. */
export async function accountTotals(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  from: Date,
  to: Date,
): Promise<Map<Account, { total: number; entries: number }>> {
  const { rows } = await db.query<{ account: Account; total: number; entries: number }>(
    `SELECT account, sum(amount)::bigint AS total, count(*)::bigint AS entries FROM ledger_entries
      WHERE provider_id = $1 AND environment = $2 AND currency = $3 AND occurred_at >= $4 AND occurred_at < $5
      GROUP BY account`,
    [tenant.providerId, tenant.environment, currency, from, to],
  );
  return new Map(rows.map((r) => [r.account, { total: r.total, entries: r.entries }]));
}

/** The processor balance before `at`. */
export async function balanceBefore(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  at: Date,
): Promise<number> {
  const { rows } = await db.query<{ total: number | null }>(
    `SELECT sum(amount)::bigint AS total FROM ledger_entries
      WHERE provider_id = $1 AND environment = $2 AND currency = $3 AND account = 'processor_balance' AND occurred_at < $4`,
    [tenant.providerId, tenant.environment, currency, at],
  );
  return rows[0]?.total ?? 0;
}

export interface RevenueEntry {
  amount: number;
  occurred_at: Date;
  recognition_start: Date | null;
  recognition_end: Date | null;
}

/**
 * Revenue entries received before `asOf` that may still be earning after `from`: those received
 * from `from` on, and those whose service period runs past `from`.
 */
export async function revenueEntries(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  from: Date,
  asOf: Date,
): Promise<RevenueEntry[]> {
  const { rows } = await db.query<RevenueEntry>(
    `SELECT -amount AS amount, occurred_at, recognition_start, recognition_end FROM ledger_entries
      WHERE provider_id = $1 AND environment = $2 AND currency = $3 AND account = 'revenue' AND occurred_at < $5
        AND (occurred_at >= $4 OR recognition_end > $4)`,
    [tenant.providerId, tenant.environment, currency, from, asOf],
  );
  return rows;
}

/** Currencies with ledger entries in [from, to), most entries first. */
export async function currenciesIn(
  db: Queryable,
  tenant: Tenant,
  from: Date | null,
  to: Date | null,
): Promise<string[]> {
  const { rows } = await db.query<{ currency: string }>(
    `SELECT currency FROM ledger_entries
      WHERE provider_id = $1 AND environment = $2 AND ($3::timestamptz IS NULL OR occurred_at >= $3)
        AND ($4::timestamptz IS NULL OR occurred_at < $4)
      GROUP BY currency ORDER BY count(*) DESC, currency`,
    [tenant.providerId, tenant.environment, from, to],
  );
  return rows.map((r) => r.currency);
}
