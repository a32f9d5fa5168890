import type { Logger } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, type Queryable } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import {
  dueCharges,
  insertProcessorCharge,
  intentRecorded,
  learnProcessorCharge,
  lockAttemptCharges,
  lockCharge,
  markChargeRecorded,
  type ProcessorChargeRow,
  setChargeStatus,
} from './journal-repository';
import type { Processors } from './processor';

/** How long an unrecorded charge waits for a retry of its attempt to record it before its refund. */
export const UNRECORDED_GRACE_MS = 60 * 60 * 1000;
/** Charges one scheduler pass acts on at most. */
const PASS_LIMIT = 50;

/** A succeeded charge as the processor's event tells it, with the ids our charge gave it. */
export interface LearnedCharge {
  key: string;
  attemptKey: string;
  customerId: string;
  paymentId: string;
  processor: string;
  processorPaymentIntent: string;
  amount: number;
  currency: string;
  metadata: Record<string, string> | null;
}

/**
 * The key an attempt's charge is made with, and whether the journal already holds a charge of
 * it; for an unrecorded one, what it was asked with, for the retry to ask the same.
 */
export interface ChargeKey {
  key: string;
  journaled: boolean;
  asked?: { paymentId: string; metadata: Record<string, string> | null } | undefined;
}

/**
 * The charge journal (migration 051): a charge is made inside the caller's transaction, which
 * records it as a payment; when that transaction rolls back after the processor took the money
 * (an error after the charge, the commit failing), the payment row goes with it and the
 * processor keeps the charge. So every succeeded charge is also written here at once on
 * connections of the journal's own, committed whatever the caller's transaction does, and the
 * payment marks it recorded inside that transaction.
 *
 * What stays unrecorded is settled two ways. A retry of the same attempt (the scheduler's next
 * pass, the payer submitting again) is made with the same idempotency key, which the processor
 * answers with the same charge, and its payment records it. Past an hour with none, the
 * scheduler refunds it at the processor, and the attempt's next charge is made with a new key (a
 * generation after the refunded one), so the processor never answers it with the refunded charge.
 *
 * The journal's pool is its own (two connections), asked while a payment connection is held: its
 * one statement, an insert of a new key, waits on no transaction: no row has the key yet, and
 * its references to the provider and the customer take key-share locks, which the customer's
 * lock (FOR NO KEY UPDATE) and every update of those rows leave free. No holder waits on another.
 * Without one (test fixtures, benches), the row is written in the caller's transaction.
 */
export class ChargeJournal {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly processors: Processors,
    private readonly logger: Logger | undefined,
    private readonly own: Queryable | undefined,
  ) {}

  /**
   * The key to charge attempt `attemptKey` for `charge` with: a recorded charge's (the attempt is
   * paid, and its payment refuses a second), else an unrecorded charge's of the same amount and
   * currency (the processor answers it with that charge, asked with the same payment id and
   * metadata: Stripe answers a reused key only when the parameters match), else the attempt's
   * own, or after other charges of it the next generation. An unrecorded charge of another amount
   * (the attempt's invoice came out otherwise this time) is not this one: the scheduler refunds
   * it past the grace. Locks the attempt's journal rows until the caller's transaction ends, so
   * the scheduler's refund of an unrecorded one waits for this payment, or this payment for the
   * refund.
   */
  async keyFor(
    tx: PoolClient,
    auth: AuthContext,
    attemptKey: string,
    charge: { amount: number; currency: string },
  ): Promise<ChargeKey> {
    const rows = await lockAttemptCharges(tx, auth, attemptKey);
    const recorded = rows.find((r) => r.status === 'recorded');
    if (recorded !== undefined) return { key: recorded.idempotency_key, journaled: true };
    const same = rows.find(
      (r) => r.status === 'unrecorded' && r.amount === charge.amount && r.currency === charge.currency,
    );
    if (same !== undefined)
      return {
        key: same.idempotency_key,
        journaled: true,
        asked: { paymentId: same.payment_id, metadata: same.metadata },
      };
    return { key: rows.length === 0 ? attemptKey : `${attemptKey}:g${rows.length}`, journaled: false };
  }

  /**
   * Writes a succeeded charge (committed at once on the journal's connections). The journal is
   * the charge's safety net, not its record: should the write fail, the payment goes on and is
   * recorded as before, and the failure is logged with the charge.
   */
  async write(
    tx: PoolClient,
    charge: Omit<ProcessorChargeRow, 'status' | 'processor_refund' | 'failure_reason' | 'updated_at'>,
  ): Promise<void> {
    const row = { ...charge, status: 'unrecorded' as const, processor_refund: null, failure_reason: null };
    if (this.own === undefined) return insertProcessorCharge(tx, { ...row, updated_at: charge.created_at });
    try {
      await insertProcessorCharge(this.own, { ...row, updated_at: charge.created_at });
    } catch (error) {
      this.logger?.error(
        { err: error, key: charge.idempotency_key, intent: charge.processor_payment_intent },
        'charge journal write failed; the payment is recorded without it',
      );
    }
  }

  /**
   * A succeeded charge the processor announced (its event) that no payment records: its event
   * came before the payment's transaction committed, or the process that made the charge died
   * between the processor's answer and the journal's write, the one gap `write` leaves. Written
   * unrecorded in the caller's transaction unless the journal holds its key already, and then
   * settled as any other: a retry of its attempt records it, or past the grace (counted from now,
   * when the journal learns of it) the scheduler refunds it. Answers whether the journal holds
   * this charge: false when its customer is not the provider's, or its key is another charge's.
   */
  async learn(tx: PoolClient, auth: AuthContext, charge: LearnedCharge): Promise<boolean> {
    const held = await learnProcessorCharge(tx, {
      provider_id: auth.providerId,
      environment: auth.environment,
      idempotency_key: charge.key,
      attempt_key: charge.attemptKey,
      customer_id: charge.customerId,
      payment_id: charge.paymentId,
      processor: charge.processor,
      processor_payment_intent: charge.processorPaymentIntent,
      amount: charge.amount,
      currency: charge.currency,
      metadata: charge.metadata,
      created_at: this.clock.now(),
    });
    return held === charge.processorPaymentIntent;
  }

  /** The charge recorded by payment `paymentId`, in the payment's transaction. */
  async recorded(tx: PoolClient, auth: AuthContext, key: string, paymentId: string): Promise<void> {
    await markChargeRecorded(tx, auth, key, paymentId, this.clock.now());
  }

  /**
   * A scheduler pass: refunds charges unrecorded for longer than the grace, and settles refunds
   * under way. Each charge in a transaction of its own, skipped while a payment of its attempt
   * holds it. Answers how many it acted on.
   */
  async runDue(): Promise<number> {
    const due = await dueCharges(
      this.pool,
      new Date(this.clock.now().getTime() - UNRECORDED_GRACE_MS),
      PASS_LIMIT,
    );
    let acted = 0;
    for (const each of due) {
      const scope = { providerId: each.provider_id, environment: each.environment };
      try {
        if (await inTransaction(this.pool, (tx) => this.settle(tx, scope, each.idempotency_key))) acted++;
      } catch (error) {
        this.logger?.warn(
          { err: error, key: each.idempotency_key },
          'unrecorded charge not settled; next pass',
        );
      }
    }
    return acted;
  }

  private async settle(tx: PoolClient, auth: AuthContext, key: string): Promise<boolean> {
    const row = await lockCharge(tx, auth, key);
    if (row === undefined) return false;
    const at = this.clock.now();
    const processor = await this.processors.named(auth, row.processor, tx);
    if (row.status === 'unrecorded') {
      if (await intentRecorded(tx, auth, row.processor_payment_intent)) {
        await setChargeStatus(
          tx,
          auth,
          key,
          { status: 'recorded', processor_refund: null, failure_reason: null },
          at,
        );
        return true;
      }
      const refund = await processor.refund({
        processorPaymentIntent: row.processor_payment_intent,
        amount: row.amount,
        idempotencyKey: `unrecorded:${key}`,
        // No payment of ours: its events stay unmatched, which only the journal expects.
        metadata: { charge_key: key },
      });
      const status =
        refund.status === 'pending'
          ? 'refunding'
          : refund.status === 'succeeded'
            ? 'refunded'
            : 'refund_failed';
      await this.settled(tx, row, status, refund.processorRefund, refund.failureReason ?? null, at);
      return true;
    }
    if (row.status !== 'refunding' || row.processor_refund === null) return false;
    const settled = await processor.settleRefund(row.processor_refund);
    if (settled.status === 'pending') return false;
    const status = settled.status === 'succeeded' ? 'refunded' : 'refund_failed';
    await this.settled(tx, row, status, row.processor_refund, settled.failureReason ?? null, at);
    return true;
  }

  private async settled(
    tx: PoolClient,
    row: ProcessorChargeRow,
    status: ProcessorChargeRow['status'],
    processorRefund: string,
    failureReason: string | null,
    at: Date,
  ): Promise<void> {
    const scope = { providerId: row.provider_id, environment: row.environment };
    await setChargeStatus(
      tx,
      scope,
      row.idempotency_key,
      { status, processor_refund: processorRefund, failure_reason: failureReason },
      at,
    );
    const fields = {
      provider: row.provider_id,
      environment: row.environment,
      customer: row.customer_id,
      key: row.idempotency_key,
      intent: row.processor_payment_intent,
      amount: row.amount,
      currency: row.currency,
      refund: processorRefund,
    };
    if (status === 'refund_failed')
      this.logger?.error(
        { ...fields, failureReason },
        'refund of an unrecorded charge failed: settle it at the processor',
      );
    else this.logger?.warn({ ...fields, status }, 'unrecorded charge refunded at the processor');
  }
}
