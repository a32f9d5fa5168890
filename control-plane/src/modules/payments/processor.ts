import type { Address, TaxId } from '../../billing-details';
/**
 * The payment-processor port: one interface, two adapters. The sandbox processor is built in and
 * serves every sandbox key; the Stripe adapter (modules/processors/stripe.ts) serves the live mode
 * of a provider that connected its Stripe account. No processor's own types pass this interface.
 */
import type { Queryable } from '../../db/pool';

export interface CardInput {
  number: string;
  expMonth: number;
  expYear: number;
  cvc: string;
}

/**
 * What a customer's card arrives as: raw test card numbers in sandbox; in live mode a payment
 * method the processor already holds (Stripe.js or Stripe Checkout collected it, `pm_…`), since
 * card numbers never pass through this service.
 */
export type MethodInput = { card: CardInput } | { paymentMethod: string };

/** Our customer as the processor knows it: its customer object there, once one exists. */
export interface ProcessorCustomer extends CustomerDetails {
  id: string;
  processorCustomer: string | null;
}

/** What the processor's customer object shows of ours: its receipts go to the email. */
export interface CustomerDetails {
  email: string | null;
  name: string | null;
  /** The billing address (Stripe shows it on its receipts and uses it for tax). */
  address: Address | null;
  /** Its tax ids, which the processor's customer is made to hold (Stripe shows them on its documents). */
  taxIds: TaxId[];
}

export interface AttachedCard {
  processorRef: string;
  /** The processor's customer object the card belongs to (null where it has none). */
  processorCustomer: string | null;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
  /** The same for every stored copy of one card (Stripe's card.fingerprint); null when unknown. */
  fingerprint: string | null;
}

export type ChargeResult =
  | {
      status: 'succeeded';
      processorPaymentIntent: string;
      /** The charge went through and the customer's bank disputed it at once (sandbox test card). */
      disputed?: { reason: string };
    }
  | { status: 'failed'; processorPaymentIntent: string; failureReason: string };

export interface ProcessorCharge {
  processorRef: string;
  processorCustomer: string | null;
  amount: number;
  currency: string;
  /** Derived from our own ids: the same key always gives the same charge, never a second one. */
  idempotencyKey: string;
  /** Our ids, kept on the processor's payment so its dashboard and events lead back to them. */
  metadata: Record<string, string>;
}

export interface RefundResult {
  status: 'pending' | 'succeeded' | 'failed';
  processorRefund: string;
  failureReason?: string;
}

/** A checkout session as a processor's own card page shows it. */
export interface CardPageRequest {
  checkoutSession: string;
  currency: string;
  description: string;
  successUrl: string;
  cancelUrl: string | null;
  /** The page must collect a billing address (the session's `billingAddressCollection: required`). */
  billingAddress: boolean;
  /** The page may take a tax ID (the session's `taxIdCollection: {enabled: true}`). */
  taxId: boolean;
  /** The page requires a tax ID where the customer's country has one (`required: if_supported`). */
  taxIdRequired: boolean;
  /**
   * The coupon the session applies now (a promotion code typed on our page first): the page
   * says what is due with it, so each coupon has a page of its own.
   */
  coupon: string | null;
}

export interface PaymentProcessor {
  readonly name: 'sandbox' | 'stripe';
  /**
   * A page at the processor where the customer gives a card for a checkout session (Stripe
   * Checkout); the processor's event that the page completed names the checkout session and the
   * card. Absent: our own hosted page takes the card.
   */
  cardPage?(customer: ProcessorCustomer, request: CardPageRequest): Promise<string>;
  /** Validates and stores a card; throws CardError when the card is refused or not of this processor. */
  attach(customer: ProcessorCustomer, input: MethodInput, now: Date): Promise<AttachedCard>;
  /** Charges a stored card off-session. The same idempotency key always gives the same result. */
  charge(request: ProcessorCharge): Promise<ChargeResult>;
  /**
   * Brings the processor's customer object up to date with ours (an email or name changed).
   * Absent: the processor keeps no customer details (sandbox).
   */
  updateCustomer?(processorCustomer: string, details: CustomerDetails): Promise<void>;
  /** Takes a removed card off the processor's customer, so it can never be charged there again. */
  detach(processorRef: string): Promise<void>;
  /**
   * Starts returning money of an earlier charge; the same idempotency key gives the same result.
   * A pending refund is settled later by `settleRefund` (or the processor's event).
   */
  refund(request: {
    processorPaymentIntent: string;
    amount: number;
    idempotencyKey: string;
    /** Kept with the refund at the processor and sent back in its events (refunder.ts). */
    metadata: Record<string, string>;
  }): Promise<RefundResult>;
  /** Where a pending refund stands now; `pending` while the processor has not decided. */
  settleRefund(
    processorRefund: string,
  ): Promise<{ status: 'pending' | 'succeeded' | 'failed'; failureReason?: string }>;
}

/**
 * Which processor serves a provider's environment: the sandbox processor for sandbox keys, the
 * provider's connected Stripe account for live. Implemented by modules/processors.
 */
export interface Processors {
  /** The processor new payments go through; 409 payments_not_configured when live has none. */
  current(auth: { providerId: string; environment: 'sandbox' | 'live' }): Promise<PaymentProcessor>;
  /**
   * The processor an earlier payment or refund went through (its `processor` column). Callers
   * inside a transaction pass it as `db`: the provider's connection is read there, not on a
   * second pooled connection that a full pool would never hand out.
   */
  named(
    auth: { providerId: string; environment: 'sandbox' | 'live' },
    name: string,
    db: Queryable,
  ): Promise<PaymentProcessor>;
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

  async attach(_customer: ProcessorCustomer, input: MethodInput, now: Date): Promise<AttachedCard> {
    if (!('card' in input))
      throw new CardError(
        '/paymentMethod',
        'is for live mode with Stripe connected; sandbox takes a test card in `card`',
      );
    const card = input.card;
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
      processorCustomer: null,
      fingerprint: `sandbox_card_${number}`,
      brand: brandOf(number),
      last4: number.slice(-4),
      expMonth: card.expMonth,
      expYear: card.expYear,
    };
  }

  /** Sandbox refunds are pending until the next scheduler pass settles them. */
  async refund(request: {
    processorPaymentIntent: string;
    amount: number;
    idempotencyKey: string;
    metadata: Record<string, string>;
  }) {
    const fails = request.processorPaymentIntent.startsWith(`pi_sandbox_${REFUND_FAILS}`);
    return {
      status: 'pending' as const,
      processorRefund: `re_sandbox_${fails ? REFUND_FAILS : ''}${request.idempotencyKey}`,
    };
  }

  /** Sandbox cards live only in our table: removing the row is all there is. */
  async detach(_processorRef: string): Promise<void> {}

  async settleRefund(processorRefund: string) {
    return processorRefund.startsWith(`re_sandbox_${REFUND_FAILS}`)
      ? { status: 'failed' as const, failureReason: 'expired_or_canceled_card' }
      : { status: 'succeeded' as const };
  }

  async charge(request: ProcessorCharge): Promise<ChargeResult> {
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
