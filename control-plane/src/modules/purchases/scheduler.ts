import type { Logger } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { PaymentService } from '../payments/service';
import { findPlan, settingsOf } from '../plans/repository';
import type { AuthContext } from '../providers/service';
import { addDays, periodEnd } from './periods';
import { lockNextDuePurchase } from './repository';
import type { PurchaseRow, PurchaseService } from './service';

export interface SchedulerOptions {
  /** Hours after each failed charge before the next try; when they run out, the purchase is cancelled. */
  dunningRetryHours: readonly number[];
  trialReminderDays: number;
  renewalReminderDays: number;
  logger: Logger;
}

const HOUR_MS = 3_600_000;

/**
 * The billing clock's work: period ends (renew, cancel as scheduled, or expire), dunning retries,
 * trial ends (convert or suspend), one-time access expiry and reminders. It takes one due
 * purchase at a time with FOR UPDATE SKIP LOCKED, so any number of control-plane replicas can
 * run it together: a purchase is handled by one of them, and the move leaves it no longer due.
 * Charges are also unique per (purchase, period, attempt) in the database.
 */
export class BillingScheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly purchases: PurchaseService,
    private readonly payments: PaymentService,
    private readonly options: SchedulerOptions,
  ) {}

  /** Handles everything due now; bounded per call so one run cannot take forever. */
  runDue(limit = 1000): Promise<number> {
    this.running ??= this.run(limit).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private readonly jobs: Array<() => Promise<number>> = [];

  /** Another piece of time-driven work run with every pass (checkout expiry). */
  addJob(job: () => Promise<number>): void {
    this.jobs.push(job);
  }

  private async run(limit: number): Promise<number> {
    let handled = 0;
    for (const job of this.jobs) handled += await job();
    while (handled < limit) {
      const changed = await this.handleOne();
      if (changed === undefined) break;
      handled++;
      await this.purchases.publish([changed]);
    }
    return handled;
  }

  start(intervalMs: number): void {
    this.timer = setInterval(() => {
      this.runDue().catch((error: unknown) =>
        this.options.logger.error({ err: error }, 'billing scheduler run failed'),
      );
    }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.running;
  }

  private async handleOne(): Promise<PurchaseRow | undefined> {
    const now = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const row = await lockNextDuePurchase(tx, {
        now,
        trialReminderBy: addDays(now, this.options.trialReminderDays),
        renewalReminderBy: addDays(now, this.options.renewalReminderDays),
      });
      return row === undefined ? undefined : this.handle(tx, row, now);
    });
  }

  private async handle(tx: PoolClient, row: PurchaseRow, now: Date): Promise<PurchaseRow> {
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const plan = await findPlan(tx, auth, row.plan_id);
    if (plan === undefined) throw new Error(`purchase ${row.id} has no plan ${row.plan_id}`);
    const settings = settingsOf(plan);
    const nextEnd = (start: Date) => periodEnd(start, settings, row.anchor_day);
    const charge = (
      amount: number,
      reason: 'renewal' | 'dunning_retry' | 'trial_conversion',
      periodKey: Date,
      attempt: number,
    ) =>
      amount === 0
        ? Promise.resolve({ status: 'succeeded' as const })
        : this.payments.charge(tx, auth, {
            customerId: row.customer_id,
            purchaseId: row.id,
            productId: row.product_id,
            planId: row.plan_id,
            amount,
            currency: row.currency,
            reason,
            periodKey: periodKey.toISOString(),
            attempt,
          });
    // A new period starts the usage counters from zero: usage.reset, in the renewal's transaction.
    const renew = async (fields: Partial<PurchaseRow>) => {
      const renewed = await this.purchases.apply(tx, auth, row, 'renewed', fields);
      await writeEvent(tx, {
        ...auth,
        type: 'usage.reset',
        object: {
          purchase: row.id,
          customer: row.customer_id,
          product: row.product_id,
          plan: row.plan_id,
          previousPeriodStart: unixSeconds(row.period_start),
          periodStart: unixSeconds(renewed.period_start),
          periodEnd: renewed.period_end === null ? null : unixSeconds(renewed.period_end),
          created: unixSeconds(now),
        },
        at: now,
      });
      return renewed;
    };
    const retryAt = (index: number) => {
      const hours = this.options.dunningRetryHours[index];
      return hours === undefined ? null : new Date(now.getTime() + hours * HOUR_MS);
    };

    if (row.status === 'trialing' && row.trial_end !== null) {
      if (row.trial_end > now)
        return this.purchases.apply(tx, auth, row, 'trial_ending_soon', { trial_reminder_sent: true });
      if (row.cancel_at_period_end)
        return this.purchases.apply(tx, auth, row, 'period_ended_cancelled', { ended_at: row.trial_end });
      const paid = await charge(row.amount + row.setup_fee_due, 'trial_conversion', row.trial_end, 0);
      if (paid.status === 'failed') return this.purchases.apply(tx, auth, row, 'trial_ended_unpaid');
      return this.purchases.apply(tx, auth, row, 'trial_converted', {
        period_start: row.trial_end,
        period_end: nextEnd(row.trial_end),
        setup_fee_due: 0,
      });
    }

    if (row.status === 'past_due' && row.period_end !== null) {
      const attempt = row.retry_count + 1;
      const paid = await charge(row.amount, 'dunning_retry', row.period_end, attempt);
      if (paid.status === 'succeeded') {
        return renew({
          period_start: row.period_end,
          period_end: nextEnd(row.period_end),
          retry_count: 0,
          next_retry_at: null,
        });
      }
      const next = retryAt(attempt);
      if (next === null) {
        return this.purchases.apply(tx, auth, row, 'dunning_exhausted', {
          retry_count: attempt,
          next_retry_at: null,
          ended_at: now,
        });
      }
      return this.purchases.apply(tx, auth, row, 'dunning_retry_failed', {
        retry_count: attempt,
        next_retry_at: next,
      });
    }

    if (row.status === 'active' && row.period_end !== null) {
      if (row.period_end > now) {
        return this.purchases.apply(tx, auth, row, 'renewal_reminder', {
          renewal_reminder_for: row.period_end,
        });
      }
      if (!row.is_recurring)
        return this.purchases.apply(tx, auth, row, 'expire', { ended_at: row.period_end });
      if (row.cancel_at_period_end)
        return this.purchases.apply(tx, auth, row, 'period_ended_cancelled', { ended_at: row.period_end });
      if (!row.auto_renew) return this.purchases.apply(tx, auth, row, 'expire', { ended_at: row.period_end });
      const paid = await charge(row.amount, 'renewal', row.period_end, 0);
      if (paid.status === 'succeeded') {
        return renew({ period_start: row.period_end, period_end: nextEnd(row.period_end) });
      }
      return this.purchases.apply(
        tx,
        auth,
        row,
        'renewal_failed',
        { retry_count: 0, next_retry_at: retryAt(0) },
        { status: 'active' },
      );
    }
    throw new Error(`purchase ${row.id} was selected as due but matches no rule`);
  }
}
