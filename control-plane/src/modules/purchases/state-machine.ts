/**
 * The purchase lifecycle as data: every move names the states it may start from, the state it
 * leads to, and the events it writes (spec 6.4). The service applies moves only through
 * `transition`, so no code path can put a purchase into a state this table does not allow.
 */
export const PURCHASE_STATUSES = [
  'pending',
  'trialing',
  'active',
  'past_due',
  'suspended',
  'cancelled',
  'expired',
] as const;
export type PurchaseStatus = (typeof PURCHASE_STATUSES)[number];

/** Stays in the current state (reminders, scheduling a cancellation, a failed dunning retry). */
const SAME = 'same' as const;

interface Move {
  from: readonly PurchaseStatus[];
  to: PurchaseStatus | typeof SAME;
  events: readonly string[];
  /** Extra condition on the purchase, beyond its status. */
  requires?: 'cancel_scheduled' | 'not_cancel_scheduled';
}

const LIVE: readonly PurchaseStatus[] = ['trialing', 'active', 'past_due'];

export const MOVES = {
  /** Created on a free plan, or paid at checkout: in force at once. */
  start_active: { from: [], to: 'active', events: ['purchase.created', 'purchase.activated'] },
  /** Created with a trial: in force, payment comes when the trial ends. */
  start_trial: { from: [], to: 'trialing', events: ['purchase.created'] },
  /** Created on a paid plan, waiting for the first payment (checkout). */
  start_pending: { from: [], to: 'pending', events: ['purchase.created'] },
  first_payment_succeeded: { from: ['pending'], to: 'active', events: ['purchase.activated'] },
  trial_ending_soon: { from: ['trialing'], to: SAME, events: ['purchase.trial_ending'] },
  trial_converted: {
    from: ['trialing'],
    to: 'active',
    events: ['purchase.trial_converted', 'purchase.activated'],
  },
  trial_ended_unpaid: { from: ['trialing'], to: 'suspended', events: ['purchase.suspended'] },
  renewal_reminder: {
    from: ['active'],
    to: SAME,
    events: ['purchase.renewal_reminder'],
    requires: 'not_cancel_scheduled',
  },
  renewed: { from: ['active', 'past_due'], to: 'active', events: ['purchase.renewed'] },
  renewal_failed: { from: ['active'], to: 'past_due', events: ['purchase.past_due'] },
  dunning_retry_failed: { from: ['past_due'], to: SAME, events: ['purchase.past_due'] },
  dunning_exhausted: { from: ['past_due'], to: 'cancelled', events: ['purchase.cancelled'] },
  /** The provider voided the invoice dunning was collecting: the period is forgiven, retries stop. */
  invoice_voided: { from: ['past_due'], to: 'active', events: ['purchase.updated'] },
  schedule_cancellation: {
    from: LIVE,
    to: SAME,
    events: ['purchase.cancellation_scheduled'],
    requires: 'not_cancel_scheduled',
  },
  reactivate: { from: LIVE, to: SAME, events: ['purchase.reactivated'], requires: 'cancel_scheduled' },
  cancel_now: {
    from: ['pending', 'trialing', 'active', 'past_due', 'suspended'],
    to: 'cancelled',
    events: ['purchase.cancelled'],
  },
  period_ended_cancelled: {
    from: LIVE,
    to: 'cancelled',
    events: ['purchase.cancelled'],
    requires: 'cancel_scheduled',
  },
  expire: { from: ['active', 'trialing', 'suspended'], to: 'expired', events: ['purchase.expired'] },
  superseded: {
    from: ['pending', 'trialing', 'active', 'past_due', 'suspended'],
    to: 'expired',
    events: ['purchase.expired'],
  },
  refunded: {
    from: ['active', 'past_due', 'cancelled', 'expired'],
    to: 'cancelled',
    events: ['purchase.refunded'],
  },
} as const satisfies Record<string, Move>;

export type MoveName = keyof typeof MOVES;

export class TransitionError extends Error {}

/** The state after `move`, or a TransitionError saying why the move is not allowed. */
export function transition(
  current: { status: PurchaseStatus; cancelAtPeriodEnd: boolean } | null,
  move: MoveName,
): { status: PurchaseStatus; events: readonly string[] } {
  const spec: Move = MOVES[move];
  if (current === null) {
    if (spec.from.length > 0) throw new TransitionError(`${move} needs an existing purchase`);
    return { status: spec.to === SAME ? 'pending' : spec.to, events: spec.events };
  }
  if (!spec.from.includes(current.status)) {
    throw new TransitionError(`a ${current.status} purchase cannot be ${move.replaceAll('_', ' ')}`);
  }
  if (spec.requires === 'cancel_scheduled' && !current.cancelAtPeriodEnd)
    throw new TransitionError('no cancellation is scheduled');
  if (spec.requires === 'not_cancel_scheduled' && current.cancelAtPeriodEnd)
    throw new TransitionError('a cancellation is already scheduled');
  return { status: spec.to === SAME ? current.status : spec.to, events: spec.events };
}

/** States in which the customer has access to what the plan grants. */
export const GRANTS_ACCESS: ReadonlySet<PurchaseStatus> = new Set(['trialing', 'active', 'past_due']);
