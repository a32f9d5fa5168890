import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, type Queryable } from '../../db/pool';
import { ConflictError, NotFoundError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { unixSeconds, writeEvent } from '../events/outbox';
import { recordMovement } from '../ledger/service';
import { lockPayment, type PaymentRow, refundedAmount } from '../payments/repository';
import {
  type DisputeRow,
  type DisputeStatus,
  disputedAmount,
  findDispute,
  findDisputeByProcessorId,
  insertDispute,
  listDisputes,
  moveDispute,
} from './repository';

export const toDispute = (r: DisputeRow) => ({
  id: r.id,
  paymentId: r.payment_id,
  customerRef: r.customer_id,
  amount: r.amount,
  currency: r.currency,
  reason: r.reason,
  status: r.status,
  evidence: r.evidence,
  processorDispute: r.processor_dispute,
  createdAt: r.created_at.toISOString(),
  closedAt: r.closed_at?.toISOString() ?? null,
});

/** payment.disputed and payment.dispute_closed (spec 6.5), plus the payment and customer. */
const eventObject = (r: DisputeRow, payment: Pick<PaymentRow, 'processor_payment_intent'>) => ({
  id: r.id,
  amount: r.amount,
  currency: r.currency,
  reason: r.reason,
  status: r.status,
  processor_dispute: r.processor_dispute,
  processor_charge: payment.processor_payment_intent,
  payment: r.payment_id,
  customer: r.customer_id,
  created: unixSeconds(r.created_at),
});

const OPEN: DisputeStatus[] = ['needs_response', 'under_review'];

/**
 * Disputes (chargebacks): the customer's bank withdraws a payment's money from the provider's
 * balance when a dispute opens, and returns it if the provider wins. needs_response → (evidence)
 * under_review → won or lost. Every move is a guarded UPDATE, so a repeated or concurrent close
 * moves money once.
 */
export class DisputeService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  /** Opens a dispute on a locked, succeeded payment, inside the caller's transaction. */
  async openInTx(
    tx: PoolClient,
    auth: AuthContext,
    payment: PaymentRow,
    input: {
      amount?: number | undefined;
      reason?: string | undefined;
      /** The processor's id for the dispute; the sandbox makes one up. */
      processorDispute?: string | undefined;
    },
  ): Promise<DisputeRow> {
    const at = this.clock.now();
    const open =
      payment.amount - (await refundedAmount(tx, payment.id)) - (await disputedAmount(tx, payment.id));
    const amount = input.amount ?? open;
    if (amount <= 0 || amount > open) {
      throw new ConflictError(
        'dispute_exceeds_payment',
        `At most ${Math.max(open, 0)} ${payment.currency} of this payment can be disputed`,
        { disputable: Math.max(open, 0) },
      );
    }
    const id = newId(ID.dispute);
    const row = await insertDispute(tx, {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      payment_id: payment.id,
      customer_id: payment.customer_id,
      amount,
      currency: payment.currency,
      reason: input.reason ?? 'fraudulent',
      status: 'needs_response',
      evidence: null,
      processor_dispute: input.processorDispute ?? `dp_sandbox_${id.slice(3)}`,
      created_at: at,
      updated_at: at,
      closed_at: null,
    });
    if (row === undefined)
      throw new ConflictError('dispute_exists', `Payment ${payment.id} already has an open dispute`);
    await recordMovement(tx, auth, {
      kind: 'dispute',
      currency: payment.currency,
      customerId: payment.customer_id,
      paymentId: payment.id,
      sourceId: id,
      description: `Dispute ${id} (${row.reason})`,
      at,
      moves: [
        ['disputes', amount],
        ['processor_balance', -amount],
      ],
    });
    await writeEvent(tx, { ...auth, type: 'payment.disputed', object: eventObject(row, payment), at });
    return row;
  }

  /** Sandbox: the customer's bank disputes a payment (by payment id or transaction reference). */
  async open(
    auth: AuthContext,
    input: { transactionId: string; amount?: number | undefined; reason?: string | undefined },
  ) {
    return toDispute(
      await inTransaction(this.pool, async (tx) => {
        const payment = await lockPayment(tx, auth, input.transactionId);
        if (payment === undefined || payment.status !== 'succeeded')
          throw new NotFoundError('transaction_not_found', `No successful payment ${input.transactionId}`);
        return this.openInTx(tx, auth, payment, input);
      }),
    );
  }

  /** The provider answers with evidence: needs_response → under_review. */
  async submitEvidence(auth: AuthContext, id: string, evidence: string) {
    const at = this.clock.now();
    const moved = await moveDispute(this.pool, auth, id, ['needs_response'], {
      status: 'under_review',
      evidence,
      at,
    });
    if (moved !== undefined) return toDispute(moved);
    const row = await this.mustFind(auth, id);
    throw new ConflictError(
      'dispute_closed',
      `Dispute ${id} is ${row.status}; evidence goes with needs_response only`,
    );
  }

  /** Sandbox: the bank decides. Won returns the money to the balance. */
  async close(auth: AuthContext, id: string, outcome: 'won' | 'lost') {
    return toDispute(
      await inTransaction(this.pool, async (tx) => {
        const row = await this.closeInTx(tx, auth, id, outcome);
        if (row === undefined) {
          const current = await this.mustFind(auth, id, tx);
          throw new ConflictError('dispute_closed', `Dispute ${id} is already ${current.status}`);
        }
        return row;
      }),
    );
  }

  /**
   * Decides an open dispute inside the caller's transaction; undefined when it was not open (a
   * repeated or concurrent close moves money once). Won returns the money to the balance.
   */
  async closeInTx(
    tx: PoolClient,
    auth: AuthContext,
    id: string,
    outcome: 'won' | 'lost',
  ): Promise<DisputeRow | undefined> {
    const at = this.clock.now();
    const row = await moveDispute(tx, auth, id, OPEN, { status: outcome, at });
    if (row === undefined) return undefined;
    const payment = await lockPayment(tx, auth, row.payment_id);
    if (payment === undefined) throw new Error(`dispute ${id} has no payment ${row.payment_id}`);
    if (outcome === 'won') {
      await recordMovement(tx, auth, {
        kind: 'dispute_reversal',
        currency: row.currency,
        customerId: row.customer_id,
        paymentId: row.payment_id,
        sourceId: row.id,
        description: `Dispute ${row.id} won`,
        at,
        moves: [
          ['processor_balance', row.amount],
          ['disputes', -row.amount],
        ],
      });
    }
    await writeEvent(tx, { ...auth, type: 'payment.dispute_closed', object: eventObject(row, payment), at });
    return row;
  }

  /** The processor moved an open dispute to under review (evidence was submitted there). */
  async reviewInTx(tx: PoolClient, auth: AuthContext, id: string): Promise<void> {
    await moveDispute(tx, auth, id, ['needs_response'], { status: 'under_review', at: this.clock.now() });
  }

  /** A dispute by the processor's id for it. */
  findByProcessorId(tx: PoolClient, auth: AuthContext, processorDispute: string) {
    return findDisputeByProcessorId(tx, auth, processorDispute);
  }

  async get(auth: AuthContext, id: string) {
    return toDispute(await this.mustFind(auth, id));
  }

  async list(
    auth: AuthContext,
    query: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ) {
    const rows = await listDisputes(this.pool, auth, {
      after: decodeCursor(query.cursor) ?? null,
      status: query.status ?? null,
      limit: query.limit + 1,
    });
    return toPage(rows, query.limit, toDispute);
  }

  /** `db` is the caller's transaction when there is one: never a second pooled connection. */
  private async mustFind(auth: AuthContext, id: string, db: Queryable = this.pool): Promise<DisputeRow> {
    const row = await findDispute(db, auth, id);
    if (row === undefined) throw new NotFoundError('dispute_not_found', `No dispute ${id}`);
    return row;
  }
}
