import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import { Type } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import { type App, authOf } from '../../http/app';
import { errorResponses, Metadata, Problem, Timestamp } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { lockPurchase } from '../purchases/repository';
import type { PurchaseRow, PurchaseService } from '../purchases/service';
import type { Processors } from './processor';
import type { Refunder } from './refunder';
import {
  lockNextPendingRefund,
  lockPayment,
  lockRefundByProcessorId,
  type PaymentRow,
  type RefundRow,
  settleRefund,
  succeededRefunds,
} from './repository';

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
    private readonly processors: Processors,
    private readonly purchases: PurchaseService,
    private readonly refunder: Refunder,
    private readonly logger?: Logger | undefined,
  ) {}

  /** `retryKey`: the request's Idempotency-Key, if it came with one (refunder.ts). */
  async refund(auth: AuthContext, input: typeof RefundCreate.static, retryKey: string | null = null) {
    if (input.providerId !== undefined && input.providerId !== auth.providerId) {
      throw new ValidationError([
        { path: '/providerId', message: 'is not the provider of this API key', location: 'body' },
      ]);
    }
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
      // Money a dispute holds is no longer the provider's to give back (the refunder says so).
      const refund = await this.refunder.open(tx, auth, payment, {
        amount: input.refundAmount,
        reason: input.reason ?? null,
        metadata: input.metadata ?? {},
        source: 'request',
        // Apart from the keys the service makes itself (proration's), whatever the client sends.
        retryKey: retryKey === null ? null : `request:${retryKey}`,
      });
      const purchase =
        refund.status === 'pending' ? undefined : await this.finish(tx, auth, refund, payment, false);
      return {
        result: {
          id: refund.id,
          originalTransactionId: payment.transaction_reference,
          refundAmount: refund.amount,
          currency: payment.currency,
          status: refund.status,
          reason: refund.reason,
          createdAt: refund.created_at.toISOString(),
        },
        purchase,
      };
    });
    if (purchase !== undefined) await this.purchases.publish([purchase]);
    return result;
  }

  /**
   * Scheduler job: pending refunds learn their outcome from the processor, one at a time
   * (SKIP LOCKED, so replicas share the work): payment.refunded, or payment.refund_failed with
   * the money back in the balance. A refund whose processor cannot be asked (out of reach, the
   * provider's Stripe disconnected, the refund refused) is logged and left for the next pass;
   * the refunds after it go on.
   */
  async settleDue(): Promise<number> {
    let settled = 0;
    let after = '';
    for (;;) {
      const before = after;
      const done = await inTransaction(this.pool, async (tx) => {
        const refund = await lockNextPendingRefund(tx, after);
        if (refund === undefined) return undefined;
        after = refund.id;
        const auth: AuthContext = { providerId: refund.provider_id, environment: refund.environment };
        const payment = await lockPayment(tx, auth, refund.payment_id);
        if (payment === undefined) throw new Error(`refund ${refund.id} has no payment ${refund.payment_id}`);
        const processor = await this.processors.named(auth, payment.processor, tx);
        const { status, failureReason } = await processor.settleRefund(refund.processor_refund);
        if (status === 'pending') return { purchase: undefined, moved: false };
        return {
          purchase: await this.settle(tx, auth, refund, payment, { status, failureReason }),
          moved: true,
        };
      }).catch((error: unknown) => {
        // Nothing was taken (the next refund's lock failed, the database is away): the pass ends.
        if (after === before) throw error;
        this.logger?.warn({ err: error, refund: after }, 'pending refund not settled; next pass');
        return { purchase: undefined, moved: false };
      });
      if (done === undefined) return settled;
      if (done.moved) settled++;
      if (done.purchase !== undefined) await this.purchases.publish([done.purchase]);
    }
  }

  /**
   * A refund's outcome as the processor reports it in an event (Stripe's refund.updated),
   * inside the caller's transaction: a pending refund settles; one already settled, or an
   * outcome still pending, leaves it as it is. A refund we do not hold that the processor made
   * for a provider's request on our payment (`made`, from the refund's metadata) is recorded:
   * its request's transaction failed after the processor refunded, and the money has left.
   * Answers the purchase a full refund revoked, to publish after commit.
   */
  async settleFromProcessor(
    tx: PoolClient,
    auth: AuthContext,
    processorRefund: string,
    outcome: { status: 'pending' | 'succeeded' | 'failed'; failureReason?: string | undefined },
    made?: MadeRefund,
  ): Promise<{ found: boolean; purchase?: PurchaseRow | undefined }> {
    const { status, failureReason } = outcome;
    let refund = await lockRefundByProcessorId(tx, auth, processorRefund);
    let payment: PaymentRow | undefined;
    // A failed refund moved no money: its request's error said all there is.
    if (refund === undefined && made !== undefined && status !== 'failed') {
      payment = await lockPayment(tx, auth, made.paymentId);
      if (!madeOf(payment, made)) return { found: false };
      // With the payment locked, a request still making this refund has committed or failed.
      refund = await lockRefundByProcessorId(tx, auth, processorRefund);
      if (refund === undefined) return this.recordMade(tx, auth, payment, processorRefund, made, status);
    }
    if (refund === undefined) return { found: false };
    if (status === 'pending' || refund.status !== 'pending') return { found: true };
    payment ??= await lockPayment(tx, auth, refund.payment_id);
    if (payment === undefined) throw new Error(`refund ${refund.id} has no payment ${refund.payment_id}`);
    return { found: true, purchase: await this.settle(tx, auth, refund, payment, { status, failureReason }) };
  }

  /**
   * Records a refund the processor made for a request whose transaction then failed, as that
   * request would have: the refund, the money out of the balance, its events, and the
   * purchase revoked when it returns the whole payment. Beyond what is still refundable here
   * it is left to reconciliation (found: false), as any refund that does not add up.
   */
  private async recordMade(
    tx: PoolClient,
    auth: AuthContext,
    payment: PaymentRow,
    processorRefund: string,
    made: MadeRefund,
    status: 'pending' | 'succeeded',
  ): Promise<{ found: boolean; purchase?: PurchaseRow | undefined }> {
    if (made.amount > (await this.refunder.refundable(tx, payment))) return { found: false };
    const refund = await this.refunder.record(
      tx,
      auth,
      payment,
      {
        id: newId(ID.refund),
        amount: made.amount,
        at: this.clock.now(),
        reason: made.reason,
        metadata: {},
        source: 'request',
        processorKey: made.key,
      },
      { status, processorRefund },
    );
    const purchase =
      refund.status === 'pending' ? undefined : await this.finish(tx, auth, refund, payment, false);
    return { found: true, purchase };
  }

  private async settle(
    tx: PoolClient,
    auth: AuthContext,
    refund: RefundRow,
    payment: PaymentRow,
    outcome: { status: 'succeeded' | 'failed'; failureReason?: string | undefined },
  ): Promise<PurchaseRow | undefined> {
    const settledRefund = await settleRefund(tx, refund.id, {
      status: outcome.status,
      failureReason: outcome.failureReason ?? null,
      at: this.clock.now(),
    });
    return this.finish(tx, auth, settledRefund, payment, true);
  }

  /**
   * A refund's outcome: payment.refunded, and a purchase whose payment is now refunded in full is
   * revoked; or payment.refund_failed, and (when the money had left) it returns to the balance.
   */
  private async finish(
    tx: PoolClient,
    auth: AuthContext,
    refund: RefundRow,
    payment: PaymentRow,
    moneyLeft: boolean,
  ): Promise<PurchaseRow | undefined> {
    await this.refunder.close(tx, auth, refund, payment, moneyLeft);
    // Unused time returned at a plan switch belongs to a purchase that has already ended.
    if (refund.status === 'failed' || refund.source !== 'request') return undefined;
    if (payment.purchase_id === null || (await succeededRefunds(tx, payment.id)) !== payment.amount)
      return undefined;
    const current = await lockPurchase(tx, payment.purchase_id);
    if (current === undefined || !['active', 'past_due', 'cancelled', 'expired'].includes(current.status))
      return undefined;
    return this.purchases.apply(tx, auth, current, 'refunded', {
      ended_at: current.ended_at ?? this.clock.now(),
    });
  }
}

/**
 * A refund the processor made for a provider's request on our payment, as its metadata names it
 * (refunder.ts `processorMetadata`): read from the processor's event, in our vocabulary.
 */
export interface MadeRefund {
  paymentId: string;
  processorPaymentIntent: string;
  /** Minor units, positive. */
  amount: number;
  currency: string;
  reason: string | null;
  /** The key the request's refund was asked with, when it had one (`refund_key`). */
  key: string | null;
}

/** Whether `payment` is the succeeded payment the processor's refund returns money of. */
const madeOf = (payment: PaymentRow | undefined, made: MadeRefund): payment is PaymentRow =>
  payment !== undefined &&
  payment.status === 'succeeded' &&
  payment.processor_payment_intent === made.processorPaymentIntent &&
  payment.currency === made.currency.toLowerCase();

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
      async (request, reply) =>
        reply.status(202).send(await refunds.refund(authOf(request), request.body, request.idempotencyKey)),
    );
  };
}
