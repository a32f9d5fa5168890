/**
 * The 46 event types of spec 6.4, the 3 of the customer portal's auto top-up and alerts (issue
 * 64), an expiring card's notice and the 3 of coupons, each with its group and what it announces.
 */
export const EVENT_TYPES = [
  ['customer.created', 'customer', 'A customer was created'],
  ['customer.updated', 'customer', "A customer's details changed"],
  ['customer.deleted', 'customer', 'A customer was deleted'],
  [
    'customer.alert_triggered',
    'customer',
    'An alert crossed its threshold: allowance used or credits low (once per period)',
  ],
  [
    'customer.card_expiring',
    'customer',
    "The customer's default card expires at the end of this month, and they will be charged again",
  ],
  ['purchase.created', 'purchase', 'A purchase was created (including trial starts)'],
  ['purchase.activated', 'purchase', 'A purchase became active after its first successful payment'],
  ['purchase.updated', 'purchase', 'A purchase changed'],
  ['purchase.trial_ending', 'purchase', 'A trial ends soon'],
  ['purchase.trial_converted', 'purchase', 'A trial converted to a paid purchase'],
  ['purchase.suspended', 'purchase', 'A trial ended and payment is required'],
  ['purchase.past_due', 'purchase', 'A recurring payment failed and dunning started'],
  ['purchase.cancellation_scheduled', 'purchase', 'A purchase will be cancelled at period end'],
  ['purchase.cancelled', 'purchase', 'A purchase was cancelled'],
  ['purchase.reactivated', 'purchase', 'A scheduled cancellation was reversed'],
  ['purchase.expired', 'purchase', 'A purchase expired naturally or was superseded by a plan switch'],
  ['purchase.renewed', 'purchase', 'A purchase renewed for a new period'],
  ['purchase.renewal_reminder', 'purchase', 'A purchase renews soon'],
  ['purchase.refunded', 'purchase', 'A full refund revoked the purchase'],
  ['purchase.plan_changed', 'purchase', 'A purchase moved to another plan (upgrade or downgrade)'],
  ['payment.succeeded', 'payment', 'A payment succeeded'],
  ['payment.failed', 'payment', 'A payment failed'],
  ['payment.refunded', 'payment', 'A refund succeeded'],
  ['payment.refund_failed', 'payment', 'A refund failed'],
  ['payment.refund_pending', 'payment', 'A refund was started'],
  ['payment.canceled', 'payment', 'A payment was canceled'],
  ['payment.disputed', 'payment', 'A payment was disputed'],
  ['payment.dispute_closed', 'payment', 'A dispute was closed (won or lost)'],
  ['payout.paid', 'payout', 'A payout was paid'],
  ['payout.failed', 'payout', 'A payout failed'],
  ['checkout_session.created', 'checkout_session', 'A checkout session was created'],
  ['checkout_session.completed', 'checkout_session', 'A checkout session was paid'],
  ['checkout_session.expired', 'checkout_session', 'A checkout session expired unpaid'],
  ['customer.credit.topped_up', 'credit', 'Credits were bought'],
  ['customer.credit.low_balance', 'credit', 'A credit balance fell below the warning threshold'],
  ['customer.credit.exhausted', 'credit', 'A credit balance reached zero'],
  ['customer.credit.debited', 'credit', 'Credits were spent'],
  ['customer.credit.granted', 'credit', 'Credits were granted'],
  ['customer.credit.adjusted', 'credit', 'Credits were adjusted by hand'],
  [
    'credits.auto_topup_succeeded',
    'credit',
    "An auto top-up charged the customer's card and added the credits",
  ],
  [
    'credits.auto_topup_failed',
    'credit',
    'An auto top-up could not charge the card (it stops after three in a row)',
  ],
  ['usage.charged', 'usage', 'Usage of a period was charged'],
  ['usage.recorded', 'usage', 'Usage was recorded'],
  ['usage.reset', 'usage', 'Usage counters rolled over for a new period'],
  ['product.created', 'catalog', 'A product was created'],
  ['product.updated', 'catalog', 'A product changed'],
  ['product.archived', 'catalog', 'A product was archived'],
  ['plan.created', 'catalog', 'A plan was created'],
  ['plan.updated', 'catalog', 'A plan changed'],
  ['plan.archived', 'catalog', 'A plan was archived'],
  ['coupon.created', 'catalog', 'A coupon was created'],
  ['coupon.updated', 'catalog', 'A coupon was renamed'],
  ['coupon.archived', 'catalog', 'A coupon was archived: no more redemptions'],
] as const;

export type EventType = (typeof EVENT_TYPES)[number][0];
export const EVENT_TYPE_SET: ReadonlySet<string> = new Set(EVENT_TYPES.map(([type]) => type));

export const eventTypeList = () =>
  EVENT_TYPES.map(([type, group, description]) => ({ type, group, description }));
