import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import { LINE_KINDS } from '../billing/repository';

export const ACCOUNTS = [
  'processor_balance',
  'bank',
  'revenue',
  'refunds',
  'disputes',
  'platform_fees',
  'costs',
] as const;
export type Account = (typeof ACCOUNTS)[number];

export const TRANSACTION_KINDS = [
  'payment',
  'refund',
  'refund_reversal',
  'dispute',
  'dispute_reversal',
  'payout',
  'payout_reversal',
  'cost',
] as const;
export type TransactionKind = (typeof TRANSACTION_KINDS)[number];

export interface EntryInsert {
  id: string;
  account: Account;
  /** Debit positive, credit negative, minor units. */
  amount: number;
  recognition_start: Date | null;
  recognition_end: Date | null;
  /** Revenue entries: what the money paid for (null when no line names it). */
  revenue_line: RevenueLine | null;
}

/** What a revenue entry paid for: the kind of invoice line, or a credit pack. */
export const REVENUE_LINES = [...LINE_KINDS, 'top_up'] as const;
export type RevenueLine = (typeof REVENUE_LINES)[number];

type Tenant = { providerId: string; environment: Environment };

/** Writes one balanced transaction (the database refuses an unbalanced one at commit). */
export async function insertTransaction(
  db: Queryable,
  tenant: Tenant,
  txn: {
    transactionId: string;
    kind: TransactionKind;
    currency: string;
    customerId: string | null;
    paymentId: string | null;
    sourceId: string;
    description: string;
    occurredAt: Date;
    entries: EntryInsert[];
  },
): Promise<void> {
  const sum = txn.entries.reduce((total, e) => total + e.amount, 0);
  if (sum !== 0) throw new Error(`ledger transaction ${txn.transactionId} does not balance (${sum})`);
  const entries = txn.entries.filter((e) => e.amount !== 0);
  if (entries.length === 0) return;
  await db.query(
    `INSERT INTO ledger_entries (id, provider_id, environment, transaction_id, kind, account, amount, currency, customer_id,
                                 payment_id, source_id, description, recognition_start, recognition_end, revenue_line, occurred_at)
     SELECT e.id, $1, $2, $3, $4, e.account, e.amount, $5, $6, $7, $8, $9, e.recognition_start, e.recognition_end,
            e.revenue_line, $10
       FROM jsonb_to_recordset($11::jsonb)
         AS e (id text, account text, amount bigint, recognition_start timestamptz, recognition_end timestamptz,
               revenue_line text)`,
    [
      tenant.providerId,
      tenant.environment,
      txn.transactionId,
      txn.kind,
      txn.currency,
      txn.customerId,
      txn.paymentId,
      txn.sourceId,
      txn.description,
      txn.occurredAt,
      JSON.stringify(entries),
    ],
  );
}

/** A balance transaction as listed: the processor balance's movement of one ledger transaction. */
export interface TransactionRow {
  id: string;
  kind: TransactionKind;
  currency: string;
  customer_id: string | null;
  payment_id: string | null;
  source_id: string;
  description: string;
  occurred_at: Date;
  /** What the movement was worth before fees (payments positive; refunds, disputes, payouts negative). */
  amount: number;
  fee: number;
  net: number;
}

export async function listTransactions(
  db: Queryable,
  tenant: Tenant,
  page: {
    after: { at: Date; id: string } | null;
    kind: string | null;
    customerId: string | null;
    currency: string | null;
    from: Date | null;
    to: Date | null;
    limit: number;
  },
): Promise<TransactionRow[]> {
  const { rows } = await db.query<TransactionRow>(
    `SELECT transaction_id AS id, min(kind) AS kind, min(currency) AS currency, min(customer_id) AS customer_id,
            min(payment_id) AS payment_id, min(source_id) AS source_id, min(description) AS description,
            min(occurred_at) AS occurred_at,
            coalesce(sum(amount) FILTER (WHERE account IN ('processor_balance', 'platform_fees')), 0) AS amount,
            coalesce(sum(amount) FILTER (WHERE account = 'platform_fees'), 0) AS fee,
            coalesce(sum(amount) FILTER (WHERE account = 'processor_balance'), 0) AS net
       FROM ledger_entries
      WHERE provider_id = $1 AND environment = $2
        AND ($3::text IS NULL OR kind = $3) AND ($4::text IS NULL OR customer_id = $4)
        AND ($5::text IS NULL OR currency = $5)
        AND ($6::timestamptz IS NULL OR occurred_at >= $6) AND ($7::timestamptz IS NULL OR occurred_at < $7)
      GROUP BY transaction_id
     HAVING ($8::timestamptz IS NULL OR (min(occurred_at), transaction_id) > ($8, $9::text))
      ORDER BY min(occurred_at), transaction_id
      LIMIT $10`,
    [
      tenant.providerId,
      tenant.environment,
      page.kind,
      page.customerId,
      page.currency,
      page.from,
      page.to,
      page.after?.at ?? null,
      page.after?.id ?? null,
      page.limit,
    ],
  );
  return rows;
}

/** The processor balance of one provider, environment and currency. */
export async function processorBalance(db: Queryable, tenant: Tenant, currency: string): Promise<number> {
  const { rows } = await db.query<{ total: number | null }>(
    `SELECT sum(amount)::bigint AS total FROM ledger_entries
      WHERE provider_id = $1 AND environment = $2 AND currency = $3 AND account = 'processor_balance'`,
    [tenant.providerId, tenant.environment, currency],
  );
  return rows[0]?.total ?? 0;
}

/** Every processor balance above zero: what a payout run pays out. */
export async function positiveBalances(
  db: Queryable,
): Promise<Array<{ provider_id: string; environment: Environment; currency: string; balance: number }>> {
  const { rows } = await db.query<{
    provider_id: string;
    environment: Environment;
    currency: string;
    balance: number;
  }>(
    `SELECT provider_id, environment, currency, sum(amount)::bigint AS balance FROM ledger_entries
      WHERE account = 'processor_balance' GROUP BY provider_id, environment, currency HAVING sum(amount) > 0
      ORDER BY provider_id, environment, currency`,
  );
  return rows;
}
