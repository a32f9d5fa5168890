import { ID, newId } from '@mcp-meter/contracts/kit';
import { roundHalfEven } from '@mcp-meter/contracts/pricing';
import type { Pool, PoolClient } from '../../db/pool';
import { ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findCustomer } from '../customers/repository';
import {
  type Account,
  type EntryInsert,
  insertTransaction,
  listTransactions,
  type RevenueLine,
  type TransactionKind,
  type TransactionRow,
} from './repository';

/** The platform's fee on each payment: basis points of the amount (half to even) plus a fixed part. */
export interface PlatformFee {
  bps: number;
  fixed: number;
}

/** Part of a payment's amount and the service period it pays for (null: earned when received). */
export interface RevenuePart {
  amount: number;
  start: Date | null;
  end: Date | null;
  /** What the part paid for: the invoice line's kind, or a credit top-up. */
  line?: RevenueLine | undefined;
}

/** The fee on a payment of `amount` minor units, never more than the payment. */
export function platformFeeOf(amount: number, fee: PlatformFee): number {
  // Basis points of the amount as a decimal scaled by 10^12 (÷ 10^4 × 10^12), rounded like every line.
  const rounded = roundHalfEven(BigInt(amount) * BigInt(fee.bps) * 10n ** 8n);
  return Math.min(amount, Number(rounded) + (amount > 0 ? fee.fixed : 0));
}

/**
 * Writes every money movement into the double-entry ledger, inside the transaction that moves
 * the money (the payment's or refund's own), so a movement and its entries commit together.
 */
export class Ledger {
  constructor(private readonly fee: PlatformFee) {}

  /**
   * A payment received: the processor balance gains the amount, revenue is credited by part
   * (each with the period it pays for), and the platform's fee moves from the balance to fees.
   */
  async recordPayment(
    tx: PoolClient,
    auth: AuthContext,
    payment: {
      id: string;
      transactionId: string;
      customerId: string;
      amount: number;
      currency: string;
      description: string;
      at: Date;
      revenue?: RevenuePart[] | undefined;
    },
  ): Promise<void> {
    const parts = (payment.revenue ?? []).filter((p) => p.amount !== 0);
    const covered = parts.reduce((sum, p) => sum + p.amount, 0);
    // Whatever no part names is earned when received.
    if (covered !== payment.amount) parts.push({ amount: payment.amount - covered, start: null, end: null });
    const fee = platformFeeOf(payment.amount, this.fee);
    const entry = (account: EntryInsert['account'], amount: number, part?: RevenuePart): EntryInsert => {
      const spread = part?.start != null && part.end != null && part.end > part.start;
      return {
        id: newId(ID.ledgerEntry),
        account,
        amount,
        recognition_start: spread ? part.start : null,
        recognition_end: spread ? part.end : null,
        revenue_line: account === 'revenue' ? (part?.line ?? null) : null,
      };
    };
    await insertTransaction(tx, auth, {
      transactionId: payment.transactionId,
      kind: 'payment',
      currency: payment.currency,
      customerId: payment.customerId,
      paymentId: payment.id,
      sourceId: payment.id,
      description: payment.description,
      occurredAt: payment.at,
      entries: [
        entry('processor_balance', payment.amount),
        ...parts.map((part) => entry('revenue', -part.amount, part)),
        entry('platform_fees', fee),
        entry('processor_balance', -fee),
      ],
    });
  }

  /** Money returned to the customer: the balance pays it, as contra-revenue. The fee is kept. */
  async recordRefund(
    tx: PoolClient,
    auth: AuthContext,
    refund: { id: string; paymentId: string; customerId: string; amount: number; currency: string; at: Date },
  ): Promise<void> {
    await recordMovement(tx, auth, {
      kind: 'refund',
      currency: refund.currency,
      customerId: refund.customerId,
      paymentId: refund.paymentId,
      sourceId: refund.id,
      description: `Refund of ${refund.paymentId}`,
      at: refund.at,
      moves: [
        ['refunds', refund.amount],
        ['processor_balance', -refund.amount],
      ],
    });
  }
}

export interface Movement {
  kind: TransactionKind;
  currency: string;
  customerId: string | null;
  paymentId: string | null;
  sourceId: string;
  description: string;
  at: Date;
  /** Each account's change: debits positive, credits negative, summing to zero. */
  moves: Array<[Account, number]>;
}

/** One balanced ledger transaction of any other movement (disputes, payouts), in `tx`. */
export async function recordMovement(tx: PoolClient, auth: AuthContext, m: Movement): Promise<void> {
  await insertTransaction(tx, auth, {
    transactionId: newId(ID.transaction),
    kind: m.kind,
    currency: m.currency,
    customerId: m.customerId,
    paymentId: m.paymentId,
    sourceId: m.sourceId,
    description: m.description,
    occurredAt: m.at,
    entries: m.moves.map(([account, amount]) => ({
      id: newId(ID.ledgerEntry),
      account,
      amount,
      recognition_start: null,
      recognition_end: null,
      revenue_line: null,
    })),
  });
}

export const toTransaction = (r: TransactionRow) => ({
  id: r.id,
  type: r.kind,
  amount: r.amount,
  fee: r.fee,
  net: r.net,
  currency: r.currency,
  customerRef: r.customer_id,
  paymentId: r.payment_id,
  source: r.source_id,
  description: r.description,
  createdAt: r.occurred_at.toISOString(),
});
export type Transaction = ReturnType<typeof toTransaction>;

/** Cursor of the transactions listing: the last row's time and id. */
const encodeCursor = (r: TransactionRow) =>
  Buffer.from(`${r.occurred_at.toISOString()}|${r.id}`, 'utf8').toString('base64url');

function decodeCursor(cursor: string | undefined): { at: Date; id: string } | null {
  if (cursor === undefined) return null;
  const [at, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const date = new Date(at ?? '');
  if (id === undefined || id === '' || Number.isNaN(date.getTime()))
    throw new ValidationError([
      { path: '/cursor', message: 'is not a cursor this listing gave', location: 'querystring' },
    ]);
  return { at: date, id };
}

function instant(value: string | undefined, field: string): Date | null {
  if (value === undefined) return null;
  const date = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(date.getTime()))
    throw new ValidationError([
      { path: `/${field}`, message: 'must be an ISO-8601 date or date-time', location: 'querystring' },
    ]);
  return date;
}

export interface TransactionQuery {
  limit: number;
  cursor?: string | undefined;
  type?: string | undefined;
  customerRef?: string | undefined;
  currency?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
}

/** The transactions listing: the ledger seen as balance transactions (payment, refund, …). */
export class TransactionService {
  constructor(private readonly pool: Pool) {}

  async list(auth: AuthContext, query: TransactionQuery) {
    const filter = await this.filter(auth, query);
    if (filter === undefined) return { data: [], nextCursor: null };
    const rows = await listTransactions(this.pool, auth, {
      ...filter,
      after: decodeCursor(query.cursor),
      limit: query.limit + 1,
    });
    const data = rows.slice(0, query.limit);
    const last = data.at(-1);
    return {
      data: data.map(toTransaction),
      nextCursor: rows.length > query.limit && last !== undefined ? encodeCursor(last) : null,
    };
  }

  /** Every matching transaction, page by page, at most `max` (the CSV export). */
  async *all(auth: AuthContext, query: Omit<TransactionQuery, 'limit' | 'cursor'>, max: number) {
    const filter = await this.filter(auth, query);
    if (filter === undefined) return;
    let after: { at: Date; id: string } | null = null;
    for (let sent = 0; sent < max; ) {
      const rows = await listTransactions(this.pool, auth, {
        ...filter,
        after,
        limit: Math.min(1000, max - sent),
      });
      for (const row of rows) yield toTransaction(row);
      sent += rows.length;
      const last = rows.at(-1);
      if (last === undefined || rows.length < 1000) return;
      after = { at: last.occurred_at, id: last.id };
    }
  }

  private async filter(auth: AuthContext, query: Omit<TransactionQuery, 'limit' | 'cursor'>) {
    let customerId: string | null = null;
    if (query.customerRef !== undefined) {
      const customer = await findCustomer(this.pool, auth, query.customerRef);
      if (customer === undefined) return undefined;
      customerId = customer.id;
    }
    return {
      kind: query.type ?? null,
      customerId,
      currency: query.currency?.toLowerCase() ?? null,
      from: instant(query.from, 'from'),
      to: instant(query.to, 'to'),
    };
  }
}
