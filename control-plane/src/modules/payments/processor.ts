/**
 * The payment-processor port. The sandbox processor is built in; live processors are adapters
 * behind the same interface (none is configured yet, so live mode cannot take card payments).
 */
export interface CardInput {
  number: string;
  expMonth: number;
  expYear: number;
  cvc: string;
}

export interface AttachedCard {
  processorRef: string;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

export type ChargeResult =
  | {
      status: 'succeeded';
      processorPaymentIntent: string;
      /** The charge went through and the customer's bank disputed it at once (sandbox test card). */
      disputed?: { reason: string };
    }
  | { status: 'failed'; processorPaymentIntent: string; failureReason: string };

export interface PaymentProcessor {
  readonly name: string;
  /** Validates and stores a card; throws CardError when the card is refused. */
  attach(card: CardInput, now: Date): AttachedCard;
  /** Charges a stored card. The same idempotency key always gives the same result. */
  charge(request: {
    processorRef: string;
    amount: number;
    currency: string;
    idempotencyKey: string;
  }): ChargeResult;
  /**
   * Starts returning money of an earlier charge; the same idempotency key gives the same result.
   * A pending refund is settled later by `settleRefund`.
   */
  refund(request: { processorPaymentIntent: string; amount: number; idempotencyKey: string }): {
    status: 'pending' | 'succeeded' | 'failed';
    processorRefund: string;
    failureReason?: string;
  };
  /** How a pending refund ended. */
  settleRefund(processorRefund: string): { status: 'succeeded' | 'failed'; failureReason?: string };
}

export class CardError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Documented test cards (any future expiry, any 3-4 digit CVC):
 *   4242 4242 4242 4242  attaches; every charge succeeds
 *   4000 0000 0000 0341  attaches; every charge fails (card_declined), for dunning
 *   4000 0000 0000 9995  attaches; every charge fails (insufficient_funds)
 *   4000 0000 0000 0002  refused when attached (card_declined)
 *   4000 0000 0000 0259  attaches; every charge succeeds and is disputed at once (fraudulent)
 *   4000 0000 0000 5126  attaches; every charge succeeds, and its refunds fail when they settle
 * Any other number that passes the Luhn check behaves like 4242 4242 4242 4242.
 */
export const SANDBOX_CARDS = {
  succeeds: '4242424242424242',
  failsLater: '4000000000000341',
  insufficientFunds: '4000000000009995',
  declined: '4000000000000002',
  disputed: '4000000000000259',
  refundFails: '4000000000005126',
} as const;

/** Sandbox charges of the refund-failing card carry this in their intent id, so refunds know. */
const REFUND_FAILS = 'rf_';

function luhn(number: string): boolean {
  let sum = 0;
  for (let i = 0; i < number.length; i++) {
    let digit = Number(number[number.length - 1 - i]);
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

function brandOf(number: string): string {
  if (number.startsWith('4')) return 'visa';
  if (/^5[1-5]/.test(number) || /^2[2-7]/.test(number)) return 'mastercard';
  if (/^3[47]/.test(number)) return 'amex';
  return 'unknown';
}

export class SandboxProcessor implements PaymentProcessor {
  readonly name = 'sandbox';

  attach(card: CardInput, now: Date): AttachedCard {
    const number = card.number.replace(/[\s-]/g, '');
    if (!/^\d{12,19}$/.test(number) || !luhn(number))
      throw new CardError('/card/number', 'is not a valid card number');
    if (!/^\d{3,4}$/.test(card.cvc)) throw new CardError('/card/cvc', 'must be 3 or 4 digits');
    const expiry = Date.UTC(card.expYear, card.expMonth, 1);
    if (card.expMonth < 1 || card.expMonth > 12 || expiry <= now.getTime())
      throw new CardError('/card/expMonth', 'the card has expired');
    if (number === SANDBOX_CARDS.declined)
      throw new CardError('/card/number', 'the card was declined (card_declined)');
    return {
      processorRef: `sandbox_card_${number}`,
      brand: brandOf(number),
      last4: number.slice(-4),
      expMonth: card.expMonth,
      expYear: card.expYear,
    };
  }

  /** Sandbox refunds are pending until the next scheduler pass settles them. */
  refund(request: { processorPaymentIntent: string; amount: number; idempotencyKey: string }) {
    const fails = request.processorPaymentIntent.startsWith(`pi_sandbox_${REFUND_FAILS}`);
    return {
      status: 'pending' as const,
      processorRefund: `re_sandbox_${fails ? REFUND_FAILS : ''}${request.idempotencyKey}`,
    };
  }

  settleRefund(processorRefund: string) {
    return processorRefund.startsWith(`re_sandbox_${REFUND_FAILS}`)
      ? { status: 'failed' as const, failureReason: 'expired_or_canceled_card' }
      : { status: 'succeeded' as const };
  }

  charge(request: {
    processorRef: string;
    amount: number;
    currency: string;
    idempotencyKey: string;
  }): ChargeResult {
    const processorPaymentIntent = `pi_sandbox_${request.processorRef.endsWith(SANDBOX_CARDS.refundFails) ? REFUND_FAILS : ''}${request.idempotencyKey}`;
    if (request.processorRef.endsWith(SANDBOX_CARDS.failsLater))
      return { status: 'failed', processorPaymentIntent, failureReason: 'card_declined' };
    if (request.processorRef.endsWith(SANDBOX_CARDS.insufficientFunds)) {
      return { status: 'failed', processorPaymentIntent, failureReason: 'insufficient_funds' };
    }
    if (request.processorRef.endsWith(SANDBOX_CARDS.disputed))
      return { status: 'succeeded', processorPaymentIntent, disputed: { reason: 'fraudulent' } };
    return { status: 'succeeded', processorPaymentIntent };
  }
}
