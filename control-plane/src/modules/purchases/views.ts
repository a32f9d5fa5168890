import { toDiscount } from '../coupons/service';
import { unixSeconds } from '../events/outbox';
import type { PurchaseRow } from './repository';

/** A purchase as the API and its events show it. */

const iso = (d: Date | null) => d?.toISOString() ?? null;

export const toPurchase = (r: PurchaseRow) => ({
  reference: r.id,
  id: r.id,
  status: r.status,
  customerRef: r.customer_id,
  productId: r.product_id,
  planRef: r.plan_id,
  amount: r.amount,
  currency: r.currency,
  billingCycle: r.billing_cycle,
  isRecurring: r.is_recurring,
  autoRenew: r.auto_renew,
  cancelAtPeriodEnd: r.cancel_at_period_end,
  periodStart: r.period_start.toISOString(),
  periodEnd: iso(r.period_end),
  trialEnd: iso(r.trial_end),
  endedAt: iso(r.ended_at),
  discount: r.discount === null ? null : toDiscount(r.discount),
  cancellationDetails: r.cancellation_details ?? null,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/**
 * Payload of all purchase.* events (spec 6.5), plus the period's end and the trial's (Unix
 * seconds or null: what a renewal reminder or a trial's end is about); past_due adds retryCount
 * and nextRetryAt.
 */
export const eventObject = (r: PurchaseRow) => ({
  id: r.id,
  reference: r.id,
  status: r.status,
  customer: r.customer_id,
  plan: r.plan_id,
  product: r.product_id,
  amount: r.amount,
  currency: r.currency,
  billingCycle: r.billing_cycle,
  isRecurring: r.is_recurring,
  periodEnd: r.period_end === null ? null : unixSeconds(r.period_end),
  trialEnd: r.trial_end === null ? null : unixSeconds(r.trial_end),
  discount: r.discount === null ? null : toDiscount(r.discount),
  cancellationDetails: r.cancellation_details ?? null,
  created: unixSeconds(r.created_at),
  ...(r.status === 'past_due'
    ? {
        retryCount: r.retry_count,
        nextRetryAt: r.next_retry_at === null ? null : unixSeconds(r.next_retry_at),
      }
    : {}),
});
