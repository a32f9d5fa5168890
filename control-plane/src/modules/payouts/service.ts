import type { Logger } from '@mcp-meter/contracts/kit';
import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, NotFoundError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { unixSeconds, writeEvent } from '../events/outbox';
import { positiveBalances, processorBalance } from '../ledger/repository';
import { recordMovement } from '../ledger/service';
import {
  findPayout,
  insertPayout,
  listPayouts,
  lockBalance,
  lockNextArrived,
  lockPayoutByProcessorId,
  type PayoutRow,
  settlePayout,
} from './repository';

export interface PayoutSettings {
  /** daily: every day's balance; weekly: on Mondays; manual: only when asked (sandbox). */
  schedule: 'daily' | 'weekly' | 'manual';
  /** Days from a payout's creation to its arrival at the bank. */
  delayDays: number;
}

const DAY_MS = 86_400_000;

export const toPayout = (r: PayoutRow) => ({
  id: r.id,
  amount: r.amount,
  currency: r.currency,
  status: r.status,
  arrivalDate: r.arrival_date.toISOString(),
  failureReason: r.failure_reason,
  processorPayout: r.processor_payout,
  automatic: r.scheduled_for !== null,
  createdAt: r.created_at.toISOString(),
});

/** payout.paid and payout.failed (spec 6.5). */
const eventObject = (r: PayoutRow) => ({
  id: r.id,
  amount: r.amount,
  currency: r.currency,
  status: r.status,
  processor_payout: r.processor_payout,
  arrival_date: unixSeconds(r.arrival_date),
  created: unixSeconds(r.created_at),
  ...(r.failure_reason === null ? {} : { failure_reason: r.failure_reason }),
});

/**
 * Payouts: a provider's processor balance sent to its bank. The balance leaves the ledger when
 * the payout is made (`bank` +, `processor_balance` −) and comes back if it fails. Scheduled
 * payouts are unique per balance and day, and every payout of a balance is made under a lock on
 * it, so replicas and retries never pay out the same money twice.
 */
export class PayoutService {
  private lastScheduledDay: string | undefined;
  /** Balances whose processor pays them out on its own schedule (a connected Stripe account). */
  private paidOutByProcessor: (auth: AuthContext) => Promise<boolean> = async () => false;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly settings: PayoutSettings,
    private readonly logger: Logger,
  ) {}

  /** Leaves the balances `test` accepts to their processor's own payouts (reported by its events). */
  leaveToProcessor(test: (auth: AuthContext) => Promise<boolean>): void {
    this.paidOutByProcessor = test;
  }

  /**
   * Scheduler job: the day's automatic payouts, once per day per process (the index makes it once
   * overall). A balance whose payout fails is logged and passed over, so one provider's trouble
   * holds up no other's payout; the day is done only when every balance was paid out (or had
   * nothing to pay), so the next pass tries the failed ones again.
   */
  async payOutDue(): Promise<number> {
    const now = this.clock.now();
    const day = now.toISOString().slice(0, 10);
    if (this.settings.schedule === 'manual' || this.lastScheduledDay === day) return 0;
    if (this.settings.schedule === 'weekly' && now.getUTCDay() !== 1) return 0;
    let made = 0;
    let failed = 0;
    for (const balance of await positiveBalances(this.pool)) {
      const auth: AuthContext = { providerId: balance.provider_id, environment: balance.environment };
      try {
        if (await this.paidOutByProcessor(auth)) continue;
        const payout = await inTransaction(this.pool, (tx) =>
          this.make(tx, auth, {
            currency: balance.currency,
            amount: undefined,
            scheduledFor: day,
            failure: null,
          }),
        );
        if (payout !== undefined) made++;
      } catch (error) {
        // Spent since it was listed: nothing to pay out.
        if (error instanceof ConflictError) continue;
        failed++;
        this.logger.warn(
          {
            err: error,
            provider: auth.providerId,
            environment: auth.environment,
            currency: balance.currency,
          },
          'payout not made in this pass',
        );
      }
    }
    if (failed === 0) this.lastScheduledDay = day;
    return made;
  }

  /** Scheduler job: payouts that have arrived are paid (or, in sandbox when asked, fail and return). */
  async settleDue(): Promise<number> {
    let settled = 0;
    for (;;) {
      const done = await inTransaction(this.pool, async (tx) => {
        const at = this.clock.now();
        const row = await lockNextArrived(tx, at);
        if (row === undefined) return false;
        const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
        const failed = row.sandbox_failure !== null;
        await this.settle(tx, auth, row, {
          status: failed ? 'failed' : 'paid',
          failureReason: row.sandbox_failure,
        });
        return true;
      });
      if (!done) return settled;
      settled++;
    }
  }

  /**
   * A payout the processor made on its own schedule, as its events report it (Stripe's
   * payout.created, payout.paid, payout.failed; any order, any repeat), inside the caller's
   * transaction. The first report records it with the balance leaving for the bank; paid writes
   * payout.paid; failed brings the money back and writes payout.failed. A settled payout stays.
   */
  async recordFromProcessor(
    tx: PoolClient,
    auth: AuthContext,
    report: {
      processorPayout: string;
      amount: number;
      currency: string;
      arrivalDate: Date;
      status: 'pending' | 'paid' | 'failed';
      failureReason: string | null;
    },
  ): Promise<PayoutRow> {
    const currency = report.currency.toLowerCase();
    await lockBalance(tx, auth, currency);
    const at = this.clock.now();
    let row = await lockPayoutByProcessorId(tx, auth, report.processorPayout);
    if (row === undefined) {
      const id = newId(ID.payout);
      row = await insertPayout(tx, {
        id,
        provider_id: auth.providerId,
        environment: auth.environment,
        amount: report.amount,
        currency,
        status: 'pending',
        scheduled_for: null,
        arrival_date: report.arrivalDate,
        failure_reason: null,
        processor_payout: report.processorPayout,
        sandbox_failure: null,
        created_at: at,
        updated_at: at,
      });
      if (row === undefined) throw new Error(`payout ${report.processorPayout} was not stored`);
      await recordMovement(tx, auth, {
        kind: 'payout',
        currency,
        customerId: null,
        paymentId: null,
        sourceId: id,
        description: `Payout ${id} (${report.processorPayout})`,
        at,
        moves: [
          ['bank', report.amount],
          ['processor_balance', -report.amount],
        ],
      });
    }
    if (row.status !== 'pending' || report.status === 'pending') return row;
    return this.settle(tx, auth, row, {
      status: report.status,
      failureReason: report.status === 'failed' ? (report.failureReason ?? 'failed') : null,
    });
  }

  /**
   * A pending payout's outcome, inside the caller's transaction: paid (payout.paid), or failed
   * with the money back in the balance (payout_reversal, payout.failed).
   */
  private async settle(
    tx: PoolClient,
    auth: AuthContext,
    row: PayoutRow,
    outcome: { status: 'paid' | 'failed'; failureReason: string | null },
  ): Promise<PayoutRow> {
    const at = this.clock.now();
    const settled = await settlePayout(tx, row.id, { ...outcome, at });
    if (outcome.status === 'failed') {
      await recordMovement(tx, auth, {
        kind: 'payout_reversal',
        currency: row.currency,
        customerId: null,
        paymentId: null,
        sourceId: row.id,
        description: `Payout ${row.id} failed (${outcome.failureReason})`,
        at,
        moves: [
          ['processor_balance', row.amount],
          ['bank', -row.amount],
        ],
      });
    }
    await writeEvent(tx, {
      ...auth,
      type: outcome.status === 'failed' ? 'payout.failed' : 'payout.paid',
      object: eventObject(settled),
      at,
    });
    return settled;
  }

  /** Sandbox: a payout now, of `amount` (default the whole balance); `failure` makes it fail on arrival. */
  async create(
    auth: AuthContext,
    input: { amount?: number | undefined; currency?: string | undefined; failure?: string | undefined },
  ) {
    const row = await inTransaction(this.pool, (tx) =>
      this.make(tx, auth, {
        currency: (input.currency ?? 'usd').toLowerCase(),
        amount: input.amount,
        scheduledFor: null,
        failure: input.failure ?? null,
      }),
    );
    if (row === undefined) throw new Error('a payout on request is never a duplicate');
    return toPayout(row);
  }

  private async make(
    tx: PoolClient,
    auth: AuthContext,
    input: {
      currency: string;
      amount: number | undefined;
      scheduledFor: string | null;
      failure: string | null;
    },
  ): Promise<PayoutRow | undefined> {
    await lockBalance(tx, auth, input.currency);
    const balance = await processorBalance(tx, auth, input.currency);
    const amount = input.amount ?? balance;
    if (amount <= 0 || amount > balance) {
      throw new ConflictError(
        'insufficient_balance',
        `The ${input.currency} balance is ${balance}; a payout needs more than 0 and at most that`,
        { balance },
      );
    }
    const at = this.clock.now();
    const id = newId(ID.payout);
    const row = await insertPayout(tx, {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      amount,
      currency: input.currency,
      status: 'pending',
      scheduled_for: input.scheduledFor,
      arrival_date: new Date(at.getTime() + this.settings.delayDays * DAY_MS),
      failure_reason: null,
      processor_payout: `po_sandbox_${id.slice(3)}`,
      sandbox_failure: input.failure,
      created_at: at,
      updated_at: at,
    });
    if (row === undefined) return undefined;
    await recordMovement(tx, auth, {
      kind: 'payout',
      currency: input.currency,
      customerId: null,
      paymentId: null,
      sourceId: id,
      description: `Payout ${id}`,
      at,
      moves: [
        ['bank', amount],
        ['processor_balance', -amount],
      ],
    });
    this.logger.info(
      { payout: id, provider: auth.providerId, amount, currency: input.currency },
      'payout made',
    );
    return row;
  }

  async get(auth: AuthContext, id: string) {
    const row = await findPayout(this.pool, auth, id);
    if (row === undefined) throw new NotFoundError('payout_not_found', `No payout ${id}`);
    return toPayout(row);
  }

  async list(
    auth: AuthContext,
    query: { limit: number; cursor?: string | undefined; status?: string | undefined },
  ) {
    const rows = await listPayouts(this.pool, auth, {
      after: decodeCursor(query.cursor) ?? null,
      status: query.status ?? null,
      limit: query.limit + 1,
    });
    return toPage(rows, query.limit, toPayout);
  }
}
