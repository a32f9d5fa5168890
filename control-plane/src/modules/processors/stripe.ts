import Stripe from 'stripe';
import type { TaxId } from '../../billing-details';
import { DomainError } from '../../errors';
import {
  type AttachedCard,
  CardError,
  type CardPageRequest,
  type ChargeResult,
  type CustomerDetails,
  type MethodInput,
  type PaymentProcessor,
  type ProcessorCharge,
  type ProcessorCustomer,
  type RefundResult,
} from '../payments/processor';

/** Where the Stripe API is: https://api.stripe.com, or stripe-mock on loopback in tests. */
export interface StripeApi {
  url: string;
}

/** A Stripe client for one secret key. The only place the `stripe` package is constructed. */
export function stripeClient(api: StripeApi, secretKey: string): Stripe {
  const url = new URL(api.url);
  return new Stripe(secretKey, {
    host: url.hostname,
    port: url.port === '' ? (url.protocol === 'http:' ? 80 : 443) : Number(url.port),
    protocol: url.protocol === 'http:' ? 'http' : 'https',
    // Every call carries our idempotency key, so the SDK's retries after a timeout are safe.
    maxNetworkRetries: 2,
    timeout: 20_000,
    telemetry: false,
  });
}

/**
 * Stripe's failures in our vocabulary: a card refusal is an outcome, not an error; a refused key
 * means the connection needs attention (409 payments_not_configured); Stripe out of reach or
 * failing is 503 processor_unavailable, and whatever was being done is retried with the same
 * idempotency key (also Stripe's 409, still carrying out a request under the key, which the SDK
 * retried already). A key Stripe holds for a request with other parameters (a
 * request retried under its Idempotency-Key with another body, after a first attempt that failed
 * here once Stripe had acted) is 422 idempotency_key_reused, as our own keys answer it; any other
 * request Stripe refuses (a refund of a payment already refunded on Stripe's dashboard, a card
 * detached there) is 409 processor_refused with Stripe's code and words: the account's state on
 * Stripe is not what ours says, and nothing was changed here.
 */
export function translate(error: unknown): never {
  if (
    error instanceof Stripe.errors.StripeAuthenticationError ||
    error instanceof Stripe.errors.StripePermissionError
  )
    throw new DomainError(
      'payments_not_configured',
      'Stripe refused the connected secret key; connect the account again',
    );
  if (
    error instanceof Stripe.errors.StripeConnectionError ||
    error instanceof Stripe.errors.StripeAPIError ||
    error instanceof Stripe.errors.StripeRateLimitError ||
    (error instanceof Stripe.errors.StripeError && (error.statusCode ?? 0) >= 500)
  )
    throw new DomainError(
      'processor_unavailable',
      error instanceof Stripe.errors.StripeError && error.statusCode === 409
        ? `Stripe is still carrying out a request with this idempotency key; retry shortly (${error.message})`
        : `Stripe could not be reached: ${(error as Error).message}`,
    );
  if (error instanceof Stripe.errors.StripeIdempotencyError)
    throw new DomainError(
      'idempotency_key_reused',
      `Stripe holds this request's idempotency key for one with other parameters (${error.message}); send the first request again, or this one with a new Idempotency-Key`,
      { processor: 'stripe' },
    );
  if (error instanceof Stripe.errors.StripeError && (error.statusCode ?? 0) >= 400)
    throw new DomainError('processor_refused', `Stripe refused it: ${error.message}`, {
      processor: 'stripe',
      processorCode: error.code ?? error.rawType,
    });
  throw error;
}

/**
 * A tax id's value as Stripe writes it: the kinds it documents with separators get them back
 * (ours are kept without); the rest go as they are.
 */
export function stripeTaxIdValue(type: string, value: string): string {
  if (type === 'us_ein' && /^[0-9]{9}$/u.test(value)) return `${value.slice(0, 2)}-${value.slice(2)}`;
  if (type === 'br_cnpj' && /^[0-9]{14}$/u.test(value))
    return `${value.slice(0, 2)}.${value.slice(2, 5)}.${value.slice(5, 8)}/${value.slice(8, 12)}-${value.slice(12)}`;
  const swiss = /^CHE([0-9]{3})([0-9]{3})([0-9]{3})(MWST|TVA|IVA)?$/u.exec(value);
  if (type === 'ch_vat' && swiss !== null)
    return `CHE-${swiss[1]}.${swiss[2]}.${swiss[3]}${swiss[4] === undefined ? '' : ` ${swiss[4]}`}`;
  return value;
}

/**
 * The Stripe adapter of the payment-processor port, for one provider's account. Cards are
 * Stripe PaymentMethods on a Stripe Customer made once per customer; charges are off-session
 * PaymentIntents confirmed at once (cards only, so the outcome is known when the call returns);
 * refunds are Stripe Refunds. Every call that creates something carries a key derived from our
 * own ids.
 */
/**
 * Our customer's details as Stripe's customer takes them. One we do not have is left as Stripe
 * has it (the provider may have set it there), unless `clear`: our customer's was just removed,
 * and an empty string clears Stripe's.
 */
function stripeDetails(
  details: CustomerDetails,
  clear = false,
): { email?: string; name?: string; address?: Stripe.Emptyable<Stripe.AddressParam> } {
  const out: { email?: string; name?: string; address?: Stripe.Emptyable<Stripe.AddressParam> } = {};
  if (details.email !== null || clear) out.email = details.email ?? '';
  if (details.name !== null || clear) out.name = details.name ?? '';
  const { address } = details;
  if (address !== null)
    out.address = {
      line1: address.line1 ?? '',
      line2: address.line2 ?? '',
      city: address.city ?? '',
      state: address.state ?? '',
      postal_code: address.postalCode ?? '',
      country: address.country ?? '',
    };
  else if (clear) out.address = '';
  return out;
}

export class StripeProcessor implements PaymentProcessor {
  readonly name = 'stripe' as const;

  constructor(private readonly stripe: Stripe) {}

  /**
   * A Stripe Checkout Session in setup mode that saves the customer's card for off-session use;
   * its checkout.session.completed event carries our session id (client_reference_id), and the
   * charge follows through `charge` as for any stored card.
   */
  async cardPage(customer: ProcessorCustomer, request: CardPageRequest): Promise<string> {
    try {
      const session = await this.stripe.checkout.sessions.create(
        {
          mode: 'setup',
          // The payment methods the account offers for the currency; only a card is then kept
          // (attach refuses any other type, and charges allow cards only).
          currency: request.currency,
          customer: await this.customerOf(customer),
          client_reference_id: request.checkoutSession,
          metadata: { checkout_session: request.checkoutSession },
          success_url: request.successUrl,
          ...(request.cancelUrl === null ? {} : { cancel_url: request.cancelUrl }),
          custom_text: { submit: { message: request.description.slice(0, 1200) } },
          ...(request.billingAddress ? { billing_address_collection: 'required' as const } : {}),
          // A business buyer gives a tax ID and its legal name; Stripe takes them for a customer
          // it already has only when it may write that name onto it.
          ...(request.taxId
            ? {
                tax_id_collection: {
                  enabled: true,
                  ...(request.taxIdRequired ? { required: 'if_supported' as const } : {}),
                },
                customer_update: { name: 'auto' as const },
              }
            : {}),
        },
        {
          idempotencyKey:
            request.coupon === null
              ? `checkout:${request.checkoutSession}`
              : `checkout:${request.checkoutSession}:${request.coupon}`,
        },
      );
      if (session.url === null) throw new Error(`Stripe Checkout Session ${session.id} has no url`);
      return session.url;
    } catch (error) {
      return translate(error);
    }
  }

  /** The card a completed setup-mode Checkout Session saved (its SetupIntent's payment method). */
  async cardOfSetup(setupIntent: string): Promise<string | undefined> {
    try {
      const intent = await this.stripe.setupIntents.retrieve(setupIntent);
      const method = intent.payment_method;
      return typeof method === 'string' ? method : (method?.id ?? undefined);
    } catch (error) {
      return translate(error);
    }
  }

  /**
   * The customer's Stripe customer, made once: the key makes a retry answer the same one. It is
   * made with our id alone, so that every attempt asks with the same parameters (Stripe refuses a
   * key reused with others, for 24 hours): a first attempt that failed here after Stripe made it
   * is answered with that customer even once the email has changed. The email, name and address
   * go on after.
   */
  private async customerOf(customer: ProcessorCustomer): Promise<string> {
    if (customer.processorCustomer !== null) return customer.processorCustomer;
    const made = await this.stripe.customers.create(
      { metadata: { customer: customer.id } },
      { idempotencyKey: `customer:${customer.id}` },
    );
    const details = stripeDetails(customer);
    if (
      (details.email !== undefined && made.email !== details.email) ||
      (details.name !== undefined && made.name !== details.name) ||
      details.address !== undefined
    )
      await this.stripe.customers.update(made.id, details);
    // A tax id Stripe refuses does not keep the card from being saved: the customer's next change
    // of details tries again, and its sync logs the refusal.
    if (customer.taxIds.length > 0) await this.syncTaxIds(made.id, customer.taxIds).catch(() => undefined);
    return made.id;
  }

  async updateCustomer(processorCustomer: string, details: CustomerDetails): Promise<void> {
    try {
      await this.stripe.customers.update(processorCustomer, stripeDetails(details, true));
      await this.syncTaxIds(processorCustomer, details.taxIds);
    } catch (error) {
      return translate(error);
    }
  }

  /**
   * Makes the Stripe customer hold our customer's tax ids, as its name and address follow ours:
   * each one it lacks is added, each one we do not have (removed here, or added in Stripe's
   * dashboard) is deleted, and so is a second copy. Values compare as ours are kept: without
   * spaces, dots, dashes or slashes, upper case. Every tax id is tried; the first refusal (Stripe
   * checks each one's form, written as it documents it: `stripeTaxIdValue`) is thrown after, for
   * the sync's log.
   */
  private async syncTaxIds(processorCustomer: string, taxIds: readonly TaxId[]): Promise<void> {
    const key = (type: string, value: string | null) =>
      `${type}:${(value ?? '').replace(/[\s./-]/gu, '').toUpperCase()}`;
    const wanted = new Map(taxIds.map((t) => [key(t.type, t.value), t]));
    const held = new Set<string>();
    let refused: unknown;
    const attempt = async (work: () => Promise<unknown>) => {
      try {
        await work();
      } catch (error) {
        refused ??= error;
      }
    };
    for await (const existing of this.stripe.customers.listTaxIds(processorCustomer, { limit: 100 })) {
      const k = key(existing.type, existing.value);
      if (wanted.has(k) && !held.has(k)) held.add(k);
      else await attempt(() => this.stripe.customers.deleteTaxId(processorCustomer, existing.id));
    }
    for (const [k, taxId] of wanted)
      if (!held.has(k))
        await attempt(() =>
          this.stripe.customers.createTaxId(processorCustomer, {
            type: taxId.type as Stripe.CustomerCreateTaxIdParams.Type,
            value: stripeTaxIdValue(taxId.type, taxId.value),
          }),
        );
    if (refused !== undefined) throw refused;
  }

  async attach(customer: ProcessorCustomer, input: MethodInput): Promise<AttachedCard> {
    if (!('paymentMethod' in input))
      throw new CardError(
        '/card',
        'card numbers are not taken in live mode; collect the card with Stripe (Stripe.js or Checkout) and send its payment method id in `paymentMethod`',
      );
    try {
      const processorCustomer = await this.customerOf(customer);
      const method = await this.stripe.paymentMethods.attach(
        input.paymentMethod,
        { customer: processorCustomer },
        { idempotencyKey: `attach:${customer.id}:${input.paymentMethod}` },
      );
      if (method.type !== 'card' || method.card === undefined || method.card === null)
        throw new CardError('/paymentMethod', `is a ${method.type} payment method; only cards are taken`);
      // A customer made before this call has its details sent again, as they are now: a change
      // that Stripe did not take when it was made arrives with the next card.
      await this.stripe.customers.update(processorCustomer, {
        invoice_settings: { default_payment_method: method.id },
        ...(customer.processorCustomer === null ? {} : stripeDetails(customer)),
      });
      return {
        processorRef: method.id,
        processorCustomer,
        brand: method.card.brand,
        last4: method.card.last4,
        expMonth: method.card.exp_month,
        expYear: method.card.exp_year,
        fingerprint: method.card.fingerprint ?? null,
      };
    } catch (error) {
      if (error instanceof CardError) throw error;
      if (error instanceof Stripe.errors.StripeCardError)
        throw new CardError(
          '/paymentMethod',
          `the card was declined (${error.decline_code ?? error.code ?? 'declined'})`,
        );
      if (error instanceof Stripe.errors.StripeInvalidRequestError)
        throw new CardError('/paymentMethod', `Stripe refused it: ${error.message}`);
      return translate(error);
    }
  }

  async charge(request: ProcessorCharge): Promise<ChargeResult> {
    try {
      const intent = await this.stripe.paymentIntents.create(
        {
          amount: request.amount,
          currency: request.currency,
          payment_method: request.processorRef,
          allowed_payment_method_types: ['card'],
          confirm: true,
          off_session: true,
          metadata: request.metadata,
          ...(request.processorCustomer === null ? {} : { customer: request.processorCustomer }),
        },
        { idempotencyKey: `charge:${request.idempotencyKey}` },
      );
      if (intent.status === 'succeeded') return { status: 'succeeded', processorPaymentIntent: intent.id };
      // Anything else after an off-session confirmation is a refusal for this attempt: the
      // card needs the customer (requires_action) or another card (requires_payment_method).
      const error = intent.last_payment_error;
      return {
        status: 'failed',
        processorPaymentIntent: intent.id,
        failureReason: error?.decline_code ?? error?.code ?? intent.status,
      };
    } catch (error) {
      if (error instanceof Stripe.errors.StripeCardError) {
        const intent = (error.raw as { payment_intent?: { id?: string } } | undefined)?.payment_intent;
        return {
          status: 'failed',
          processorPaymentIntent: intent?.id ?? 'none',
          failureReason: error.decline_code ?? error.code ?? 'card_declined',
        };
      }
      if (error instanceof Stripe.errors.StripeInvalidRequestError)
        return {
          status: 'failed',
          processorPaymentIntent: 'none',
          failureReason: error.code ?? 'invalid_request',
        };
      return translate(error);
    }
  }

  async refund(request: {
    processorPaymentIntent: string;
    amount: number;
    idempotencyKey: string;
    metadata: Record<string, string>;
  }): Promise<RefundResult> {
    try {
      const refund = await this.stripe.refunds.create(
        {
          payment_intent: request.processorPaymentIntent,
          amount: request.amount,
          metadata: request.metadata,
        },
        { idempotencyKey: `refund:${request.idempotencyKey}` },
      );
      return { ...refundStatus(refund), processorRefund: refund.id };
    } catch (error) {
      return translate(error);
    }
  }

  async detach(processorRef: string): Promise<void> {
    try {
      await this.stripe.paymentMethods.detach(processorRef);
    } catch (error) {
      return translate(error);
    }
  }

  async settleRefund(processorRefund: string) {
    try {
      return refundStatus(await this.stripe.refunds.retrieve(processorRefund));
    } catch (error) {
      return translate(error);
    }
  }
}

/** Stripe's refund statuses in ours: pending and requires_action wait; canceled is a failure. */
export function refundStatus(refund: { status: string | null; failure_reason?: string | null }): {
  status: 'pending' | 'succeeded' | 'failed';
  failureReason?: string;
} {
  if (refund.status === 'succeeded') return { status: 'succeeded' };
  if (refund.status === 'failed' || refund.status === 'canceled')
    return { status: 'failed', failureReason: refund.failure_reason ?? refund.status };
  return { status: 'pending' };
}
