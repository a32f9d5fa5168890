import type { PoolClient } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import type { InvoiceDraft, PeriodUsage } from '../billing/invoicing';
import type { StoredLine } from '../billing/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { PurchaseRow } from './service';
import type { MoveName } from './state-machine';

/* How a purchase's period closes, as the billing scheduler and a payment on request close it. */

/** How an active purchase ends when its period does, or undefined when it renews. */
export function endingMove(row: PurchaseRow): MoveName | undefined {
  if (!row.is_recurring) return 'expire';
  if (row.cancel_at_period_end) return 'period_ended_cancelled';
  if (!row.auto_renew) return 'expire';
  return undefined;
}

/** The final invoice of a purchase's usage, keyed by the moment its last period ended. */
export function final(
  row: PurchaseRow,
  end: Date,
  closed: { lines: StoredLine[]; usage?: PeriodUsage },
): InvoiceDraft {
  return {
    purchase: row,
    periodKey: end.toISOString(),
    billingReason: 'final_usage',
    chargeReason: 'final_usage',
    lines: closed.lines,
    usage: closed.usage,
  };
}

/** `usage.reset`: a purchase moved into a new period, whose usage counts from zero. */
export async function writeUsageReset(
  tx: PoolClient,
  auth: AuthContext,
  before: PurchaseRow,
  after: PurchaseRow,
  now: Date,
): Promise<void> {
  await writeEvent(tx, {
    ...auth,
    type: 'usage.reset',
    object: {
      purchase: before.id,
      customer: before.customer_id,
      product: before.product_id,
      plan: before.plan_id,
      previousPeriodStart: unixSeconds(before.period_start),
      periodStart: unixSeconds(after.period_start),
      periodEnd: after.period_end === null ? null : unixSeconds(after.period_end),
      created: unixSeconds(now),
    },
    at: now,
  });
}
