/**
 * Reconciliation: what our ledger says moved through a provider's Stripe account in a period,
 * against Stripe's balance transactions for the same period. Each movement is matched by the
 * Stripe object it concerns (the PaymentIntent of a charge, the refund, the dispute, the
 * payout); nothing is guessed: every movement on one side without its twin, or with another
 * amount, is reported as it is.
 */
export type MovementKind =
  | 'payment'
  | 'refund'
  | 'refund_reversal'
  | 'dispute'
  | 'dispute_reversal'
  | 'payout'
  | 'payout_reversal';

export interface Movement {
  kind: MovementKind;
  /** The Stripe object it concerns: pi_… for a payment, re_…, du_…, po_…. */
  stripeId: string;
  /** Signed, minor units, as it moved the Stripe balance (a refund or payout is negative). */
  amount: number;
  currency: string;
  /** Our own id (payment, refund, dispute, payout), or Stripe's balance transaction. */
  ref: string;
}

export interface ReconciliationReport {
  from: string;
  to: string;
  matched: number;
  /** In our ledger, not among Stripe's balance transactions of the period. */
  missingAtStripe: Movement[];
  /** Among Stripe's balance transactions, not in our ledger. */
  missingHere: Movement[];
  /** On both sides with different amounts or currencies. */
  amountMismatches: Array<{ ours: Movement; stripe: Movement }>;
  /** Stripe's own fees of the period (not in our ledger, so never a difference). */
  stripeFees: Record<string, number>;
  balanced: boolean;
}

const keyOf = (m: Movement) => `${m.kind}:${m.stripeId}`;

/** Pairs the two sides by kind and Stripe object; whatever is left over is a difference. */
export function reconcile(
  window: { from: Date; to: Date },
  ours: Movement[],
  stripe: Movement[],
  stripeFees: Record<string, number>,
): ReconciliationReport {
  const theirs = new Map<string, Movement[]>();
  for (const m of stripe) theirs.set(keyOf(m), [...(theirs.get(keyOf(m)) ?? []), m]);
  let matched = 0;
  const missingAtStripe: Movement[] = [];
  const amountMismatches: ReconciliationReport['amountMismatches'] = [];
  for (const m of ours) {
    const candidates = theirs.get(keyOf(m)) ?? [];
    const twin = candidates.shift();
    if (twin === undefined) missingAtStripe.push(m);
    else if (twin.amount !== m.amount || twin.currency !== m.currency)
      amountMismatches.push({ ours: m, stripe: twin });
    else matched++;
  }
  const missingHere = [...theirs.values()].flat();
  return {
    from: window.from.toISOString(),
    to: window.to.toISOString(),
    matched,
    missingAtStripe,
    missingHere,
    amountMismatches,
    stripeFees,
    balanced: missingAtStripe.length === 0 && missingHere.length === 0 && amountMismatches.length === 0,
  };
}

/** A Stripe balance transaction as reconciliation reads it (its source expanded). */
export interface StripeBalanceTransaction {
  id: string;
  type: string;
  amount: number;
  fee: number;
  currency: string;
  source: string | { id: string; object?: string; payment_intent?: string | { id: string } | null } | null;
}

/**
 * Stripe's balance transaction in our terms: a charge or payment by its PaymentIntent, a refund,
 * a dispute's withdrawal or reinstatement, a payout or its failure. Other types (fees, top-ups,
 * transfers, adjustments that are not disputes) are left out, undefined.
 */
export function movementOf(bt: StripeBalanceTransaction): Movement | undefined {
  const source = bt.source;
  const id = typeof source === 'string' ? source : (source?.id ?? '');
  const base = { amount: bt.amount, currency: bt.currency, ref: bt.id };
  switch (bt.type) {
    case 'charge':
    case 'payment': {
      const intent = typeof source === 'object' && source !== null ? source.payment_intent : undefined;
      const pi = typeof intent === 'string' ? intent : intent?.id;
      return { ...base, kind: 'payment', stripeId: pi ?? id };
    }
    case 'refund':
    case 'payment_refund':
      return { ...base, kind: 'refund', stripeId: id };
    case 'refund_failure':
    case 'payment_failure_refund':
      return { ...base, kind: 'refund_reversal', stripeId: id };
    case 'adjustment':
      if (!id.startsWith('du_') && !id.startsWith('dp_')) return undefined;
      return { ...base, kind: bt.amount < 0 ? 'dispute' : 'dispute_reversal', stripeId: id };
    case 'payout':
      return { ...base, kind: 'payout', stripeId: id };
    case 'payout_failure':
    case 'payout_cancel':
      return { ...base, kind: 'payout_reversal', stripeId: id };
    default:
      return undefined;
  }
}
