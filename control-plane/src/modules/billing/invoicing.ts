import { randomBytes } from 'node:crypto';
import { ID, newId } from '@mcp-meter/contracts/kit';
import { priceUsage } from '@mcp-meter/contracts/pricing';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Clock } from '../../clock';
import type { PoolClient, Queryable } from '../../db/pool';
import { UnavailableError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import type { ChargeRequest, PaymentService } from '../payments/service';
import { type PlanSettings, pricingOf } from '../plans/rules';
import { endOnceDiscount, type PurchaseRow } from '../purchases/repository';
import { discountedAt, hasDiscount } from './discounts';
import {
  finalizeDraft,
  type InvoiceRow,
  insertInvoice,
  lastUsageInvoice,
  lockInvoiceOfPeriod,
  recordAttempt,
  requestedAttempts,
  type StoredLine,
  saveDraft,
} from './repository';

/** What a closing usage period counted, as the invoice keeps it. */
export interface PeriodUsage {
  start: Date;
  end: Date;
  /** Units on the requests meter in [start, end), before free units. */
  units: number;
  /** Free units of the period: the plan's plus any carried over. */
  freeUnits: number;
  /** Units of the previous period that arrived after it was billed, billed now. */
  lateUnits: number;
}

export interface InvoiceDraft {
  purchase: PurchaseRow;
  periodKey: string;
  billingReason: 'first_payment' | 'renewal' | 'trial_conversion' | 'final_usage' | 'checkout';
  chargeReason: ChargeRequest['reason'];
  lines: StoredLine[];
  usage?: PeriodUsage | undefined;
}

export interface Collection {
  invoice: InvoiceRow;
  status: 'succeeded' | 'failed';
  failureReason: string | null;
}

const iso = (d: Date) => d.toISOString();

/**
 * Invoices: every charge of a purchase is one, made of lines that sum to its total, and paid by
 * one payment (or several attempts of one, under dunning). An invoice is unique per purchase and
 * period boundary, so closing a period twice (two replicas, a rerun after a crash) finds the
 * invoice already there instead of billing again. Everything here runs inside the caller's
 * transaction: the invoice, its payment, its events and the purchase's move commit together.
 */
export class Invoicing {
  constructor(
    private readonly clock: Clock,
    private readonly payments: PaymentService,
    private readonly reader: UsageReader,
  ) {}

  /**
   * Usage lines for the period [start, end) of a purchase: the units the plan's limit counts on
   * the requests meter (admitted calls and reported usage of the product; refusals never), less
   * the free units, priced by the plan. Records of the previous billed period that reached the
   * store after it was billed are added as a late-usage line: the difference they make to that
   * period's price (never below zero).
   */
  async usageLines(
    tx: PoolClient,
    auth: AuthContext,
    purchase: PurchaseRow,
    settings: PlanSettings,
    start: Date,
    end: Date,
  ): Promise<{ lines: StoredLine[]; usage: PeriodUsage }> {
    const count = (from: Date, to: Date) => this.unitsOf(tx, auth, purchase, from, to);
    const pricing = pricingOf(settings);
    const units = await count(start, end);
    const freeUnits = settings.freeUnits + purchase.rollover_units;
    const priced = priceUsage(pricing, BigInt(units), BigInt(freeUnits), 'call');
    const period = { start: iso(start), end: iso(end) };
    const lines: StoredLine[] = priced.lines.map((line) => ({ kind: 'usage', ...line, period }));

    let lateUnits = 0;
    const previous = await lastUsageInvoice(tx, purchase.id);
    if (
      previous?.usage_period_start != null &&
      previous.usage_period_end != null &&
      previous.usage_units !== null &&
      previous.usage_period_end <= start
    ) {
      const recount = await count(previous.usage_period_start, previous.usage_period_end);
      lateUnits = Math.max(0, recount - previous.usage_units);
      if (lateUnits > 0) {
        const free = BigInt(previous.free_units ?? 0);
        const before = priceUsage(pricing, BigInt(previous.usage_units), free).total;
        const after = priceUsage(pricing, BigInt(recount), free).total;
        const amount = Math.max(0, after - before);
        lines.push({
          kind: 'late_usage',
          description: `Late usage for ${iso(previous.usage_period_start).slice(0, 10)} – ${iso(previous.usage_period_end).slice(0, 10)}: ${lateUnits} call${lateUnits === 1 ? '' : 's'}`,
          quantity: lateUnits,
          unitAmount: amount.toString(),
          amount,
          period: { start: iso(previous.usage_period_start), end: iso(previous.usage_period_end) },
        });
      }
    }
    return { lines, usage: { start, end, units, freeUnits, lateUnits } };
  }

  /**
   * The statement line of a period [start, end) of a purchase paid from credits: the calls
   * admitted for its product and the credits they spent from the balance (what the records
   * carry). Its amount is 0: the credits were paid for when they were bought, and the usage
   * settlement debits them from the balance; the invoice shows where they went.
   */
  async creditLine(
    tx: PoolClient,
    auth: AuthContext,
    purchase: PurchaseRow,
    start: Date,
    end: Date,
  ): Promise<StoredLine> {
    const meter = await findMeter(tx, auth.providerId, auth.environment, REQUESTS_METER);
    if (meter === undefined) throw new Error(`provider ${auth.providerId} has no requests meter`);
    let spent: { credits: number; calls: number };
    try {
      const usage = await this.reader.creditUsage({
        ...auth,
        meterRef: meter.id,
        customerRef: purchase.customer_id,
        productId: purchase.product_id,
        from: start,
        to: end,
      });
      spent = usage.get(purchase.customer_id) ?? { credits: 0, calls: 0 };
    } catch {
      throw new UnavailableError('usage_store_unavailable', 'Usage storage is unreachable; try again');
    }
    const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
    return {
      kind: 'credits_applied',
      description: `${plural(spent.calls, 'call')} paid from the credit balance: ${plural(spent.credits, 'credit')}`,
      quantity: spent.calls,
      unitAmount: '0',
      amount: 0,
      period: { start: iso(start), end: iso(end) },
      credits: spent.credits,
    };
  }

  /**
   * The units a purchase's plan bills in [from, to): what its limit counts on the requests meter
   * (admitted calls and usage reported for the product; refusals never). 503 when ClickHouse
   * cannot be read.
   */
  async unitsOf(
    db: Queryable,
    auth: AuthContext,
    purchase: Pick<PurchaseRow, 'customer_id' | 'product_id'>,
    from: Date,
    to: Date,
  ): Promise<number> {
    const meter = await findMeter(db, auth.providerId, auth.environment, REQUESTS_METER);
    if (meter === undefined) throw new Error(`provider ${auth.providerId} has no requests meter`);
    try {
      return await this.reader.limitUsage({
        ...auth,
        meterRef: meter.id,
        customerRef: purchase.customer_id,
        productId: purchase.product_id,
        from,
        to,
      });
    } catch {
      throw new UnavailableError('usage_store_unavailable', 'Usage storage is unreachable; try again');
    }
  }

  /**
   * Issues the invoice of a period and collects it: a total of zero is paid at once, anything
   * else is charged to the customer's default card (attempt 0). A draft of the period (see
   * `draft`) is finalized with these closing lines; when the period already has its finalized
   * invoice, that one is collected instead of a second being made.
   */
  async issue(tx: PoolClient, auth: AuthContext, draft: InvoiceDraft): Promise<Collection> {
    const at = this.clock.now();
    const { purchase } = draft;
    const row = this.rowOf(auth, draft, at);
    const inserted = await insertInvoice(tx, { ...row, status: 'open', finalized_at: at });
    let invoice = inserted ?? (await lockInvoiceOfPeriod(tx, purchase.id, draft.periodKey));
    if (invoice === undefined) throw new Error(`invoice ${purchase.id}/${draft.periodKey} vanished`);
    const finalized = invoice.status === 'draft' ? await finalizeDraft(tx, invoice.id, row, at) : undefined;
    invoice = finalized ?? invoice;
    // A `once` discount is spent by the first invoice it took money off.
    if ((inserted !== undefined || finalized !== undefined) && hasDiscount(invoice.lines))
      await endOnceDiscount(tx, purchase.id, at);
    if ((inserted !== undefined || finalized !== undefined) && draft.usage !== undefined) {
      const usageAmount = draft.lines
        .filter((l) => l.kind === 'usage' || l.kind === 'late_usage')
        .reduce((sum, line) => sum + line.amount, 0);
      await writeEvent(tx, {
        ...auth,
        type: 'usage.charged',
        object: {
          id: invoice.id,
          invoice: invoice.id,
          purchase: purchase.id,
          customer: purchase.customer_id,
          product: purchase.product_id,
          plan: purchase.plan_id,
          meterName: REQUESTS_METER,
          quantity: draft.usage.units,
          freeUnits: draft.usage.freeUnits,
          billableUnits: Math.max(0, draft.usage.units - draft.usage.freeUnits),
          lateUnits: draft.usage.lateUnits,
          amount: usageAmount,
          currency: purchase.currency,
          periodStart: unixSeconds(draft.usage.start),
          periodEnd: unixSeconds(draft.usage.end),
          created: unixSeconds(at),
        },
        at,
      });
    }
    if (invoice.status === 'paid') return { invoice, status: 'succeeded', failureReason: null };
    if (invoice.status !== 'open')
      return { invoice, status: 'failed', failureReason: `invoice_${invoice.status}` };
    return this.collect(tx, auth, invoice, draft.chargeReason, invoice.attempt_count);
  }

  /**
   * Stores the invoice a period will close with, as it stands now, as a `draft`: no payment, no
   * event, no customer copy. Refreshed on every pass until the period closes and `issue`
   * finalizes it; a period already finalized is left alone.
   */
  async draft(tx: PoolClient, auth: AuthContext, draft: InvoiceDraft): Promise<InvoiceRow | undefined> {
    return saveDraft(tx, this.rowOf(auth, draft, this.clock.now()));
  }

  /**
   * The row of an invoice issued (or drafted) at `at`: the draft's lines less the purchase's
   * discount when it applies then (lines that carry a discount already, such as a first invoice
   * whose proration was worked out on the discounted charges, are kept as they are).
   */
  private rowOf(auth: AuthContext, draft: InvoiceDraft, at: Date) {
    const { purchase } = draft;
    const discount = purchase.discount ?? null;
    const lines = discountedAt(draft.lines, discount, at);
    return {
      id: newId(ID.invoice),
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: purchase.customer_id,
      purchase_id: purchase.id,
      product_id: purchase.product_id,
      plan_id: purchase.plan_id,
      period_key: draft.periodKey,
      billing_reason: draft.billingReason,
      currency: purchase.currency,
      usage_period_start: draft.usage?.start ?? null,
      usage_period_end: draft.usage?.end ?? null,
      usage_units: draft.usage?.units ?? null,
      free_units: draft.usage?.freeUnits ?? null,
      lines,
      total: lines.reduce((sum, line) => sum + line.amount, 0),
      created_at: at,
      access_token: randomBytes(32).toString('hex'),
    };
  }

  /** Charges the open invoice of a purchase's period again (a dunning retry). */
  async retry(
    tx: PoolClient,
    auth: AuthContext,
    purchase: PurchaseRow,
    periodKey: string,
    attempt: number,
  ): Promise<Collection | undefined> {
    const invoice = await lockInvoiceOfPeriod(tx, purchase.id, periodKey);
    if (invoice === undefined) return undefined;
    if (invoice.status === 'paid') return { invoice, status: 'succeeded', failureReason: null };
    if (invoice.status !== 'open')
      return { invoice, status: 'failed', failureReason: `invoice_${invoice.status}` };
    return this.collect(tx, auth, invoice, 'dunning_retry', attempt);
  }

  /** Charges an open invoice, locked by the caller, once more (attempt = its attempts so far). */
  async collectAgain(tx: PoolClient, auth: AuthContext, invoice: InvoiceRow): Promise<Collection> {
    return this.collect(tx, auth, invoice, 'dunning_retry', invoice.attempt_count);
  }

  /**
   * Charges an open invoice, locked by the caller, now because it was asked to: an attempt of its
   * own, numbered −1, −2, … per invoice, so its charge key never meets a dunning retry's and the
   * dunning schedule neither counts it nor moves.
   */
  async collectOnRequest(tx: PoolClient, auth: AuthContext, invoice: InvoiceRow): Promise<Collection> {
    const attempt = -(await requestedAttempts(tx, invoice.id)) - 1;
    return this.collect(tx, auth, invoice, 'dunning_retry', attempt);
  }

  /** Dunning gave up: the invoice stays unpaid for good. */
  async markUncollectible(tx: PoolClient, purchaseId: string, periodKey: string): Promise<void> {
    const invoice = await lockInvoiceOfPeriod(tx, purchaseId, periodKey);
    if (invoice?.status !== 'open') return;
    await recordAttempt(tx, {
      id: invoice.id,
      paymentId: null,
      status: 'uncollectible',
      amountPaid: 0,
      at: this.clock.now(),
    });
  }

  private async collect(
    tx: PoolClient,
    auth: AuthContext,
    invoice: InvoiceRow,
    reason: ChargeRequest['reason'],
    attempt: number,
  ): Promise<Collection> {
    const at = this.clock.now();
    if (invoice.total === 0) {
      const paid = await recordAttempt(tx, {
        id: invoice.id,
        paymentId: null,
        status: 'paid',
        amountPaid: 0,
        at,
      });
      return { invoice: paid, status: 'succeeded', failureReason: null };
    }
    const charged = await this.payments.charge(tx, auth, {
      customerId: invoice.customer_id,
      purchaseId: invoice.purchase_id,
      productId: invoice.product_id,
      planId: invoice.plan_id,
      amount: invoice.total,
      currency: invoice.currency,
      reason,
      periodKey: invoice.period_key,
      attempt,
      invoiceId: invoice.id,
      // Each line is earned over the period it bills for: usage already, a base price in advance
      // over the coming period; a setup fee when paid.
      // A discount is less revenue of the line it discounts (recurring, usage, one-time).
      revenue: invoice.lines.map((line) => ({
        amount: line.amount,
        start: line.period === null ? null : new Date(line.period.start),
        end: line.period === null ? null : new Date(line.period.end),
        line: line.kind === 'discount' ? line.discounts : line.kind,
      })),
    });
    const updated = await recordAttempt(tx, {
      id: invoice.id,
      paymentId: charged.paymentId,
      status: charged.status === 'succeeded' ? 'paid' : 'open',
      amountPaid: charged.status === 'succeeded' ? invoice.total : 0,
      at,
    });
    return { invoice: updated, status: charged.status, failureReason: charged.failureReason };
  }
}

/** The line of a period's base price, paid in advance for [start, end). */
export function baseLine(planName: string, amount: number, start: Date, end: Date | null): StoredLine {
  return {
    kind: 'base',
    description:
      end === null ? planName : `${planName} (${iso(start).slice(0, 10)} – ${iso(end).slice(0, 10)})`,
    quantity: 1,
    unitAmount: amount.toString(),
    amount,
    period: end === null ? null : { start: iso(start), end: iso(end) },
  };
}

export function setupFeeLine(amount: number): StoredLine {
  return {
    kind: 'setup_fee',
    description: 'Setup fee',
    quantity: 1,
    unitAmount: amount.toString(),
    amount,
    period: null,
  };
}

/**
 * Unused free units a closed period carries into the next (plans with rolloverUnusedUnits): what
 * was left of the period's free units, at most one period's worth, so they never pile up.
 */
export function rolloverAfter(
  invoice: Pick<InvoiceRow, 'usage_units' | 'free_units'>,
  settings: Pick<PlanSettings, 'rolloverUnusedUnits' | 'freeUnits'>,
): number {
  if (!settings.rolloverUnusedUnits || invoice.usage_units === null || invoice.free_units === null) return 0;
  return Math.min(Math.max(0, invoice.free_units - invoice.usage_units), settings.freeUnits);
}
