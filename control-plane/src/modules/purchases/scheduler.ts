import type { Logger } from '@mcp-meter/contracts/kit';
import type { UsageSettlement } from '@mcp-meter/contracts/usage';
import type { Clock } from '../../clock';
import type { Pool, PoolClient } from '../../db/pool';
import { ConflictError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import {
  baseLine,
  type Collection,
  type InvoiceDraft,
  type Invoicing,
  rolloverAfter,
  setupFeeLine,
} from '../billing/invoicing';
import { type InvoiceRow, lastUsageInvoice } from '../billing/repository';
import type { PaymentService } from '../payments/service';
import { findPlan, settingsOf } from '../plans/repository';
import { paymentFailed } from './cancellation';
import { refreshDrafts } from './draft-refresh';
import { eachDue, type Took } from './due-pass';
import { InvoiceDunning } from './dunning';
import { endingMove, final, writeUsageReset } from './period-close';
import { addDays, endsMidPeriod, periodEnd } from './periods';
import { clearFinalUsageDue, lockNextDuePurchase, usagePeriodsDue } from './repository';
import type { PurchaseRow, PurchaseService } from './service';

export interface SchedulerOptions {
  /** Hours after each failed charge before the next try; when they run out, the purchase is cancelled. */
  dunningRetryHours: readonly number[];
  trialReminderDays: number;
  renewalReminderDays: number;
  /**
   * How long after a usage-billed period ends its records may still be on their way (a proxy's
   * buffer or spool); the period closes only after this, and after the usage bus is settled.
   */
  usageLatenessMs: number;
  /** How long one pass waits for the usage bus to settle before leaving usage periods for the next. */
  settleTimeoutMs: number;
  logger: Logger;
}

const HOUR_MS = 3_600_000;

/**
 * The billing clock's work: period ends (renew, cancel as scheduled, or expire), dunning retries,
 * trial ends (convert or suspend), one-time access expiry and reminders. It takes one due
 * purchase at a time with FOR NO KEY UPDATE SKIP LOCKED, so any number of control-plane replicas can
 * run it together: a purchase is handled by one of them, and the move leaves it no longer due.
 * Charges are also unique per (purchase, period, attempt) in the database.
 */
export class BillingScheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private readonly dunning: InvoiceDunning;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly purchases: PurchaseService,
    readonly payments: PaymentService,
    private readonly invoicing: Invoicing,
    private readonly settlement: UsageSettlement,
    private readonly options: SchedulerOptions,
  ) {
    this.dunning = new InvoiceDunning(
      pool,
      clock,
      payments,
      invoicing,
      options.dunningRetryHours,
      options.logger,
    );
  }

  /** Handles everything due now; bounded per call so one run cannot take forever. */
  runDue(limit = 1000): Promise<number> {
    this.running ??= this.run(limit).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private readonly jobs: Array<() => Promise<number>> = [];
  private readonly lateJobs: Array<() => Promise<number>> = [];

  /**
   * Another piece of time-driven work run with every pass (checkout expiry): before the
   * purchases, or after them (mail about what the pass did).
   */
  addJob(job: () => Promise<number>, when: 'before' | 'after' = 'before'): void {
    (when === 'before' ? this.jobs : this.lateJobs).push(job);
  }

  private readonly customerJobs: Array<(clockId: string | null) => Promise<number>> = [];

  /** Work on customers' own time (expiring cards), run before their purchases, per clock as they are. */
  addCustomerJob(job: (clockId: string | null) => Promise<number>): void {
    this.customerJobs.push(job);
  }

  /**
   * The jobs, the purchases, then the late jobs. A job that fails (a provider's processor out of
   * reach or disconnected, a database hiccup) is logged and tried again next pass: it holds up
   * neither the other jobs nor anyone's renewals.
   */
  private async run(limit: number): Promise<number> {
    let handled = await this.runJobs(this.jobs);
    handled += await this.runPurchases(null, limit);
    return handled + (await this.runJobs(this.lateJobs));
  }

  private async runJobs(jobs: ReadonlyArray<() => Promise<number>>): Promise<number> {
    let handled = 0;
    for (const job of jobs) {
      try {
        handled += await job();
      } catch (error) {
        this.options.logger.error({ err: error }, 'scheduler job failed; next pass');
      }
    }
    return handled;
  }

  /**
   * Everything due on one sandbox test clock at the current (test) time: the clock's advance
   * calls this inside `atTestTime`, once per step.
   */
  runClock(clockId: string, limit = 1000): Promise<number> {
    return this.runPurchases(clockId, limit);
  }

  private async runPurchases(clockId: string | null, limit: number): Promise<number> {
    let handled = await this.runJobs(this.customerJobs.map((job) => () => job(clockId)));
    handled += await this.dunning.retryDue(clockId, limit);
    const usageClosedBy = await this.usageClosedBy(clockId);
    // Drafts are a preview: a usage store that cannot be read leaves them as they were, and
    // must not hold up renewals that need no usage.
    const drafts = {
      now: () => this.clock.now(),
      closedBy: usageClosedBy,
      clockId,
      limit,
      logger: this.options.logger,
    };
    await refreshDrafts(this.pool, drafts, (tx, row) => this.recountDraft(tx, row)).catch((error: unknown) =>
      this.options.logger.warn({ err: error }, 'draft invoices not refreshed in this pass'),
    );
    handled += await eachDue(
      this.pool,
      { limit, logger: this.options.logger, what: 'purchase' },
      (tx, skipped, took) => this.handleOne(tx, usageClosedBy, clockId, skipped, took),
      async (changed) => {
        // A purchase that had already ended (its final usage billed) may have a successor, whose
        // entitlement its own must not overwrite.
        if (changed.publish) await this.purchases.publish([changed.row]);
      },
    );
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

  /**
   * The latest end of a usage-billed period this pass may close: the lateness allowance before
   * now, once the usage bus has stored everything it held at that moment. When the bus does not
   * settle in time, no usage period closes in this pass (the epoch), and the next pass asks again:
   * records still in Kafka are never left to the next period.
   */
  private async usageClosedBy(clockId: string | null): Promise<Date> {
    const closedBy = new Date(this.clock.now().getTime() - this.options.usageLatenessMs);
    if (!(await usagePeriodsDue(this.pool, closedBy, clockId))) return new Date(0);
    if (await this.settlement.settled(this.options.settleTimeoutMs)) return closedBy;
    this.options.logger.warn('usage bus not settled; usage-billed periods close on a later pass');
    return new Date(0);
  }

  private async handleOne(
    tx: PoolClient,
    usageClosedBy: Date,
    clockId: string | null,
    skipped: readonly string[],
    took: Took,
  ): Promise<{ row: PurchaseRow; publish: boolean } | undefined> {
    const now = this.clock.now();
    const row = await lockNextDuePurchase(tx, {
      now,
      trialReminderBy: addDays(now, this.options.trialReminderDays),
      renewalReminderBy: addDays(now, this.options.renewalReminderDays),
      usageClosedBy,
      clockId,
      skipped,
    });
    if (row === undefined) return undefined;
    took(row.id);
    if (row.final_usage_due) return { row: await this.billFinalUsage(tx, row), publish: false };
    return { row: await this.handle(tx, row, now), publish: true };
  }

  /**
   * The invoice dunning was collecting for a past-due purchase was voided: the period it billed
   * is forgiven, and the purchase moves on to its next period as a renewal would, unpaid for the
   * last (`purchase.updated`, then `usage.reset`). Call with the purchase locked.
   */
  async forgive(tx: PoolClient, row: PurchaseRow): Promise<PurchaseRow> {
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const plan = await findPlan(tx, auth, row.plan_id);
    if (plan === undefined || row.period_end === null)
      throw new Error(`purchase ${row.id} has no plan or no period to move on from`);
    const now = this.clock.now();
    const moved = await this.purchases.apply(tx, auth, row, 'invoice_voided', {
      period_start: row.period_end,
      period_end: periodEnd(row.period_end, settingsOf(plan), row.anchor_day),
      retry_count: 0,
      next_retry_at: null,
      rollover_units: 0,
    });
    await writeUsageReset(tx, auth, row, moved, now);
    return moved;
  }

  /**
   * Collects an open invoice now, on request (`POST /v1/sdk/invoices/{id}/pay`), the purchase
   * and the invoice locked by the caller in that order: an attempt apart from the dunning
   * schedule, which a failure neither uses up nor moves. Paid, the period dunning was collecting
   * renews the purchase as its retry would have; a final-usage invoice is only paid. Any other
   * open invoice is not this call's to collect (409 `invoice_not_payable`).
   */
  async payNow(
    tx: PoolClient,
    row: PurchaseRow,
    invoice: InvoiceRow,
  ): Promise<{ collection: Collection; renewed?: PurchaseRow }> {
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const dunned =
      row.status === 'past_due' &&
      row.period_end !== null &&
      invoice.period_key === row.period_end.toISOString();
    if (!dunned && invoice.billing_reason !== 'final_usage')
      throw new ConflictError(
        'invoice_not_payable',
        `Invoice ${invoice.id} is not one being collected from the customer's card (purchase ${row.id} is ${row.status})`,
      );
    const collection = await this.invoicing.collectOnRequest(tx, auth, invoice);
    if (collection.status !== 'succeeded' || !dunned) return { collection };
    return { collection, renewed: await this.collected(tx, auth, row, collection.invoice, this.clock.now()) };
  }

  /** A past-due purchase whose period is paid at last renews into its next period (`usage.reset`). */
  private async collected(
    tx: PoolClient,
    auth: AuthContext,
    row: PurchaseRow,
    invoice: InvoiceRow | undefined,
    now: Date,
  ): Promise<PurchaseRow> {
    const plan = await findPlan(tx, auth, row.plan_id);
    if (plan === undefined || row.period_end === null)
      throw new Error(`purchase ${row.id} has no plan or no period to renew from`);
    const settings = settingsOf(plan);
    const renewed = await this.purchases.apply(tx, auth, row, 'renewed', {
      period_start: row.period_end,
      period_end: periodEnd(row.period_end, settings, row.anchor_day),
      retry_count: 0,
      next_retry_at: null,
      rollover_units: invoice === undefined ? 0 : rolloverAfter(invoice, settings),
    });
    await writeUsageReset(tx, auth, row, renewed, now);
    return renewed;
  }

  private async handle(tx: PoolClient, row: PurchaseRow, now: Date): Promise<PurchaseRow> {
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const plan = await findPlan(tx, auth, row.plan_id);
    if (plan === undefined) throw new Error(`purchase ${row.id} has no plan ${row.plan_id}`);
    const settings = settingsOf(plan);
    const nextEnd = (start: Date) => periodEnd(start, settings, row.anchor_day);
    // A new period starts the usage counters from zero: usage.reset, in the renewal's transaction.
    const renew = async (fields: Partial<PurchaseRow>) => {
      const renewed = await this.purchases.apply(tx, auth, row, 'renewed', fields);
      await writeUsageReset(tx, auth, row, renewed, now);
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
      const lines = [
        ...(row.amount > 0
          ? [baseLine(settings.name, row.amount, row.trial_end, nextEnd(row.trial_end))]
          : []),
        ...(row.setup_fee_due > 0 ? [setupFeeLine(row.setup_fee_due)] : []),
      ];
      const paid =
        lines.length === 0
          ? { status: 'succeeded' }
          : await this.invoicing.issue(tx, auth, {
              purchase: row,
              periodKey: row.trial_end.toISOString(),
              billingReason: 'trial_conversion',
              chargeReason: 'trial_conversion',
              lines,
            });
      if (paid.status === 'failed') return this.purchases.apply(tx, auth, row, 'trial_ended_unpaid');
      return this.purchases.apply(tx, auth, row, 'trial_converted', {
        period_start: row.trial_end,
        period_end: nextEnd(row.trial_end),
        setup_fee_due: 0,
      });
    }

    if (row.status === 'past_due' && row.period_end !== null) {
      const attempt = row.retry_count + 1;
      const retried = await this.invoicing.retry(tx, auth, row, row.period_end.toISOString(), attempt);
      // Purchases that fell past due before invoices existed are retried on their amount alone.
      const paid = retried ?? (await this.dunning.chargeAgain(tx, auth, row, attempt));
      if (paid.status === 'succeeded') return this.collected(tx, auth, row, retried?.invoice, now);
      const next = retryAt(attempt);
      if (next === null) {
        await this.invoicing.markUncollectible(tx, row.id, row.period_end.toISOString());
        return this.purchases.apply(tx, auth, row, 'dunning_exhausted', {
          retry_count: attempt,
          next_retry_at: null,
          ended_at: now,
          final_usage_due: endsMidPeriod(row, now),
          cancellation_details: paymentFailed(now),
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
      const ending = endingMove(row);
      const closing = await this.closingInvoice(tx, auth, row);
      if (ending !== undefined) {
        // The last period's usage is still owed: one final invoice; unpaid, it is retried on
        // the dunning schedule (there is no later period to withhold).
        if (closing !== undefined) {
          const billed = await this.invoicing.issue(tx, auth, closing);
          if (billed.status === 'failed') await this.dunning.scheduleRetry(tx, billed.invoice, now);
        }
        return this.purchases.apply(tx, auth, row, ending, { ended_at: row.period_end });
      }
      const next = nextEnd(row.period_end);
      const paid = closing === undefined ? undefined : await this.invoicing.issue(tx, auth, closing);
      if (paid === undefined || paid.status === 'succeeded') {
        return renew({
          period_start: row.period_end,
          period_end: next,
          rollover_units: paid === undefined ? 0 : rolloverAfter(paid.invoice, settings),
        });
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

  /**
   * The usage a purchase left unbilled when it ended early, as one final invoice, charged once:
   * from its period's start, or from where its last usage invoice stopped (a past-due purchase
   * used its service after the period dunning was collecting), up to the moment it ended.
   */
  private async billFinalUsage(tx: PoolClient, row: PurchaseRow): Promise<PurchaseRow> {
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const closing = await this.closingInvoice(tx, auth, row);
    if (closing !== undefined) {
      const billed = await this.invoicing.issue(tx, auth, closing);
      if (billed.status === 'failed') await this.dunning.scheduleRetry(tx, billed.invoice, this.clock.now());
    }
    await clearFinalUsageDue(tx, row.id);
    return { ...row, final_usage_due: false };
  }

  /**
   * The invoice that closes a purchase's ended period, as it stands now: for an active purchase
   * whose period is over, the period's usage in arrears (usage-billed plans) and, when it renews,
   * the next period's base price in advance, as Stripe bills a metered subscription; for a
   * purchase that ended early, the usage it left unbilled, from its period's start (or from where
   * its last usage invoice stopped: a past-due purchase used its service after the period dunning
   * was collecting) up to the moment it ended. Undefined when there is nothing to invoice.
   */
  private async closingInvoice(
    tx: PoolClient,
    auth: AuthContext,
    row: PurchaseRow,
  ): Promise<InvoiceDraft | undefined> {
    const plan = await findPlan(tx, auth, row.plan_id);
    if (plan === undefined) throw new Error(`purchase ${row.id} has no plan ${row.plan_id}`);
    const settings = settingsOf(plan);
    if (row.final_usage_due) {
      if (row.ended_at === null) throw new Error(`purchase ${row.id} owes final usage but has not ended`);
      const billedTo = (await lastUsageInvoice(tx, row.id))?.usage_period_end ?? null;
      const start = billedTo !== null && billedTo > row.period_start ? billedTo : row.period_start;
      if (start >= row.ended_at) return undefined;
      const closed = row.pays_from_credits
        ? { lines: [await this.invoicing.creditLine(tx, auth, row, start, row.ended_at)] }
        : await this.invoicing.usageLines(tx, auth, row, settings, start, row.ended_at);
      return final(row, row.ended_at, closed);
    }
    if (row.status !== 'active' || row.period_end === null) return undefined;
    if (row.pays_from_credits) {
      // The period's statement: the calls it paid from credits, the whole invoice at 0.
      const line = await this.invoicing.creditLine(tx, auth, row, row.period_start, row.period_end);
      const renews = endingMove(row) === undefined;
      return {
        purchase: row,
        periodKey: row.period_end.toISOString(),
        billingReason: renews ? 'renewal' : 'final_usage',
        chargeReason: renews ? 'renewal' : 'final_usage',
        lines: [line],
      };
    }
    const closed = row.bills_usage
      ? await this.invoicing.usageLines(tx, auth, row, settings, row.period_start, row.period_end)
      : undefined;
    if (endingMove(row) !== undefined)
      return closed === undefined ? undefined : final(row, row.period_end, closed);
    const next = periodEnd(row.period_end, settings, row.anchor_day);
    const lines = [
      ...(closed?.lines ?? []),
      ...(row.amount > 0 ? [baseLine(settings.name, row.amount, row.period_end, next)] : []),
    ];
    if (lines.length === 0 && closed === undefined) return undefined;
    return {
      purchase: row,
      periodKey: row.period_end.toISOString(),
      billingReason: 'renewal',
      chargeReason: 'renewal',
      lines,
      usage: closed?.usage,
    };
  }

  /** Recounts one purchase's draft usage invoice (`refreshDrafts`), in the pass's transaction. */
  private async recountDraft(tx: PoolClient, row: PurchaseRow): Promise<void> {
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const closing = await this.closingInvoice(tx, auth, row);
    if (closing !== undefined) await this.invoicing.draft(tx, auth, closing);
  }

  /**
   * Closes the ended period of a purchase (locked by the caller) now, without waiting out the
   * lateness allowance: what finalizing its draft invoice asks for. Undefined when the purchase
   * has no ended period waiting.
   */
  async closeNow(
    tx: PoolClient,
    row: PurchaseRow,
  ): Promise<{ row: PurchaseRow; publish: boolean } | undefined> {
    if (row.final_usage_due) return { row: await this.billFinalUsage(tx, row), publish: false };
    const now = this.clock.now();
    const closesOnUsage = row.bills_usage || row.pays_from_credits;
    if (row.status !== 'active' || !closesOnUsage || row.period_end === null || row.period_end > now)
      return undefined;
    return { row: await this.handle(tx, row, now), publish: true };
  }

  /** Whether the usage bus has stored everything it holds (waits up to the pass's timeout). */
  usageSettled(): Promise<boolean> {
    return this.settlement.settled(this.options.settleTimeoutMs);
  }
}
