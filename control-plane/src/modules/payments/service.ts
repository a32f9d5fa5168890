import { ID, newId } from '@mcp-meter/ingest/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { DomainError, NotFoundError, ValidationError } from '../../errors';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { AuthContext } from '../providers/service';
import { CardError, type CardInput, type PaymentProcessor } from './processor';

interface MethodRow {
  id: string;
  customer_id: string;
  processor_ref: string;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  is_default: boolean;
  created_at: Date;
}

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
  reason: 'first_payment' | 'renewal' | 'dunning_retry' | 'trial_conversion' | 'topup';
  periodKey: string;
  attempt: number;
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
      await tx.query('SELECT id FROM customers WHERE id = $1 FOR UPDATE', [customer.id]);
      await tx.query('UPDATE payment_methods SET is_default = false WHERE customer_id = $1 AND is_default', [
        customer.id,
      ]);
      const { rows } = await tx.query<MethodRow>(
        `INSERT INTO payment_methods (id, provider_id, environment, customer_id, processor, processor_ref, brand, last4, exp_month, exp_year,
                                      is_default, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, true, $11) RETURNING *`,
        [
          newId(ID.paymentMethod),
          auth.providerId,
          auth.environment,
          customer.id,
          this.processor.name,
          attached.processorRef,
          attached.brand,
          attached.last4,
          attached.expMonth,
          attached.expYear,
          this.clock.now(),
        ],
      );
      const row = rows[0];
      if (row === undefined) throw new Error('payment method insert returned no row');
      return toMethod(row);
    });
  }

  async listMethods(auth: AuthContext, customerRef: string) {
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    const { rows } = await this.pool.query<MethodRow>(
      'SELECT * FROM payment_methods WHERE customer_id = $1 ORDER BY id',
      [customer.id],
    );
    return { data: rows.map(toMethod) };
  }

  async hasDefaultMethod(db: Pool | PoolClient, customerId: string): Promise<boolean> {
    const { rowCount } = await db.query(
      'SELECT 1 FROM payment_methods WHERE customer_id = $1 AND is_default',
      [customerId],
    );
    return (rowCount ?? 0) > 0;
  }

  /**
   * Charges the customer's default card inside the caller's transaction and records the
   * attempt with its payment.* event. The processor call carries a key made of the purchase
   * (or customer), period and attempt, so a retried transaction cannot charge twice; unique
   * indexes refuse a second row for the same attempt, with or without a purchase.
   */
  async charge(tx: PoolClient, auth: AuthContext, request: ChargeRequest): Promise<ChargeOutcome> {
    const at = this.clock.now();
    const { rows: methods } = await tx.query<MethodRow>(
      'SELECT * FROM payment_methods WHERE customer_id = $1 AND is_default',
      [request.customerId],
    );
    const method = methods[0];
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
    const inserted = await tx.query(
      `INSERT INTO payments (id, provider_id, environment, customer_id, purchase_id, product_id, plan_id, amount, currency, status, reason,
                             period_key, attempt, processor, processor_payment_intent, transaction_reference, failure_reason, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
       ON CONFLICT DO NOTHING`,
      [
        id,
        auth.providerId,
        auth.environment,
        request.customerId,
        request.purchaseId,
        request.productId,
        request.planId,
        request.amount,
        request.currency,
        result.status,
        request.reason,
        request.periodKey,
        request.attempt,
        this.processor.name,
        result.processorPaymentIntent,
        transactionReference,
        failureReason,
        at,
      ],
    );
    if (inserted.rowCount === 0) throw new Error(`payment ${key} was already attempted`);
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
    return { status: result.status, paymentId: id, failureReason };
  }
}
