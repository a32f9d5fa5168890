import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, withAdvisoryLock } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findAutoTopUp } from '../auto-topups/repository';
import { findCustomer, lockCustomerRow } from '../customers/repository';
import type { DisputeService } from '../disputes/service';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { Ledger, RevenuePart } from '../ledger/service';
import { findCardPaidPurchase } from '../purchases/repository';
import type { ChargeJournal } from './journal';
import { CardError, type MethodInput, type Processors } from './processor';
import {
  detachMethod,
  findDefaultMethod,
  findProcessorCustomer,
  insertDefaultMethod,
  insertPayment,
  listMethods,
  type MethodRow,
  restoreCard,
  setDefaultMethod,
} from './repository';

export const toMethod = (m: MethodRow) => ({
  id: m.id,
  brand: m.brand,
  last4: m.last4,
  expMonth: m.exp_month,
  expYear: m.exp_year,
  isDefault: m.is_default,
  createdAt: m.created_at.toISOString(),
});

export interface ChargeRequest {
  customerId: string;
  purchaseId: string | null;
  productId: string | null;
  planId: string | null;
  amount: number;
  currency: string;
  reason: 'first_payment' | 'renewal' | 'dunning_retry' | 'trial_conversion' | 'topup' | 'final_usage';
  periodKey: string;
  attempt: number;
  /** The invoice this charge pays (purchases); top-ups have none. */
  invoiceId?: string | undefined;
  /** The service periods the amount pays for (revenue recognition); unnamed amounts are earned at once. */
  revenue?: RevenuePart[] | undefined;
}

export interface ChargeOutcome {
  status: 'succeeded' | 'failed';
  paymentId: string;
  failureReason: string | null;
}

export class PaymentService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly processors: Processors,
    private readonly ledger: Ledger,
    private readonly disputes: Pick<DisputeService, 'openInTx'>,
    private readonly journal: ChargeJournal,
    private readonly logger?: Logger,
  ) {}

  /**
   * Stores a card for the customer and makes it the default: a sandbox test card, or in live mode
   * a payment method the provider's Stripe account holds (attached to the customer's Stripe
   * customer, made once). 409 payments_not_configured in live mode without Stripe connected.
   */
  async attachCard(auth: AuthContext, customerRef: string, input: MethodInput) {
    const processor = await this.processors.current(auth);
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    let attached: Awaited<ReturnType<typeof processor.attach>>;
    try {
      attached = await processor.attach(
        {
          id: customer.id,
          email: customer.email ?? null,
          name: customer.name ?? null,
          address: customer.address,
          taxIds: customer.tax_ids,
          processorCustomer: await findProcessorCustomer(this.pool, customer.id, processor.name),
        },
        input,
        this.clock.now(),
      );
    } catch (error) {
      if (!(error instanceof CardError)) throw error;
      if (error.message.includes('declined'))
        throw new DomainError('card_declined', `The card was declined: ${error.message}`);
      throw new ValidationError([{ path: error.field, message: error.message, location: 'body' }]);
    }
    const stored = await inTransaction(this.pool, async (tx) => {
      // Serialises card changes of one customer: two at once would both try to be the default.
      // A deletion committed since the customer was found keeps the card off it.
      const status = await lockCustomerRow(tx, customer.id);
      if (status === undefined || status === 'deleted')
        throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
      // The same card again (each hosted checkout stores the card it was paid with): one card.
      const again =
        attached.fingerprint === null
          ? undefined
          : await restoreCard(tx, customer.id, {
              processor: processor.name,
              fingerprint: attached.fingerprint,
              processor_ref: attached.processorRef,
              exp_month: attached.expMonth,
              exp_year: attached.expYear,
            });
      if (again !== undefined) return again;
      const row = await insertDefaultMethod(tx, {
        id: newId(ID.paymentMethod),
        provider_id: auth.providerId,
        environment: auth.environment,
        customer_id: customer.id,
        processor: processor.name,
        processor_ref: attached.processorRef,
        processor_customer: attached.processorCustomer,
        brand: attached.brand,
        last4: attached.last4,
        exp_month: attached.expMonth,
        exp_year: attached.expYear,
        created_at: this.clock.now(),
        fingerprint: attached.fingerprint,
      });
      return { row, previousRef: row.processor_ref };
    });
    // The copy it replaced is forgotten at the processor.
    if (stored.previousRef !== stored.row.processor_ref)
      await this.detachQuietly(auth, stored.row.processor, stored.previousRef, stored.row.id);
    return toMethod(stored.row);
  }

  /**
   * A committed change of a customer's email, name, address or tax ids, sent on to its customer object at the
   * processor (Stripe mails its receipts there). The details are read again here, so the latest
   * change is what is sent. A failure is logged; storing a card sends the details again.
   */
  async syncCustomerDetails(auth: AuthContext, customerId: string): Promise<void> {
    try {
      // One sync of a customer at a time, reading and sending under one lock: of two changes
      // made at once, the details read last are the ones Stripe is sent last. All on the lock's
      // connection, so a sync never waits for a second one from the pool.
      await withAdvisoryLock(this.pool, `customer-details:${customerId}`, async (db) => {
        const processorCustomer = await findProcessorCustomer(db, customerId, 'stripe');
        if (processorCustomer === null) return;
        const processor = await this.processors.named(auth, 'stripe', db);
        const customer = await findCustomer(db, auth, customerId);
        if (customer === undefined || processor.updateCustomer === undefined) return;
        await processor.updateCustomer(processorCustomer, {
          email: customer.email ?? null,
          name: customer.name ?? null,
          address: customer.address,
          taxIds: customer.tax_ids,
        });
      });
    } catch (error) {
      this.logger?.warn(
        { customer: customerId, err: error },
        "the processor did not take the customer's new details; storing a card sends them again",
      );
    }
  }

  /** Takes a card off the processor's customer; a failure is logged (we never charge it again). */
  private async detachQuietly(auth: AuthContext, processorName: string, ref: string, id: string) {
    const processor = await this.processors.named(auth, processorName, this.pool);
    await processor
      .detach(ref)
      .catch((error: unknown) =>
        this.logger?.warn(
          { paymentMethod: id, error: error instanceof Error ? error.message : String(error) },
          'the processor did not detach a removed card',
        ),
      );
  }

  async listMethods(auth: AuthContext, customerRef: string) {
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    return { data: (await listMethods(this.pool, customer.id)).map(toMethod) };
  }

  /** Makes one of the customer's cards the default: later charges (renewals, top-ups) use it. */
  async makeDefault(auth: AuthContext, customerRef: string, id: string) {
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    return inTransaction(this.pool, async (tx) => {
      await lockCustomerRow(tx, customer.id);
      const row = await setDefaultMethod(tx, customer.id, id);
      if (row === undefined) throw new NotFoundError('payment_method_not_found', `No payment method ${id}`);
      return toMethod(row);
    });
  }

  /**
   * Removes a card; when it was the default, the newest other card becomes the default. The last
   * card cannot go while something charges it as it goes (a priced recurring plan, usage billed
   * to the card, an auto top-up): 409 payment_method_required, so a renewal never finds no card.
   * The processor forgets the card after the commit (a failure there is logged: we never charge
   * a removed card, and Stripe keeps it on the customer only).
   */
  async removeMethod(auth: AuthContext, customerRef: string, id: string): Promise<void> {
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    const removed = await inTransaction(this.pool, async (tx) => {
      await lockCustomerRow(tx, customer.id);
      const cards = await listMethods(tx, customer.id);
      const card = cards.find((c) => c.id === id);
      if (card === undefined) throw new NotFoundError('payment_method_not_found', `No payment method ${id}`);
      const others = cards.filter((c) => c.id !== id);
      if (others.length === 0) {
        const paid = await findCardPaidPurchase(tx, customer.id);
        const topUp = await findAutoTopUp(tx, customer.id);
        if (paid !== undefined || topUp?.status === 'active')
          throw new ConflictError(
            'payment_method_required',
            paid !== undefined
              ? `Purchase ${paid.id} is paid with this card: add another card before removing it`
              : 'Auto top-up charges this card: add another card or turn auto top-up off first',
          );
      }
      await detachMethod(tx, customer.id, id, this.clock.now());
      // The newest: ids grow with time, and break ties of cards added in the same millisecond.
      const next = others.sort(
        (a, b) => b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : -1),
      )[0];
      if (card.is_default && next !== undefined) await setDefaultMethod(tx, customer.id, next.id);
      return card;
    });
    await this.detachQuietly(auth, removed.processor, removed.processor_ref, removed.id);
  }

  async hasDefaultMethod(db: Pool | PoolClient, customerId: string): Promise<boolean> {
    return (await findDefaultMethod(db, customerId)) !== undefined;
  }

  /**
   * Charges the customer's default card inside the caller's transaction and records the
   * attempt with its payment.* event. The processor call carries a key made of the purchase
   * (or customer), period and attempt, so a retried transaction cannot charge twice; unique
   * indexes refuse a second row for the same attempt, with or without a purchase. A succeeded
   * charge is also written to the charge journal at once (journal.ts): should the caller's
   * transaction roll back, the processor's charge is still known, and a retry records it.
   */
  async charge(tx: PoolClient, auth: AuthContext, request: ChargeRequest): Promise<ChargeOutcome> {
    const at = this.clock.now();
    const method = await findDefaultMethod(tx, request.customerId);
    const attemptKey = `${request.purchaseId ?? request.customerId}:${request.periodKey}:${request.attempt}`;
    const { key, journaled, asked } = await this.journal.keyFor(tx, auth, attemptKey, request);
    // A retry of an unrecorded charge is asked as the first attempt asked it, and its payment
    // takes the id the processor's metadata names (the first attempt's row rolled back).
    const id = asked?.paymentId ?? newId(ID.payment);
    const metadata = asked?.metadata ?? {
      payment: id,
      customer: request.customerId,
      reason: request.reason,
      // So the processor's event for this charge can put it on the journal should this
      // process die before it does (journal.ts, `learn`).
      charge_key: key,
      charge_attempt: attemptKey,
      ...(request.purchaseId === null ? {} : { purchase: request.purchaseId }),
      ...(request.invoiceId === undefined ? {} : { invoice: request.invoiceId }),
    };
    const result =
      method === undefined
        ? { status: 'failed' as const, processorPaymentIntent: 'none', failureReason: 'no_payment_method' }
        : await (await this.processors.named(auth, method.processor, tx)).charge({
            processorRef: method.processor_ref,
            processorCustomer: method.processor_customer,
            amount: request.amount,
            currency: request.currency,
            idempotencyKey: key,
            metadata,
          });
    if (result.status === 'succeeded' && method !== undefined && !journaled)
      await this.journal.write(tx, {
        provider_id: auth.providerId,
        environment: auth.environment,
        idempotency_key: key,
        attempt_key: attemptKey,
        customer_id: request.customerId,
        payment_id: id,
        processor: method.processor,
        processor_payment_intent: result.processorPaymentIntent,
        amount: request.amount,
        currency: request.currency,
        metadata,
        created_at: at,
      });
    const failureReason = result.status === 'failed' ? result.failureReason : null;
    const transactionReference = newId(ID.transaction);
    const inserted = await insertPayment(tx, {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: request.customerId,
      purchase_id: request.purchaseId,
      product_id: request.productId,
      plan_id: request.planId,
      amount: request.amount,
      currency: request.currency,
      status: result.status,
      reason: request.reason,
      period_key: request.periodKey,
      attempt: request.attempt,
      processor: method?.processor ?? 'none',
      processor_payment_intent: result.processorPaymentIntent,
      transaction_reference: transactionReference,
      failure_reason: failureReason,
      created_at: at,
      invoice_id: request.invoiceId ?? null,
    });
    if (!inserted) throw new Error(`payment ${key} was already attempted`);
    if (result.status === 'succeeded') {
      await this.journal.recorded(tx, auth, key, id);
      await this.ledger.recordPayment(tx, auth, {
        id,
        transactionId: transactionReference,
        customerId: request.customerId,
        amount: request.amount,
        currency: request.currency,
        description:
          request.invoiceId === undefined
            ? `Payment (${request.reason})`
            : `Invoice ${request.invoiceId} (${request.reason})`,
        at,
        revenue: request.revenue,
      });
    }
    const object = {
      id,
      amount: request.amount,
      currency: request.currency,
      customer: request.customerId,
      product: request.productId,
      plan: request.planId,
      processor_payment_intent: result.processorPaymentIntent,
      transaction_reference: transactionReference,
      created: unixSeconds(at),
      ...(failureReason === null ? {} : { failure_reason: failureReason }),
    };
    await writeEvent(tx, {
      ...auth,
      type: result.status === 'succeeded' ? 'payment.succeeded' : 'payment.failed',
      object,
      at,
    });
    if (result.status === 'succeeded' && result.disputed !== undefined) {
      await this.disputes.openInTx(
        tx,
        auth,
        {
          id,
          processor: method?.processor ?? 'none',
          customer_id: request.customerId,
          purchase_id: request.purchaseId,
          amount: request.amount,
          currency: request.currency,
          status: 'succeeded',
          processor_payment_intent: result.processorPaymentIntent,
          transaction_reference: transactionReference,
        },
        { reason: result.disputed.reason },
      );
    }
    return { status: result.status, paymentId: id, failureReason };
  }
}
