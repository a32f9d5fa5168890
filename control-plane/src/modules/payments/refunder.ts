import { createHash } from 'node:crypto';
import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { PoolClient, Queryable } from '../../db/pool';
import { ConflictError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { disputedAmount } from '../disputes/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { type Ledger, recordMovement } from '../ledger/service';
import type { Processors, RefundResult } from './processor';
import {
  findRefundByProcessorKey,
  insertRefund,
  lockRefundByProcessorId,
  type PaymentRow,
  type RefundRow,
  refundedAmount,
} from './repository';

export interface RefundRequest {
  /** Minor units; undefined: everything still refundable. */
  amount?: number | undefined;
  reason: string | null;
  metadata: Record<string, string>;
  source: RefundRow['source'];
  /**
   * What names this refund across retries, if anything does: the Idempotency-Key a refund
   * request came with, or for unused time the purchase whose period ended (proration.ts). The
   * processor is then asked with a key made of it and the payment, so a retry whose transaction
   * failed after the processor refunded (an error after the refund, the commit lost) gets that
   * same refund back rather than a second one. Without it each refund is one of its own, as at
   * Stripe.
   */
  retryKey?: string | null;
  /**
   * What the caller keeps of a refund the processor made (not one that failed at once), written
   * as soon as the processor answers and committed whatever the caller's transaction then does:
   * on the journal's own connections when the service has them, else in the transaction.
   */
  keep?: ((db: Queryable, made: RefundResult) => Promise<void>) | undefined;
  /** More for the processor to keep with the refund and send back in its events (the same on every retry). */
  tell?: Record<string, string> | undefined;
}

/** The processor's key for a refund asked with `retryKey` (bounded: Stripe takes up to 255 characters). */
const refundKeyOf = (paymentId: string, retryKey: string) =>
  `${paymentId}:${createHash('sha256').update(retryKey).digest('base64url')}`;

/**
 * Money going back to a customer through the processor, inside the caller's transaction (with
 * the payment row locked): the refund, its ledger movement and its events commit together, both
 * for a refund a provider asks for and for the unused time a plan switch returns.
 */
export class Refunder {
  constructor(
    private readonly clock: Clock,
    private readonly processors: Processors,
    private readonly ledger: Ledger,
    /** The charge journal's connections (see payments/journal.ts), for `RefundRequest.keep`. */
    private readonly own?: Queryable | undefined,
    private readonly logger?: Logger | undefined,
  ) {}

  /** What of a payment can still be refunded: neither refunded yet nor held by a dispute. */
  async refundable(tx: PoolClient, payment: PaymentRow): Promise<number> {
    const taken = (await refundedAmount(tx, payment.id)) + (await disputedAmount(tx, payment.id));
    return Math.max(payment.amount - taken, 0);
  }

  /**
   * Makes a refund of a locked, succeeded payment: the money leaves the balance at once, and
   * payment.refund_pending is written. 409 refund_exceeds_payment beyond what is refundable.
   * A refund the processor settles at once still needs `close`.
   */
  async open(
    tx: PoolClient,
    auth: AuthContext,
    payment: PaymentRow,
    request: RefundRequest,
  ): Promise<RefundRow> {
    const at = this.clock.now();
    const key =
      request.retryKey === undefined || request.retryKey === null
        ? undefined
        : refundKeyOf(payment.id, request.retryKey);
    // A retry whose refund is on the books (its first attempt committed, its stored answer since
    // gone, or the processor's event recorded it after the attempt failed): nothing is asked again.
    const recorded = key === undefined ? undefined : await findRefundByProcessorKey(tx, auth, key);
    if (recorded !== undefined) throw alreadyMade(recorded);
    const refundable = await this.refundable(tx, payment);
    const amount = request.amount ?? refundable;
    if (amount <= 0 || amount > refundable) {
      throw new ConflictError(
        'refund_exceeds_payment',
        `At most ${refundable} ${payment.currency} can still be refunded`,
        { refundable },
      );
    }
    const id = newId(ID.refund);
    const processor = await this.processors.named(auth, payment.processor, tx);
    const outcome = await processor.refund({
      processorPaymentIntent: payment.processor_payment_intent,
      amount,
      idempotencyKey: key ?? id,
      metadata: processorMetadata(payment, request, key),
    });
    if (request.keep !== undefined && outcome.status !== 'failed') await this.keep(tx, request.keep, outcome);
    // The processor answered a retry with a refund we hold under no key (recorded before keys
    // were kept): recording it again would count it twice.
    if (key !== undefined) {
      const held = await lockRefundByProcessorId(tx, auth, outcome.processorRefund);
      if (held !== undefined) throw alreadyMade(held);
    }
    return this.record(tx, auth, payment, { ...request, id, amount, at, processorKey: key ?? null }, outcome);
  }

  private async keep(tx: PoolClient, keep: NonNullable<RefundRequest['keep']>, made: RefundResult) {
    if (this.own === undefined) return keep(tx, made);
    try {
      await keep(this.own, made);
    } catch (error) {
      // A safety net for a failure after this point, not the refund's record: the refund goes on.
      this.logger?.error({ err: error, refund: made.processorRefund }, 'refund keep write failed');
    }
  }

  /**
   * A refund the processor made, on the books: its row, the money out of the balance (unless it
   * failed at once) and payment.refund_pending. `open` records the refunds it asks for; a refund
   * whose own transaction failed after the processor made it is recorded from the processor's
   * event (refunds.ts).
   */
  async record(
    tx: PoolClient,
    auth: AuthContext,
    payment: PaymentRow,
    request: Omit<RefundRequest, 'amount' | 'retryKey' | 'keep' | 'tell'> & {
      id: string;
      amount: number;
      at: Date;
      /** The key the processor was asked with, for a retried refund (`refund_key` in its metadata). */
      processorKey: string | null;
    },
    outcome: RefundResult,
  ): Promise<RefundRow> {
    const { id, amount, at } = request;
    const refund: RefundRow = {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      payment_id: payment.id,
      amount,
      currency: payment.currency,
      reason: request.reason,
      metadata: request.metadata,
      status: outcome.status,
      processor_refund: outcome.processorRefund,
      failure_reason: outcome.failureReason ?? null,
      created_at: at,
      settled_at: outcome.status === 'pending' ? null : at,
      source: request.source,
      processor_key: request.processorKey,
    };
    await insertRefund(tx, refund);
    // The money leaves the balance when the refund is made; a failure brings it back.
    if (outcome.status !== 'failed') {
      await this.ledger.recordRefund(tx, auth, {
        id,
        paymentId: payment.id,
        customerId: payment.customer_id,
        amount,
        currency: payment.currency,
        at,
      });
    }
    await writeEvent(tx, {
      ...auth,
      type: 'payment.refund_pending',
      object: refundObject(refund, payment),
      at,
    });
    return refund;
  }

  /**
   * A refund's outcome: payment.refunded, or payment.refund_failed with the money back in the
   * balance when it had left (`moneyLeft`).
   */
  async close(
    tx: PoolClient,
    auth: AuthContext,
    refund: RefundRow,
    payment: PaymentRow,
    moneyLeft: boolean,
  ): Promise<void> {
    const at = this.clock.now();
    if (refund.status === 'failed') {
      if (moneyLeft) {
        await recordMovement(tx, auth, {
          kind: 'refund_reversal',
          currency: refund.currency,
          customerId: payment.customer_id,
          paymentId: payment.id,
          sourceId: refund.id,
          description: `Refund ${refund.id} failed (${refund.failure_reason ?? 'failed'})`,
          at,
          moves: [
            ['processor_balance', refund.amount],
            ['refunds', -refund.amount],
          ],
        });
      }
      await writeEvent(tx, {
        ...auth,
        type: 'payment.refund_failed',
        object: { ...refundObject(refund, payment), failure_reason: refund.failure_reason ?? 'failed' },
        at,
      });
      return;
    }
    await writeEvent(tx, { ...auth, type: 'payment.refunded', object: refundObject(refund, payment), at });
  }
}

/**
 * What the processor keeps with a refund and sends back in its events: our payment, who asked
 * (a provider's request or a plan switch), the request's reason, and for a retried refund the
 * key it was asked with (so a refund recorded from its event is found by a retry). It is the same on every
 * retry of a request (Stripe refuses a key reused with other parameters), and it is what lets a
 * refund whose transaction failed after the processor made it be recorded from the event
 * (processors/events.ts). The reason is at most 500 characters (RefundCreate), Stripe's limit for
 * a metadata value.
 */
export function processorMetadata(
  payment: PaymentRow,
  request: Pick<RefundRequest, 'source' | 'reason' | 'tell'>,
  key: string | undefined,
): Record<string, string> {
  return {
    ...request.tell,
    payment: payment.id,
    refund_source: request.source,
    ...(request.reason === null ? {} : { refund_reason: request.reason }),
    ...(key === undefined ? {} : { refund_key: key }),
  };
}

/** 409 refund_already_made: the refund a retried request asked for is on the books. */
const alreadyMade = (refund: RefundRow) =>
  new ConflictError('refund_already_made', `This request's refund was made already: ${refund.id}`, {
    refund: refund.id,
  });

/**
 * payment.refund_pending, payment.refunded (spec 6.5); refund_failed adds failure_reason. The
 * customer refunded is named too, so the event is in that customer's events and mail.
 */
const refundObject = (r: RefundRow, payment: Pick<PaymentRow, 'customer_id'>) => ({
  id: r.id,
  amount: r.amount,
  currency: r.currency,
  processor_refund: r.processor_refund,
  reason: r.reason,
  payment: r.payment_id,
  customer: payment.customer_id,
  status: r.status,
  created: unixSeconds(r.created_at),
});
