import type { PlanSettings } from '../plans/rules';
import type { PurchaseRow } from './repository';

const DAY_MS = 86_400_000;

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/**
 * `months` calendar months after `start`, on the anchor day of the month clamped to the
 * month's length: a period anchored on the 31st ends on Feb 28 (or 29), then Mar 31.
 */
export function addMonths(start: Date, months: number, anchorDay = start.getUTCDate()): Date {
  const total = start.getUTCMonth() + months;
  const year = start.getUTCFullYear() + Math.floor(total / 12);
  const month = ((total % 12) + 12) % 12;
  const day = Math.min(anchorDay, daysInMonth(year, month));
  return new Date(
    Date.UTC(
      year,
      month,
      day,
      start.getUTCHours(),
      start.getUTCMinutes(),
      start.getUTCSeconds(),
      start.getUTCMilliseconds(),
    ),
  );
}

/** End of the billing period that starts at `start` (UTC calendar arithmetic). */
export function periodEnd(
  start: Date,
  plan: Pick<PlanSettings, 'billingCycle' | 'billingIntervalDays'>,
  anchorDay = start.getUTCDate(),
): Date {
  switch (plan.billingCycle) {
    case 'weekly':
      return new Date(start.getTime() + 7 * DAY_MS);
    case 'monthly':
      return addMonths(start, 1, anchorDay);
    case 'quarterly':
      return addMonths(start, 3, anchorDay);
    case 'yearly':
      return addMonths(start, 12, anchorDay);
    case 'custom':
      return new Date(start.getTime() + (plan.billingIntervalDays ?? 1) * DAY_MS);
    case null:
      throw new Error('a one-time plan has no billing period');
  }
}

export const addDays = (date: Date, days: number): Date => new Date(date.getTime() + days * DAY_MS);

/**
 * A usage-billed purchase ending now leaves usage to bill up to now: an active one, its open
 * period's; a past-due one, what it used after the period its unpaid invoice billed (access
 * continues while dunning retries). One paid from credits leaves the statement of its part period.
 */
export const endsMidPeriod = (row: PurchaseRow, at: Date): boolean =>
  (row.bills_usage || row.pays_from_credits) &&
  ((row.status === 'active' && row.period_start < at) ||
    (row.status === 'past_due' && row.period_end !== null && row.period_end < at));

/**
 * The first period of a purchase of `plan` started at `at`: a trial first when it has one; a
 * recurring plan's billing period (from the trial's end); a one-time plan's access expiry, or none.
 */
export function firstPeriod(
  settings: Pick<PlanSettings, 'billingCycle' | 'billingIntervalDays' | 'accessExpiryDays' | 'trialDays'>,
  trial: boolean,
  at: Date,
): { trialEnd: Date | null; end: Date | null } {
  const trialEnd = trial ? addDays(at, settings.trialDays) : null;
  const end =
    settings.billingCycle === null
      ? settings.accessExpiryDays === null
        ? null
        : addDays(at, settings.accessExpiryDays)
      : periodEnd(trialEnd ?? at, settings);
  return { trialEnd, end };
}
