import type { Logger } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { Pool, PoolClient } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import type { Invoicing } from '../billing/invoicing';
import {
  type InvoiceRow,
  lockNextInvoiceRetry,
  requestedAttempts,
  scheduleInvoiceRetry,
} from '../billing/repository';
import type { PaymentService } from '../payments/service';
import { eachDue } from './due-pass';
import type { PurchaseRow } from './service';

const HOUR_MS = 3_600_000;

/**
 * Dunning of what a purchase owes after a failed charge: an unpaid invoice is charged again
 * after each of the retry intervals and becomes uncollectible once they run out; a renewal
 * without an invoice is charged again as its dunning retry.
 */
export class InvoiceDunning {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly payments: PaymentService,
    private readonly invoicing: Invoicing,
    /** Hours after each failed charge before the next try. */
    private readonly retryHours: readonly number[],
    private readonly logger: Logger,
  ) {}

  /**
   * An unpaid final-usage invoice is charged again after each of the dunning intervals, counted
   * from its failed attempts (not those made on request); once they run out it is uncollectible.
   */
  async scheduleRetry(tx: PoolClient, invoice: InvoiceRow, now: Date): Promise<void> {
    if (invoice.status !== 'open') return;
    const scheduled = invoice.attempt_count - (await requestedAttempts(tx, invoice.id));
    const hours = this.retryHours[scheduled - 1];
    if (hours === undefined) {
      await this.invoicing.markUncollectible(tx, invoice.purchase_id, invoice.period_key);
      return;
    }
    await scheduleInvoiceRetry(tx, invoice.id, new Date(now.getTime() + hours * HOUR_MS));
  }

  /**
   * Due retries of unpaid final-usage invoices, one at a time (SKIP LOCKED, so replicas share
   * them): payment.succeeded and the invoice paid, or payment.failed and the next retry.
   */
  async retryDue(clockId: string | null, limit: number): Promise<number> {
    return eachDue(this.pool, { limit, logger: this.logger, what: 'invoice' }, async (tx, skipped, took) => {
      const now = this.clock.now();
      const invoice = await lockNextInvoiceRetry(tx, now, clockId, skipped);
      if (invoice === undefined) return undefined;
      took(invoice.id);
      const auth: AuthContext = { providerId: invoice.provider_id, environment: invoice.environment };
      const collected = await this.invoicing.collectAgain(tx, auth, invoice);
      if (collected.status === 'failed') await this.scheduleRetry(tx, collected.invoice, now);
      return true;
    });
  }

  /** A dunning retry's charge of a purchase whose period has no invoice (a flat renewal). */
  async chargeAgain(tx: PoolClient, auth: AuthContext, row: PurchaseRow, attempt: number) {
    if (row.amount === 0) return { status: 'succeeded' as const };
    return this.payments.charge(tx, auth, {
      customerId: row.customer_id,
      purchaseId: row.id,
      productId: row.product_id,
      planId: row.plan_id,
      amount: row.amount,
      currency: row.currency,
      reason: 'dunning_retry',
      periodKey: (row.period_end as Date).toISOString(),
      attempt,
    });
  }
}
