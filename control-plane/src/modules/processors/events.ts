import type { Logger } from '@mcp-meter/contracts/kit';
import type Stripe from 'stripe';
import {
  type AddressInput,
  TAX_ID_TYPES,
  TAX_ID_VERIFICATION_STATUSES,
  type TaxIdType,
  type TaxIdVerification,
} from '../../billing-details';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { DomainError, NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { BillingInput } from '../checkout/billing';
import type { CheckoutService } from '../checkout/service';
import type { CustomerService } from '../customers/service';
import type { DisputeService } from '../disputes/service';
import type { ChargeJournal, LearnedCharge } from '../payments/journal';
import type { MadeRefund, RefundService } from '../payments/refunds';
import { findCustomerOfProcessor, lockPaymentByIntent } from '../payments/repository';
import type { PayoutService } from '../payouts/service';
import { type LearnedEarlyEnd, learnEarlyEnd } from '../purchases/proration';
import type { PurchaseRow, PurchaseService } from '../purchases/service';
import { claimEvent, setEventOutcome } from './repository';
import type { ProcessorService } from './service';
import { refundStatus, StripeProcessor, translate } from './stripe';

/** What became of one event: applied, already applied (a redelivery), ignored, or why it matched nothing. */
export type EventOutcome = 'applied' | 'duplicate' | 'ignored' | `unmatched:${string}` | `refused:${string}`;

type Applied = { outcome: EventOutcome; purchases?: PurchaseRow[] };

/**
 * Stripe's events for a connected provider (POST /v1/processors/stripe/webhooks/{providerId}):
 * the signature is verified with the provider's signing secret over the raw body; each event is
 * applied once, in one transaction with its claim by Stripe's event id (a redelivery or a
 * concurrent copy is acknowledged without effect); events may come in any order. Stripe's
 * objects are read here and nowhere else: what reaches our services is our own vocabulary.
 */
export class StripeEvents {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly processors: ProcessorService,
    private readonly refunds: RefundService,
    private readonly disputes: DisputeService,
    private readonly payouts: PayoutService,
    private readonly purchases: PurchaseService,
    private readonly checkout: CheckoutService,
    private readonly journal: ChargeJournal,
    private readonly customers: Pick<CustomerService, 'recordTaxIdVerification'>,
    private readonly logger: Logger,
  ) {}

  async receive(providerId: string, rawBody: Buffer, signature: string | undefined) {
    const connection = await this.processors.stripeConnection(providerId);
    if (connection === undefined)
      throw new NotFoundError('not_found', `Provider ${providerId} has no Stripe account connected`);
    let event: Stripe.Event;
    try {
      event = connection.stripe.webhooks.constructEvent(rawBody, signature ?? '', connection.webhookSecret);
    } catch (error) {
      throw new DomainError(
        'invalid_signature',
        `The Stripe-Signature does not verify: ${(error as Error).message}`,
      );
    }
    if (!isEnvelope(event))
      throw new DomainError(
        'malformed_request',
        'The signed event is not one Stripe sends: it needs an id, a type and a created time',
      );
    // A connected account's events are its live mode's; Stripe's own test mode stands in for it.
    const auth: AuthContext = { providerId, environment: 'live' };
    const claim = { providerId, processor: 'stripe', eventId: event.id, type: event.type };
    if (event.type === 'checkout.session.completed') {
      const outcome = wellFormed(event)
        ? await this.checkoutCompleted(providerId, connection.stripe, event.data.object)
        : 'refused:malformed';
      const fresh = await claimEvent(this.pool, { ...claim, outcome, at: this.clock.now() });
      return this.answer(providerId, event, fresh ? outcome : 'duplicate');
    }
    // Whose tax id a tax id event is about: found before the transaction, as it may ask Stripe.
    // A malformed one (no object) is refused as malformed below, never read here.
    const taxIdOwner =
      isTaxIdEvent(event) && wellFormed(event)
        ? await this.customerOfStripe(auth, connection.stripe, event.data.object.customer)
        : undefined;
    const applied = await inTransaction(this.pool, async (tx): Promise<Applied> => {
      const fresh = await claimEvent(tx, { ...claim, outcome: 'applied', at: this.clock.now() });
      if (!fresh) return { outcome: 'duplicate' };
      // A refusal of our rules (a dispute larger than what is left of a payment, say) is kept as
      // the event's outcome and acknowledged: Stripe sending it again would change nothing.
      await tx.query('SAVEPOINT apply_event');
      let result: Applied;
      try {
        result =
          isTaxIdEvent(event) && wellFormed(event)
            ? await this.taxIdVerified(tx, auth, event, taxIdOwner)
            : await this.apply(tx, auth, event);
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        await tx.query('ROLLBACK TO SAVEPOINT apply_event');
        result = { outcome: `refused:${error.code}` };
      }
      if (result.outcome !== 'applied') await setEventOutcome(tx, { ...claim, outcome: result.outcome });
      return result;
    });
    if (applied.purchases !== undefined && applied.purchases.length > 0)
      await this.purchases.publish(applied.purchases);
    return this.answer(providerId, event, applied.outcome);
  }

  private answer(providerId: string, event: Stripe.Event, outcome: EventOutcome) {
    this.logger.info({ provider: providerId, event: event.id, type: event.type, outcome }, 'stripe event');
    return { received: true as const, id: event.id, type: event.type, outcome };
  }

  /**
   * Stripe Checkout saved the customer's card for one of our checkout sessions: the session is
   * paid with it (card stored, plan activated or credits bought, charged off-session). Paying is
   * guarded by the session's own state, so a redelivery finds it closed and charges nothing; a
   * copy arriving while the first is paying gets 409 and Stripe delivers it again later.
   */
  private async checkoutCompleted(
    providerId: string,
    stripe: Stripe,
    session: Stripe.Checkout.Session,
  ): Promise<EventOutcome> {
    const ours = session.client_reference_id ?? session.metadata?.checkout_session;
    const setup = typeof session.setup_intent === 'string' ? session.setup_intent : session.setup_intent?.id;
    if (session.mode !== 'setup' || ours === undefined || ours === null || setup === undefined)
      return 'ignored';
    const card = await new StripeProcessor(stripe).cardOfSetup(setup);
    if (card === undefined) return 'unmatched:card';
    try {
      await this.checkout.completeFromProcessor(providerId, ours, card, billingOf(session));
      return 'applied';
    } catch (error) {
      if (!(error instanceof DomainError) || error.code === 'checkout_session_in_progress') throw error;
      return error.code === 'checkout_session_closed' ? 'duplicate' : `refused:${error.code}`;
    }
  }

  /**
   * Our customer of a Stripe customer object: the one whose cards it holds, else the one its
   * metadata names (we make each Stripe customer with `metadata.customer`), in this tenant only.
   */
  private async customerOfStripe(
    auth: AuthContext,
    stripe: Stripe,
    stripeCustomer: string | Stripe.Customer | Stripe.DeletedCustomer | null,
  ): Promise<string | undefined> {
    const id = typeof stripeCustomer === 'string' ? stripeCustomer : stripeCustomer?.id;
    if (!isText(id)) return undefined;
    const found = await findCustomerOfProcessor(this.pool, auth, 'stripe', id);
    if (found !== undefined) return found;
    let customer: Stripe.Customer | Stripe.DeletedCustomer;
    try {
      customer = await stripe.customers.retrieve(id);
    } catch (error) {
      // A customer Stripe no longer has is no one's; Stripe out of reach is 503, and Stripe
      // sends the event again later.
      if (error instanceof Error && (error as { code?: unknown }).code === 'resource_missing')
        return undefined;
      return translate(error);
    }
    return customer.deleted === true ? undefined : (customer.metadata?.customer ?? undefined);
  }

  /**
   * Stripe checked one of a customer's tax ids against its registry (VIES for EU VAT, HMRC, the
   * ABR): the verification is kept on our customer's tax id of the same kind and number. One we
   * no longer hold, or a kind we do not keep, changes nothing.
   */
  private async taxIdVerified(
    tx: PoolClient,
    auth: AuthContext,
    event: Stripe.CustomerTaxIdCreatedEvent | Stripe.CustomerTaxIdUpdatedEvent,
    customerId: string | undefined,
  ): Promise<Applied> {
    const taxId = event.data.object;
    const found = taxId.verification;
    if (
      found === null ||
      typeof found !== 'object' ||
      !isVerificationStatus(found.status) ||
      !isTaxIdType(taxId.type) ||
      typeof taxId.value !== 'string'
    )
      return { outcome: 'ignored' };
    if (customerId === undefined) return { outcome: 'unmatched:customer' };
    const verification: TaxIdVerification = {
      status: found.status,
      verifiedName: cleanText(found.verified_name),
      verifiedAddress: cleanText(found.verified_address),
      updatedAt: new Date(event.created * 1000).toISOString(),
    };
    const kept = await this.customers.recordTaxIdVerification(
      tx,
      auth,
      customerId,
      { type: taxId.type, value: taxId.value },
      verification,
    );
    return { outcome: kept ? 'applied' : 'unmatched:tax_id' };
  }

  private async apply(tx: PoolClient, auth: AuthContext, event: Stripe.Event): Promise<Applied> {
    // Signed is not well formed: an object without the fields its type reads is kept as refused.
    if (!wellFormed(event)) return { outcome: 'refused:malformed' };
    switch (event.type) {
      case 'refund.created':
      case 'refund.updated':
      case 'refund.failed':
      case 'charge.refund.updated':
        return this.refundMoved(tx, auth, event.data.object);
      case 'charge.refunded': {
        const refunds = event.data.object.refunds?.data ?? [];
        const purchases: PurchaseRow[] = [];
        let matched = false;
        for (const refund of refunds) {
          const moved = await this.refundMoved(tx, auth, refund);
          matched ||= moved.outcome === 'applied';
          purchases.push(...(moved.purchases ?? []));
        }
        return { outcome: matched ? 'applied' : 'unmatched:refund', purchases };
      }
      case 'charge.dispute.created':
      case 'charge.dispute.updated':
      case 'charge.dispute.closed':
        return this.disputeMoved(tx, auth, event.data.object);
      case 'payout.created':
      case 'payout.updated':
      case 'payout.paid':
      case 'payout.failed':
      case 'payout.canceled':
        return this.payoutMoved(tx, auth, event.data.object);
      case 'payment_intent.succeeded':
      case 'payment_intent.payment_failed': {
        // Charges are confirmed while we wait, so their outcome is already recorded; the event
        // only confirms it. A succeeded one of ours that no payment records goes on the charge
        // journal; any other we have no payment for is noted (reconciliation reports it).
        const payment = await lockPaymentByIntent(tx, auth, event.data.object.id);
        if (payment === undefined) {
          const charge = event.type === 'payment_intent.succeeded' ? ourCharge(event.data.object) : undefined;
          if (charge !== undefined && (await this.journal.learn(tx, auth, charge)))
            return { outcome: 'applied' };
          return { outcome: 'unmatched:payment' };
        }
        const agrees = (payment.status === 'succeeded') === (event.type === 'payment_intent.succeeded');
        return { outcome: agrees ? 'applied' : `unmatched:payment_${payment.status}` };
      }
      default:
        return { outcome: 'ignored' };
    }
  }

  /**
   * A refund's status at Stripe: a pending one of ours settles (refunded, or failed with the
   * money back); one a provider's request made whose transaction failed after Stripe refunded is
   * recorded (refunds.ts).
   */
  private async refundMoved(tx: PoolClient, auth: AuthContext, refund: Stripe.Refund): Promise<Applied> {
    const outcome = refundStatus(refund);
    const settled = await this.refunds.settleFromProcessor(tx, auth, refund.id, outcome, madeRefund(refund));
    if (!settled.found) {
      // A refund of unused time whose ending failed: kept for the ending's retry (proration.ts).
      const early = outcome.status === 'failed' ? undefined : earlyEndRefund(refund);
      if (early !== undefined && (await learnEarlyEnd(tx, auth, early, this.clock.now())))
        return { outcome: 'applied' };
      return { outcome: outcome.status === 'pending' ? 'applied' : 'unmatched:refund' };
    }
    return { outcome: 'applied', purchases: settled.purchase === undefined ? [] : [settled.purchase] };
  }

  /**
   * A dispute at Stripe: opened on our payment (the money leaves the balance), under review once
   * evidence is in, won (the money returns) or lost. A close that arrives before its opening
   * opens it first.
   */
  private async disputeMoved(tx: PoolClient, auth: AuthContext, dispute: Stripe.Dispute): Promise<Applied> {
    // The payment is locked before the dispute is looked up: events of one dispute delivered at
    // once wait for each other here, so the later one sees what the first one opened.
    const intent =
      typeof dispute.payment_intent === 'string' ? dispute.payment_intent : dispute.payment_intent?.id;
    const payment = intent === undefined ? undefined : await lockPaymentByIntent(tx, auth, intent);
    let row = await this.disputes.findByProcessorId(tx, auth, dispute.id);
    if (row === undefined) {
      if (payment === undefined || payment.status !== 'succeeded') return { outcome: 'unmatched:payment' };
      row = await this.disputes.openInTx(tx, auth, payment, {
        amount: dispute.amount,
        reason: dispute.reason,
        processorDispute: dispute.id,
      });
    }
    if (dispute.status === 'under_review') await this.disputes.reviewInTx(tx, auth, row.id);
    const status: string = dispute.status;
    if (status === 'won' || status === 'lost') await this.disputes.closeInTx(tx, auth, row.id, status);
    return { outcome: 'applied' };
  }

  /** A payout Stripe made from the provider's balance: recorded once, then paid or failed. */
  private async payoutMoved(tx: PoolClient, auth: AuthContext, payout: Stripe.Payout): Promise<Applied> {
    await this.payouts.recordFromProcessor(tx, auth, {
      processorPayout: payout.id,
      amount: payout.amount,
      currency: payout.currency,
      arrivalDate: new Date(payout.arrival_date * 1000),
      status:
        payout.status === 'paid'
          ? 'paid'
          : payout.status === 'failed' || payout.status === 'canceled'
            ? 'failed'
            : 'pending',
      failureReason: payout.failure_code ?? (payout.status === 'canceled' ? 'canceled' : null),
    });
    return { outcome: 'applied' };
  }
}

const isText = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 255;
const isAmount = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * A succeeded PaymentIntent as the charge journal takes it, when our charge made it: its
 * metadata names the journal's key and attempt (payments/service.ts), the key being the attempt's
 * or one of its generations, and the attempt the purchase's or customer's it names.
 */
function ourCharge(intent: Stripe.PaymentIntent): LearnedCharge | undefined {
  const metadata: Record<string, unknown> = intent.metadata ?? {};
  const { charge_key: key, charge_attempt: attempt, customer, payment, purchase } = metadata;
  if (!isText(key) || !isText(attempt) || !isText(customer) || !isText(payment)) return undefined;
  const generation = key.startsWith(`${attempt}:g`) && /^[1-9]\d{0,5}$/.test(key.slice(attempt.length + 2));
  if (key !== attempt && !generation) return undefined;
  if (!attempt.startsWith(`${isText(purchase) ? purchase : customer}:`)) return undefined;
  const amount = intent.amount_received > 0 ? intent.amount_received : intent.amount;
  if (!isAmount(amount) || amount === 0 || !isText(intent.currency)) return undefined;
  return {
    key,
    attemptKey: attempt,
    customerId: customer,
    paymentId: payment,
    processor: 'stripe',
    processorPaymentIntent: intent.id,
    amount,
    currency: intent.currency,
    // Stripe's metadata is strings: what the charge was asked with, for a retry to ask the same.
    metadata: Object.values(metadata).every((v) => typeof v === 'string')
      ? (metadata as Record<string, string>)
      : null,
  };
}

/**
 * A Stripe Refund as a provider's refund request made it: its metadata names our payment and
 * the request as its source (refunder.ts `processorMetadata`), with a positive amount. A plan
 * switch's refunds are left to the switch's own retry, and the journal's to the journal.
 */
function madeRefund(refund: Stripe.Refund): MadeRefund | undefined {
  const metadata: Record<string, unknown> = refund.metadata ?? {};
  const { payment, refund_source: source, refund_reason: reason, refund_key: key } = metadata;
  if (!isText(payment) || source !== 'request') return undefined;
  // A key is made of the payment it refunds (refunder.ts): one naming another is not ours.
  if (key !== undefined && !(isText(key) && key.startsWith(`${payment}:`))) return undefined;
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 500)) return undefined;
  const intent =
    typeof refund.payment_intent === 'string' ? refund.payment_intent : refund.payment_intent?.id;
  if (!isText(intent) || !isAmount(refund.amount) || refund.amount === 0 || !isText(refund.currency))
    return undefined;
  return {
    paymentId: payment,
    processorPaymentIntent: intent,
    amount: refund.amount,
    currency: refund.currency,
    reason: reason ?? null,
    key: key ?? null,
  };
}

/**
 * A Stripe Refund of a purchase's unused time (proration.ts `refundUnusedTime`): its metadata
 * names our payment, the purchase whose period ended early and the moment it was counted from.
 */
function earlyEndRefund(refund: Stripe.Refund): LearnedEarlyEnd | undefined {
  const metadata: Record<string, unknown> = refund.metadata ?? {};
  const { payment, refund_source: source, early_end: purchase, prorated_at: at, refund_reason } = metadata;
  if (!isText(payment) || source !== 'proration' || !isText(purchase) || !isText(at)) return undefined;
  const proratedAt = new Date(at);
  const intent =
    typeof refund.payment_intent === 'string' ? refund.payment_intent : refund.payment_intent?.id;
  if (Number.isNaN(proratedAt.getTime()) || proratedAt.toISOString() !== at || !isText(intent))
    return undefined;
  if (!isAmount(refund.amount) || refund.amount === 0 || !isText(refund.currency)) return undefined;
  return {
    purchaseId: purchase,
    paymentId: payment,
    proratedAt,
    processorPaymentIntent: intent,
    processorRefund: refund.id,
    amount: refund.amount,
    currency: refund.currency,
    // Stripe keeps up to 500 characters a metadata value.
    reason: typeof refund_reason === 'string' && refund_reason.length <= 500 ? refund_reason : null,
  };
}

/**
 * An event as Stripe sends every one, and as it is claimed: an id, a type and a time. Its object
 * is its handler's to judge (`wellFormed`): one without what it reads is kept as refused.
 */
function isEnvelope(event: unknown): boolean {
  const e = event as { id?: unknown; type?: unknown; created?: unknown };
  return (
    isText(e.id) &&
    isText(e.type) &&
    Number.isSafeInteger(e.created) &&
    (e.created as number) >= 0 &&
    (e.created as number) <= LAST_SECOND
  );
}

/** 9999-12-31T23:59:59Z in Unix seconds: an event's time past it is no time Stripe sends. */
const LAST_SECOND = 253_402_300_799;

/** Whether the event's object has what its handler reads, with sane values. */
function wellFormed(event: Stripe.Event): boolean {
  const object = (event.data as { object?: unknown } | undefined)?.object as
    | Record<string, unknown>
    | undefined;
  if (typeof object !== 'object' || object === null || Array.isArray(object) || !isText(object.id))
    return false;
  if (event.type.startsWith('payout.'))
    return isAmount(object.amount) && isText(object.currency) && typeof object.arrival_date === 'number';
  if (event.type.startsWith('charge.dispute.'))
    return isAmount(object.amount) && (object.amount as number) > 0;
  if (event.type === 'charge.refunded') {
    const refunds = (object.refunds as { data?: unknown } | undefined)?.data;
    return (
      refunds === undefined ||
      (Array.isArray(refunds) && refunds.every((r) => isText((r as { id?: unknown })?.id)))
    );
  }
  return true;
}

/** Control characters, which no part of an address keeps (billing-details.ts). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
const CONTROL = /[\u0000-\u001f\u007f]/gu;

/** A tax id kind our customers keep. */
const isTaxIdType = (type: string): type is TaxIdType => (TAX_ID_TYPES as readonly string[]).includes(type);

const isVerificationStatus = (status: unknown): status is TaxIdVerification['status'] =>
  (TAX_ID_VERIFICATION_STATUSES as readonly unknown[]).includes(status);

/** Text a registry returned, as we keep it: no control characters, at most 500 characters. */
const cleanText = (value: string | null | undefined) =>
  value?.replace(CONTROL, ' ').trim().slice(0, 500) || null;

/** Stripe's events about a customer's tax id, which carry its verification. */
const isTaxIdEvent = (
  event: Stripe.Event,
): event is Stripe.CustomerTaxIdCreatedEvent | Stripe.CustomerTaxIdUpdatedEvent =>
  event.type === 'customer.tax_id.created' || event.type === 'customer.tax_id.updated';

/**
 * The billing details Stripe's page collected, as our customers keep them: the address
 * (`billing_address_collection: required`), the tax ID and the business name given with it
 * (`tax_id_collection`; Stripe takes one); none when it collected none. A tax ID of a type we do
 * not keep is left out.
 */
function billingOf(session: Stripe.Checkout.Session): BillingInput | undefined {
  const details = session.customer_details;
  // Each part as our addresses keep it: no control characters, within its length.
  const part = (value: string | null | undefined, max: number) =>
    value?.replace(CONTROL, ' ').trim().slice(0, max) || undefined;
  const billing: BillingInput = {};
  const a = details?.address;
  if (a !== null && a !== undefined) {
    const parts: AddressInput = {
      line1: part(a.line1, 200),
      line2: part(a.line2, 200),
      city: part(a.city, 100),
      state: part(a.state, 100),
      postalCode: part(a.postal_code, 20),
      country: part(a.country, 2),
    };
    const given = Object.entries(parts).filter(([, value]) => value !== undefined);
    if (given.length > 0) billing.address = Object.fromEntries(given) as AddressInput;
  }
  const taxId = details?.tax_ids?.find((t) => isTaxIdType(t.type) && part(t.value, 64) !== undefined);
  if (taxId !== undefined) {
    billing.taxId = { type: taxId.type as TaxIdType, value: part(taxId.value, 64) as string };
    billing.businessName = part(details?.business_name ?? details?.name, 200);
  }
  return Object.keys(billing).length === 0 ? undefined : billing;
}
