import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { DomainError, NotFoundError, ValidationError } from '../../errors';
import { findCustomer } from '../customers/repository';
import type { DisputeService } from '../disputes/service';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { Ledger, RevenuePart } from '../ledger/service';
import type { AuthContext } from '../providers/service';
import { CardError, type CardInput, type PaymentProcessor } from './processor';
import {
  findDefaultMethod,
  insertDefaultMethod,
  insertPayment,
  listMethods,
  lockCustomerForCards,
  type MethodRow,
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
    private readonly processor: PaymentProcessor,
    private readonly ledger: Ledger,
    private readonly disputes: Pick<DisputeService, 'openInTx'>,
  ) {}

  /** Stores a card for the customer (sandbox test cards only) and makes it the default. */
  async attachCard(auth: AuthContext, customerRef: string, card: CardInput) {
    if (auth.environment === 'live') {
      throw new DomainError(
        'payments_not_configured',
        'No live payment processor is configured; card payments work in sandbox',
      );
    }
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    let attached: ReturnType<PaymentProcessor['attach']>;
    try {
      attached = this.processor.attach(card, this.clock.now());
    } catch (error) {
      if (!(error instanceof CardError)) throw error;
      if (error.message.includes('declined'))
        throw new DomainError('card_declined', `The card was declined: ${error.message}`);
      throw new ValidationError([{ path: error.field, message: error.message, location: 'body' }]);
    }
    return inTransaction(this.pool, async (tx) => {
      // Serialises card changes of one customer: two at once would both try to be the default.
      await lockCustomerForCards(tx, customer.id);
      const row = await insertDefaultMethod(tx, {
        id: newId(ID.paymentMethod),
        provider_id: auth.providerId,
        environment: auth.environment,
        customer_id: customer.id,
        processor: this.processor.name,
        processor_ref: attached.processorRef,
        brand: attached.brand,
        last4: attached.last4,
        exp_month: attached.expMonth,
        exp_year: attached.expYear,
        created_at: this.clock.now(),
      });
      return toMethod(row);
    });
  }

  async listMethods(auth: AuthContext, customerRef: string) {
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    return { data: (await listMethods(this.pool, customer.id)).map(toMethod) };
  }

  async hasDefaultMethod(db: Pool | PoolClient, customerId: string): Promise<boolean> {
    return (await findDefaultMethod(db, customerId)) !== undefined;
  }

  /**
   * Charges the customer's default card inside the caller's transaction and records the
   * attempt with its payment.* event. The processor call carries a key made of the purchase
   * (or customer), period and attempt, so a retried transaction cannot charge twice; unique
   * indexes refuse a second row for the same attempt, with or without a purchase.
   */
  async charge(tx: PoolClient, auth: AuthContext, request: ChargeRequest): Promise<ChargeOutcome> {
    const at = this.clock.now();
    const method = await findDefaultMethod(tx, request.customerId);
    const key = `${request.purchaseId ?? request.customerId}:${request.periodKey}:${request.attempt}`;
    const result =
      method === undefined
        ? { status: 'failed' as const, processorPaymentIntent: 'none', failureReason: 'no_payment_method' }
        : this.processor.charge({
            processorRef: method.processor_ref,
            amount: request.amount,
            currency: request.currency,
            idempotencyKey: key,
          });
    const failureReason = result.status === 'failed' ? result.failureReason : null;
    const id = newId(ID.payment);
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
      processor: this.processor.name,
      processor_payment_intent: result.processorPaymentIntent,
      transaction_reference: transactionReference,
      failure_reason: failureReason,
      created_at: at,
      invoice_id: request.invoiceId ?? null,
    });
    if (!inserted) throw new Error(`payment ${key} was already attempted`);
    if (result.status === 'succeeded') {
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
