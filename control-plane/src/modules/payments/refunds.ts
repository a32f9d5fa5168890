import { ID, newId } from '@mcp-meter/contracts/kit';
import { Type } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { type App, authOf } from '../../http/app';
import { errorResponses, Metadata, Problem, Timestamp } from '../../http/schemas';
import { disputedAmount } from '../disputes/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { Ledger } from '../ledger/service';
import type { AuthContext } from '../providers/service';
import { lockPurchase } from '../purchases/repository';
import type { PurchaseRow, PurchaseService } from '../purchases/service';
import type { PaymentProcessor } from './processor';
import { insertRefund, lockPayment, refundedAmount } from './repository';

/** Spec 2.7 / 4.9; `refundAmount` defaults to everything not yet refunded. */
export const RefundCreate = Type.Object(
  {
    originalTransactionId: Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'The payment (pay_…) or its transaction reference (txn_…)',
    }),
    refundAmount: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 99_999_999_999, description: 'Minor units' }),
    ),
    currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$' })),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
    metadata: Type.Optional(Metadata),
    providerId: Type.Optional(
      Type.String({ maxLength: 100, description: 'Must be your own provider id when sent' }),
    ),
  },
  { additionalProperties: false },
);

const Refund = Type.Object({
  id: Type.String(),
  originalTransactionId: Type.String(),
  refundAmount: Type.Integer(),
  currency: Type.String(),
  status: Type.String(),
  reason: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
});

/**
 * Refunds through the processor. The outcome is announced by events: payment.refund_pending
 * when initiated, then payment.refunded or payment.refund_failed. A refund that returns all of
 * a purchase's payment revokes the entitlement (purchase.refunded, status cancelled).
 */
export class RefundService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly processor: PaymentProcessor,
    private readonly purchases: PurchaseService,
    private readonly ledger: Ledger,
  ) {}

  async refund(auth: AuthContext, input: typeof RefundCreate.static) {
    if (input.providerId !== undefined && input.providerId !== auth.providerId) {
      throw new ValidationError([
        { path: '/providerId', message: 'is not the provider of this API key', location: 'body' },
      ]);
    }
    const at = this.clock.now();
    const { result, purchase } = await inTransaction(this.pool, async (tx) => {
      const payment = await lockPayment(tx, auth, input.originalTransactionId);
      if (payment === undefined || payment.status !== 'succeeded') {
        throw new NotFoundError(
          'transaction_not_found',
          `No successful payment ${input.originalTransactionId}`,
        );
      }
      if (input.currency !== undefined && input.currency.toLowerCase() !== payment.currency) {
        throw new ValidationError([
          { path: '/currency', message: `the payment was in ${payment.currency}`, location: 'body' },
        ]);
      }
      // Money a dispute holds is no longer the provider's to give back.
      const refunded = (await refundedAmount(tx, payment.id)) + (await disputedAmount(tx, payment.id));
      const amount = input.refundAmount ?? payment.amount - refunded;
      if (amount <= 0 || refunded + amount > payment.amount) {
        throw new ConflictError(
          'refund_exceeds_payment',
          `At most ${Math.max(payment.amount - refunded, 0)} ${payment.currency} can still be refunded`,
          {
            refundable: Math.max(payment.amount - refunded, 0),
          },
        );
      }
      const id = newId(ID.refund);
      const outcome = this.processor.refund({
        processorPaymentIntent: payment.processor_payment_intent,
        amount,
        idempotencyKey: id,
      });
      await insertRefund(tx, {
        id,
        provider_id: auth.providerId,
        environment: auth.environment,
        payment_id: payment.id,
        amount,
        currency: payment.currency,
        reason: input.reason ?? null,
        metadata: input.metadata ?? {},
        status: outcome.status,
        processor_refund: outcome.processorRefund,
        failure_reason: outcome.failureReason ?? null,
        created_at: at,
      });
      if (outcome.status === 'succeeded') {
        await this.ledger.recordRefund(tx, auth, {
          id,
          paymentId: payment.id,
          customerId: payment.customer_id,
          amount,
          currency: payment.currency,
          at,
        });
      }
      const object = {
        id,
        amount,
        currency: payment.currency,
        processor_refund: outcome.processorRefund,
        reason: input.reason ?? null,
        created: unixSeconds(at),
      };
      await writeEvent(tx, { ...auth, type: 'payment.refund_pending', object, at });
      await writeEvent(tx, {
        ...auth,
        type: outcome.status === 'succeeded' ? 'payment.refunded' : 'payment.refund_failed',
        object:
          outcome.status === 'succeeded'
            ? object
            : { ...object, failure_reason: outcome.failureReason ?? 'failed' },
        at,
      });
      let purchase: PurchaseRow | undefined;
      if (
        outcome.status === 'succeeded' &&
        refunded + amount === payment.amount &&
        payment.purchase_id !== null
      ) {
        const current = await lockPurchase(tx, payment.purchase_id);
        if (
          current !== undefined &&
          ['active', 'past_due', 'cancelled', 'expired'].includes(current.status)
        ) {
          purchase = await this.purchases.apply(tx, auth, current, 'refunded', {
            ended_at: current.ended_at ?? at,
          });
        }
      }
      return {
        result: {
          id,
          originalTransactionId: payment.transaction_reference,
          refundAmount: amount,
          currency: payment.currency,
          status: outcome.status,
          reason: input.reason ?? null,
          createdAt: at.toISOString(),
        },
        purchase,
      };
    });
    if (purchase !== undefined) await this.purchases.publish([purchase]);
    return result;
  }
}

export function refundRoutes(refunds: RefundService) {
  return async (app: App) => {
    app.post(
      '/v1/ui/transactions/refunds',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags: ['payments'],
          summary:
            'Refund a payment in full or in part; a full refund of a purchase payment revokes the purchase',
          body: RefundCreate,
          response: { 202: Refund, 409: Problem, 422: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(202).send(await refunds.refund(authOf(request), request.body)),
    );
  };
}
