import { prorate } from '@mcp-meter/contracts/pricing';
import type { PoolClient } from '../../db/pool';
import { ConflictError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { paidBaseInvoice, type StoredLine } from '../billing/repository';
import type { Refunder } from '../payments/refunder';
import {
  lockPayment,
  lockRefundByProcessorId,
  type PaymentRow,
  type RefundRow,
} from '../payments/repository';
import { findPlan } from '../plans/repository';
import {
  type EarlyEndRefundRow,
  findPurchase,
  heldEarlyEndRefund,
  holdEarlyEndRefund,
  type PurchaseRow,
} from './repository';

/**
 * The credit a plan switch gives for the unused time of the old plan's paid period: its base
 * price as paid (less any discount on it) × (time left ÷ period length), rounded once to whole cents, half to even, and never
 * more than is still refundable of the payment that paid it (a refund or dispute took the rest).
 */
export interface UnusedTime {
  amount: number;
  /** The payment that paid the period; an excess over the new invoice is refunded to it. */
  payment: PaymentRow;
  planName: string;
  from: Date;
  to: Date;
}

const day = (d: Date) => d.toISOString().slice(0, 10);

/**
 * Unused time of a purchase ending at `at`. Only a paid period of a recurring base price earns
 * it: a trial, a pending or past-due period (not paid), a one-time purchase and usage (billed to
 * the moment it ends) do not. Call with the purchase locked.
 */
export async function unusedTimeOf(
  tx: PoolClient,
  auth: AuthContext,
  refunder: Pick<Refunder, 'refundable'>,
  purchase: PurchaseRow,
  at: Date,
): Promise<UnusedTime | undefined> {
  const end = purchase.period_end;
  if (purchase.status !== 'active' || !purchase.is_recurring || end === null || end <= at) return undefined;
  const invoice = await paidBaseInvoice(tx, purchase.id, purchase.period_start, end);
  const base = invoice?.lines.find(
    (line) => line.kind === 'base' && line.period?.start === purchase.period_start.toISOString(),
  );
  if (invoice?.payment_id == null || base === undefined) return undefined;
  const payment = await lockPayment(tx, auth, invoice.payment_id);
  if (payment === undefined || payment.status !== 'succeeded') return undefined;
  const from = at > purchase.period_start ? at : purchase.period_start;
  // What the period's base price was paid at: less the discount taken off it.
  const paid = invoice.lines
    .filter(
      (line) =>
        line.kind === 'discount' && line.discounts === 'base' && line.period?.start === base.period?.start,
    )
    .reduce((sum, line) => sum + line.amount, base.amount);
  if (paid <= 0) return undefined;
  const credit = prorate(
    paid,
    end.getTime() - from.getTime(),
    end.getTime() - purchase.period_start.getTime(),
  );
  const amount = Math.min(credit, await refunder.refundable(tx, payment));
  if (amount <= 0) return undefined;
  const planName = (await findPlan(tx, auth, purchase.plan_id))?.name ?? purchase.plan_id;
  return { amount, payment, planName, from, to: end };
}

/**
 * The proration lines of the new plan's first invoice: the whole credit, and, when it is more
 * than the invoice's charges, the excess refunded to the old payment, so the total is never
 * below zero. Returns the lines and the amount to refund.
 */
export function prorationLines(unused: UnusedTime, charges: number): { lines: StoredLine[]; refund: number } {
  const refund = Math.max(unused.amount - charges, 0);
  const lines: StoredLine[] = [
    {
      kind: 'proration',
      description: `Unused time on ${unused.planName} (${day(unused.from)} – ${day(unused.to)})`,
      quantity: 1,
      unitAmount: (-unused.amount).toString(),
      amount: -unused.amount,
      // Negative revenue over the time the old payment no longer pays for.
      period: { start: unused.from.toISOString(), end: unused.to.toISOString() },
    },
  ];
  if (refund > 0) {
    lines.push({
      kind: 'proration_refund',
      description: `Refunded to ${unused.payment.id}: unused time beyond this invoice`,
      quantity: 1,
      unitAmount: refund.toString(),
      amount: refund,
      period: null,
    });
  }
  return { lines, refund };
}

/**
 * How long a refund made for ending a purchase early holds the moment it was counted from, for a
 * retry of an ending whose transaction failed after the processor refunded: well inside the 24
 * hours Stripe keeps an idempotency key, so the retry's refund is still answered with the first.
 */
export const EARLY_END_HOLD_MS = 12 * 60 * 60_000;

/**
 * The refund the processor made for ending `purchase` early within the hold, by an attempt whose
 * transaction then failed (one that committed ended the purchase, and nothing ends it again). An
 * ending of it now counts unused time from that attempt's moment, not from `at`: the credit, the
 * invoice and the refund come out as the first attempt's, and the refund is asked for under the
 * same key, so the processor answers with the refund it made (in the customer's favour by the
 * time between the attempts, at most the hold).
 */
export async function heldEarlyEnd(
  tx: PoolClient,
  auth: AuthContext,
  purchase: PurchaseRow | undefined,
  now: Date,
): Promise<EarlyEndRefundRow | undefined> {
  if (purchase === undefined) return undefined;
  const held = await heldEarlyEndRefund(tx, auth, purchase.id, new Date(now.getTime() - EARLY_END_HOLD_MS));
  // A period renewed since is not the one that ended early: its refund is left to reconciliation.
  return held !== undefined && held.prorated_at >= purchase.period_start ? held : undefined;
}

/**
 * 409 `early_end_unfinished` when another ending than the held one's would refund another amount
 * (a switch to another plan, a cancellation without a refund): the customer has the held refund,
 * and this ending would either refund more than the unused time or leave that refund off the
 * books. Sending the failed ending again finishes it; after the hold any ending goes ahead.
 * Checked before anything is charged.
 */
export function finishesHeldEnd(held: EarlyEndRefundRow | undefined, refund: number): void {
  if (held === undefined || held.amount === refund) return;
  throw new ConflictError(
    'early_end_unfinished',
    `Ending this purchase by ${held.ending} failed after ${held.amount} ${held.currency} was refunded ` +
      `for its unused time; send that change again to finish it (this one would refund ${refund})`,
    { refunded: held.amount, processorRefund: held.processor_refund, ending: held.ending },
  );
}

/**
 * Returns the part of the credit no invoice absorbed to the card that paid the old period, as a
 * refund like any other (source `proration`, which revokes nothing); nothing when it is zero.
 * `ending` names what ended the period early, and when: a switch to another purchase, or
 * cancelling now; `ending.held` is a failed attempt's refund of it (heldEarlyEnd), whose reason the
 * refund is asked with again, in the plans' names of then: Stripe answers a key reused with other
 * parameters with an error, not the refund it made.
 */
export async function refundUnusedTime(
  tx: PoolClient,
  auth: AuthContext,
  refunder: Pick<Refunder, 'open' | 'close'>,
  unused: UnusedTime,
  amount: number,
  ending: { from: string; at: Date; held: EarlyEndRefundRow | undefined } & (
    | { to: string; toPlan: string }
    | { cancelled: true }
  ),
): Promise<RefundRow | undefined> {
  if (amount <= 0) return undefined;
  const reason =
    ending.held?.reason ??
    ('cancelled' in ending
      ? `Unused time on ${unused.planName} after cancelling it`
      : `Unused time on ${unused.planName} after a switch to ${ending.toPlan}`);
  const refund = await refunder.open(tx, auth, unused.payment, {
    amount,
    reason,
    metadata:
      'cancelled' in ending
        ? { purchase: ending.from, cancelled: 'now' }
        : { purchase: ending.from, switchedTo: ending.to },
    source: 'proration',
    // A purchase's period ends early once: a retry of the switch or cancellation after a failure
    // past the processor's refund (its transaction rolled back) gets the same refund back. The
    // amount is in it so that another way of ending the period, for another amount, is not
    // answered with the first one's refund.
    retryKey: `proration:${ending.from}:${amount}`,
    // For Stripe's event of it to keep what `keep` keeps, should this process die before it does.
    tell: { early_end: ending.from, prorated_at: unused.from.toISOString() },
    // Kept apart from this transaction: should it fail after the processor refunded, a retry
    // finds the moment and the amount (heldEarlyEnd).
    keep: (db, made) =>
      holdEarlyEndRefund(db, {
        provider_id: auth.providerId,
        environment: auth.environment,
        purchase_id: ending.from,
        prorated_at: unused.from,
        amount,
        currency: unused.payment.currency,
        processor_refund: made.processorRefund,
        ending: 'cancelled' in ending ? 'cancelling it now' : `a switch to ${ending.toPlan}`,
        reason,
        created_at: ending.at,
      }),
  });
  // A processor that settles at once has its outcome now; the sandbox's settle later.
  if (refund.status !== 'pending') await refunder.close(tx, auth, refund, unused.payment, false);
  return refund;
}

/** A refund of unused time as the processor's event tells it (metadata of refundUnusedTime). */
export interface LearnedEarlyEnd {
  purchaseId: string;
  paymentId: string;
  proratedAt: Date;
  processorPaymentIntent: string;
  processorRefund: string;
  amount: number;
  currency: string;
  /** Its `refund_reason`, the words a retry asks with again (refundUnusedTime). */
  reason: string | null;
}

/**
 * The one gap `keep` leaves: a process that died between the processor's refund of unused time
 * and the write that keeps it. The refund's event (delivered and retried by Stripe whatever
 * became of the process) keeps it instead, in the event's transaction, so a retry of the ending
 * within the hold (counted from now) counts from the same moment and is answered with this
 * refund. Taken only for a live purchase of the provider whose succeeded payment the refund
 * returns money of, and not once the refund is on the books (its ending committed): answers
 * whether it was.
 */
export async function learnEarlyEnd(
  tx: PoolClient,
  auth: AuthContext,
  made: LearnedEarlyEnd,
  now: Date,
): Promise<boolean> {
  // Waits for an ending still holding the payment: it commits (the refund is then on the
  // books) or rolls back.
  const payment = await lockPayment(tx, auth, made.paymentId);
  if (
    payment?.status !== 'succeeded' ||
    payment.processor_payment_intent !== made.processorPaymentIntent ||
    payment.currency !== made.currency
  )
    return false;
  if ((await lockRefundByProcessorId(tx, auth, made.processorRefund)) !== undefined) return true;
  const purchase = await findPurchase(tx, auth, made.purchaseId, false);
  if (purchase?.status !== 'active') return false;
  await holdEarlyEndRefund(tx, {
    provider_id: auth.providerId,
    environment: auth.environment,
    purchase_id: purchase.id,
    prorated_at: made.proratedAt,
    amount: made.amount,
    currency: made.currency,
    processor_refund: made.processorRefund,
    ending: 'the change that refunded it',
    reason: made.reason,
    created_at: now,
  });
  return true;
}
