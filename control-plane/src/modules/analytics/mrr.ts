/**
 * Monthly recurring revenue, as pure arithmetic over paid service periods (the base lines of
 * paid invoices).
 *
 * A recurring fee counts from the moment the period it paid for starts until that period ends
 * or its purchase ends (cancelled now, switched to another plan, refunded in full), whichever
 * is first: trials, pending and past-due periods are not paid, so they add nothing. Each fee is
 * normalised to a month by its billing cycle (a quarter is three months, a year twelve, a week
 * and a custom cycle by days, at 365.25 ÷ 12 days a month); one customer's fees are added
 * exactly and rounded once to the minor unit, half to even, so the total and every movement
 * are sums of whole amounts that add up.
 */

import { divideHalfEven } from '@mcp-meter/contracts/pricing';

/** One paid period of a recurring fee. */
export interface PaidPeriod {
  customerId: string;
  /** What the period cost, in minor units. */
  amount: number;
  start: Date;
  end: Date;
  /** When the purchase ended, if it has. */
  endedAt: Date | null;
  billingCycle: string | null;
  intervalDays: number | null;
}

/** Months per billing period as a fraction; null for a cycle that has none. */
function monthsPer(cycle: string | null, intervalDays: number | null): [bigint, bigint] | null {
  switch (cycle) {
    case 'monthly':
      return [1n, 1n];
    case 'quarterly':
      return [3n, 1n];
    case 'yearly':
      return [12n, 1n];
    // d days ÷ (1461 ÷ 48 days a month) = 48d ÷ 1461 months.
    case 'weekly':
      return [48n * 7n, 1461n];
    case 'custom':
      return intervalDays === null || intervalDays < 1 ? null : [48n * BigInt(intervalDays), 1461n];
    default:
      return null;
  }
}

/** Whether `period` is paid and in force at `t`. */
const inForce = (period: PaidPeriod, t: number): boolean =>
  period.start.getTime() <= t &&
  t < period.end.getTime() &&
  (period.endedAt === null || period.endedAt.getTime() > t);

/** Each customer's MRR at instant `t` (customers without any are absent). */
export function mrrAt(periods: readonly PaidPeriod[], t: number): Map<string, number> {
  const sums = new Map<string, [bigint, bigint]>();
  for (const period of periods) {
    if (period.amount <= 0 || !inForce(period, t)) continue;
    const months = monthsPer(period.billingCycle, period.intervalDays);
    if (months === null) continue;
    // amount ÷ (months[0] ÷ months[1]) = amount × months[1] ÷ months[0].
    const [num, den] = [BigInt(period.amount) * months[1], months[0]];
    const [sn, sd] = sums.get(period.customerId) ?? [0n, 1n];
    sums.set(period.customerId, [sn * den + num * sd, sd * den]);
  }
  const mrr = new Map<string, number>();
  for (const [customer, [n, d]] of sums) {
    const rounded = Number(divideHalfEven(n, d));
    if (rounded > 0) mrr.set(customer, rounded);
  }
  return mrr;
}

/** When each customer first had a paid recurring period in force. */
export function firstPaidAt(periods: readonly PaidPeriod[]): Map<string, number> {
  const first = new Map<string, number>();
  for (const period of periods) {
    const start = period.start.getTime();
    const stop = Math.min(period.end.getTime(), period.endedAt?.getTime() ?? Number.POSITIVE_INFINITY);
    if (period.amount <= 0 || stop <= start || monthsPer(period.billingCycle, period.intervalDays) === null)
      continue;
    const known = first.get(period.customerId);
    if (known === undefined || start < known) first.set(period.customerId, start);
  }
  return first;
}

export interface Movements {
  new: number;
  expansion: number;
  contraction: number;
  churn: number;
  reactivation: number;
}

export interface MonthOfMrr {
  start: number;
  end: number;
  movements: Movements;
  customers: { paying: number; payingAtStart: number; new: number; reactivated: number; churned: number };
}

/**
 * How MRR moved between two instants, customer by customer: new (none before, and never any
 * before), reactivation (none before, but some once), expansion and contraction (more or less
 * than before), churn (all of it gone). end = start + new + reactivation + expansion −
 * contraction − churn, always.
 */
export function movementOf(
  before: Map<string, number>,
  after: Map<string, number>,
  firstPaid: Map<string, number>,
  from: number,
): MonthOfMrr {
  const movements: Movements = { new: 0, expansion: 0, contraction: 0, churn: 0, reactivation: 0 };
  const customers = { paying: after.size, payingAtStart: before.size, new: 0, reactivated: 0, churned: 0 };
  for (const [customer, now] of after) {
    const was = before.get(customer) ?? 0;
    if (was === 0) {
      if ((firstPaid.get(customer) ?? from) < from) {
        movements.reactivation += now;
        customers.reactivated++;
      } else {
        movements.new += now;
        customers.new++;
      }
    } else if (now > was) movements.expansion += now - was;
    else if (now < was) movements.contraction += was - now;
  }
  for (const [customer, was] of before) {
    if (after.has(customer)) continue;
    movements.churn += was;
    customers.churned++;
  }
  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  return { start: sum(before), end: sum(after), movements, customers };
}
