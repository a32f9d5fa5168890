import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import type { Account, RevenueLine } from '../ledger/repository';
import type { PaidPeriod } from './mrr';

type Tenant = { providerId: string; environment: Environment };

/**
 * Every paid period of a recurring fee starting before `until`, in one currency: the base lines
 * (with a service period) of paid invoices, less the discounts taken off them, with the purchase they paid for. An invoice a plan
 * switch's credit paid in full is paid without a payment, so periods come from invoices.
 */
export async function paidPeriods(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  until: Date,
): Promise<PaidPeriod[]> {
  const { rows } = await db.query<{
    customer_id: string;
    amount: string;
    starts: Date;
    ends: Date;
    ended_at: Date | null;
    billing_cycle: string | null;
    billing_interval_days: number | null;
  }>(
    `SELECT i.customer_id,
            (line ->> 'amount')::bigint + COALESCE((
              SELECT sum((d ->> 'amount')::bigint) FROM jsonb_array_elements(i.lines) AS d
               WHERE d ->> 'kind' = 'discount' AND d ->> 'discounts' = 'base' AND d -> 'period' = line -> 'period'), 0) AS amount,
            (line #>> '{period,start}')::timestamptz AS starts,
            (line #>> '{period,end}')::timestamptz AS ends, pu.ended_at, pu.billing_cycle, pl.billing_interval_days
       FROM invoices i
       JOIN purchases pu ON pu.id = i.purchase_id
       JOIN plans pl ON pl.id = pu.plan_id
      CROSS JOIN jsonb_array_elements(i.lines) AS line
      WHERE i.provider_id = $1 AND i.environment = $2 AND i.currency = $3 AND i.status = 'paid'
        AND line ->> 'kind' = 'base' AND jsonb_typeof(line -> 'period') = 'object'
        AND (line #>> '{period,start}')::timestamptz < $4`,
    [tenant.providerId, tenant.environment, currency, until],
  );
  return rows.map((r) => ({
    customerId: r.customer_id,
    amount: Number(r.amount),
    start: r.starts,
    end: r.ends,
    endedAt: r.ended_at,
    billingCycle: r.billing_cycle,
    intervalDays: r.billing_interval_days,
  }));
}

export interface MonthTotal {
  /** 1-based index of the month the entries fall in. */
  n: number;
  account: Account;
  line: RevenueLine | null;
  /** Whether the entry is earned over a service period. */
  spread: boolean;
  total: number;
}

/** Each month's ledger sums by account and revenue line: months [starts[i], ends[i]). */
export async function monthTotals(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  starts: Date[],
  ends: Date[],
): Promise<MonthTotal[]> {
  const { rows } = await db.query<MonthTotal>(
    `SELECT b.n::int AS n, l.account, l.revenue_line AS line, l.recognition_start IS NOT NULL AS spread,
            sum(l.amount)::bigint AS total
       FROM unnest($4::timestamptz[], $5::timestamptz[]) WITH ORDINALITY AS b (s, e, n)
       JOIN ledger_entries l ON l.occurred_at >= b.s AND l.occurred_at < b.e
      WHERE l.provider_id = $1 AND l.environment = $2 AND l.currency = $3
      GROUP BY 1, 2, 3, 4`,
    [tenant.providerId, tenant.environment, currency, starts, ends],
  );
  return rows.map((r) => ({ ...r, total: Number(r.total) }));
}

/** Each month's count of customers who paid something in it. */
export async function payersByMonth(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  starts: Date[],
  ends: Date[],
): Promise<Map<number, number>> {
  const { rows } = await db.query<{ n: number; payers: number }>(
    `SELECT b.n::int AS n, count(DISTINCT l.customer_id)::int AS payers
       FROM unnest($4::timestamptz[], $5::timestamptz[]) WITH ORDINALITY AS b (s, e, n)
       JOIN ledger_entries l ON l.occurred_at >= b.s AND l.occurred_at < b.e
      WHERE l.provider_id = $1 AND l.environment = $2 AND l.currency = $3 AND l.kind = 'payment'
        AND l.account = 'revenue' AND l.customer_id IS NOT NULL
      GROUP BY 1`,
    [tenant.providerId, tenant.environment, currency, starts, ends],
  );
  return new Map(rows.map((r) => [r.n, r.payers]));
}

/**
 * Customers with a purchase in force at each instant: created by then and not yet ended, on any
 * plan (free and trials included); purchases still waiting for their first payment do not count.
 */
export async function activeCustomersAt(
  db: Queryable,
  tenant: Tenant,
  instants: Date[],
): Promise<Map<number, number>> {
  const { rows } = await db.query<{ n: number; active: number }>(
    `SELECT b.n::int AS n, count(DISTINCT p.customer_id)::int AS active
       FROM unnest($3::timestamptz[]) WITH ORDINALITY AS b (at, n)
       JOIN purchases p ON p.created_at <= b.at AND (p.ended_at IS NULL OR p.ended_at > b.at)
      WHERE p.provider_id = $1 AND p.environment = $2 AND p.status <> 'pending'
      GROUP BY 1`,
    [tenant.providerId, tenant.environment, instants],
  );
  return new Map(rows.map((r) => [r.n, r.active]));
}
