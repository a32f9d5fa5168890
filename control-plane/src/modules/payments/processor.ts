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
  /** Returns money of an earlier charge; the same idempotency key gives the same result. */
  refund(request: { processorPaymentIntent: string; amount: number; idempotencyKey: string }): {
    status: 'succeeded' | 'failed';
    processorRefund: string;
    failureReason?: string;
  };
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
 * Any other number that passes the Luhn check behaves like 4242 4242 4242 4242.
 */
export const SANDBOX_CARDS = {
  succeeds: '4242424242424242',
  failsLater: '4000000000000341',
  insufficientFunds: '4000000000009995',
  declined: '4000000000000002',
  disputed: '4000000000000259',
} as const;

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

  refund(request: { processorPaymentIntent: string; amount: number; idempotencyKey: string }) {
    return { status: 'succeeded' as const, processorRefund: `re_sandbox_${request.idempotencyKey}` };
  }

  charge(request: {
    processorRef: string;
    amount: number;
    currency: string;
    idempotencyKey: string;
  }): ChargeResult {
    const processorPaymentIntent = `pi_sandbox_${request.idempotencyKey}`;
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
