import { divideHalfEven } from '@mcp-meter/contracts/pricing';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { DomainError, type FieldProblem, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { currenciesIn } from '../financials/repository';
import type { RevenueLine } from '../ledger/repository';
import { instantOf, isTimeZone, localOf } from './calendar';
import { firstPaidAt, movementOf, mrrAt } from './mrr';
import { activeCustomersAt, monthTotals, paidPeriods, payersByMonth } from './revenue-repository';
import type { RevenueAnalyticsQuery } from './schemas';

/** Months one report may hold: ten years. */
export const MAX_MONTHS = 120;
const MONTH = /^(\d{4})-(0[1-9]|1[0-2])$/;

export const REVENUE_KINDS = ['recurring', 'usage', 'oneTime', 'credits', 'other'] as const;
type RevenueKind = (typeof REVENUE_KINDS)[number];

/**
 * What a revenue entry paid for: recurring fees (base prices over a service period, and the
 * prorations of plan switches), usage (its lines, late usage and the credits applied to them),
 * one-time charges (setup fees, one-time plans), credit packs, or other (a payment's part no line
 * names, such as payments made before lines were recorded).
 */
export function revenueKindOf(line: RevenueLine | null, spread: boolean): RevenueKind {
  switch (line) {
    case 'base':
      return spread ? 'recurring' : 'oneTime';
    case 'proration':
    case 'proration_refund':
      return 'recurring';
    case 'usage':
    case 'late_usage':
    case 'credits_applied':
      return 'usage';
    case 'setup_fee':
      return 'oneTime';
    case 'top_up':
      return 'credits';
    default:
      return 'other';
  }
}

const problem = (path: string, message: string): FieldProblem => ({ path, message, location: 'querystring' });
const monthKey = (year: number, month: number) =>
  `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}`;
/** a ÷ b in basis points, half to even; null when b is 0. */
const basisPoints = (a: number, b: number) =>
  b === 0 ? null : Number(divideHalfEven(BigInt(a) * 10_000n, BigInt(b)));
const perCustomer = (amount: number, customers: number) =>
  customers === 0 ? null : Number(divideHalfEven(BigInt(amount), BigInt(customers)));

/**
 * Revenue analytics from the ledger: MRR and its movements at each month's end, active and
 * paying customers, churn, revenue by what it paid for, refunds and disputes. Months follow the
 * provider's time zone; every amount is whole minor units of one currency, and each month's
 * gross, refunds, disputes, fees and net are the ledger's sums over the same instants, so they
 * equal the P&L's for that month.
 */
export class RevenueAnalytics {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async report(auth: AuthContext, query: Static<typeof RevenueAnalyticsQuery>) {
    const timeZone = query.timeZone ?? 'UTC';
    if (!isTimeZone(timeZone))
      throw new ValidationError([problem('/timeZone', `is not an IANA time zone: ${timeZone}`)]);
    const now = this.clock.now().getTime();
    const today = localOf(timeZone, now);
    const parse = (path: string, value: string | undefined, fallback: [number, number]) => {
      if (value === undefined) return fallback;
      const match = MONTH.exec(value);
      const year = Number(match?.[1]);
      if (match === null || year < 1970 || year > 2199)
        throw new ValidationError([problem(path, `must be a month YYYY-MM between 1970 and 2199: ${value}`)]);
      return [year, Number(match[2])] as [number, number];
    };
    const [toYear, toMonth] = parse('/to', query.to, [today.year, today.month]);
    const back = toYear * 12 + toMonth - 1 - 11;
    const [fromYear, fromMonth] = parse('/from', query.from, [Math.floor(back / 12), (back % 12) + 1]);
    const count = toYear * 12 + toMonth - (fromYear * 12 + fromMonth) + 1;
    if (count < 1) throw new ValidationError([problem('/from', 'must not be after to')]);
    if (count > MAX_MONTHS)
      throw new DomainError(
        'range_too_large',
        `The range holds more than ${MAX_MONTHS} months; choose a shorter range`,
        { limit: MAX_MONTHS, grain: 'month' },
      );

    const months = Array.from({ length: count }, (_, i) => {
      const index = fromYear * 12 + fromMonth - 1 + i;
      const [y, m] = [Math.floor(index / 12), (index % 12) + 1];
      const start = instantOf(timeZone, y, m, 1);
      const end = instantOf(timeZone, m === 12 ? y + 1 : y, m === 12 ? 1 : m + 1, 1);
      return { label: monthKey(y, m), start, end, asOf: Math.min(end, now) };
    });
    const first = months[0] as (typeof months)[number];
    const last = months[months.length - 1] as (typeof months)[number];
    const currency =
      query.currency?.toLowerCase() ?? (await currenciesIn(this.pool, auth, null, null))[0] ?? 'usd';
    const otherCurrencies = (
      await currenciesIn(this.pool, auth, new Date(first.start), new Date(last.end))
    ).filter((c) => c !== currency);

    const starts = months.map((m) => new Date(m.start));
    const ends = months.map((m) => new Date(m.end));
    const [periods, totals, payers, active] = await Promise.all([
      paidPeriods(this.pool, auth, currency, new Date(Math.max(last.asOf, first.start) + 1)),
      monthTotals(this.pool, auth, currency, starts, ends),
      payersByMonth(this.pool, auth, currency, starts, ends),
      activeCustomersAt(
        this.pool,
        auth,
        months.map((m) => new Date(m.asOf)),
      ),
    ]);
    const firstPaid = firstPaidAt(periods);

    const data = months.map((month, i) => {
      const future = month.start > now;
      const mrr = movementOf(
        future ? new Map() : mrrAt(periods, month.start),
        future ? new Map() : mrrAt(periods, month.asOf),
        firstPaid,
        month.start,
      );
      const revenue = Object.fromEntries(REVENUE_KINDS.map((k) => [k, 0])) as Record<RevenueKind, number>;
      const account = { refunds: 0, disputes: 0, platform_fees: 0 };
      for (const row of totals) {
        if (row.n !== i + 1) continue;
        if (row.account === 'revenue') revenue[revenueKindOf(row.line, row.spread)] -= row.total;
        else if (row.account in account) account[row.account as keyof typeof account] += row.total;
      }
      const gross = REVENUE_KINDS.reduce((sum, k) => sum + revenue[k], 0);
      const net = gross - account.refunds - account.disputes - account.platform_fees;
      const paidIn = payers.get(i + 1) ?? 0;
      return {
        month: month.label,
        start: new Date(month.start).toISOString(),
        end: new Date(month.end).toISOString(),
        mrr: {
          start: mrr.start,
          end: mrr.end,
          ...mrr.movements,
          arpu: perCustomer(mrr.end, mrr.customers.paying),
        },
        customers: {
          active: future ? 0 : (active.get(i + 1) ?? 0),
          paying: mrr.customers.paying,
          new: mrr.customers.new,
          reactivated: mrr.customers.reactivated,
          churned: mrr.customers.churned,
        },
        churnRate: {
          customersBasisPoints: basisPoints(mrr.customers.churned, mrr.customers.payingAtStart),
          mrrBasisPoints: basisPoints(mrr.movements.churn, mrr.start),
        },
        revenue: {
          ...revenue,
          gross,
          refunds: account.refunds,
          disputes: account.disputes,
          platformFees: account.platform_fees,
          net,
          customersPaying: paidIn,
          perPayingCustomer: perCustomer(net, paidIn),
        },
      };
    });
    return {
      from: first.label,
      to: last.label,
      timeZone,
      currency,
      otherCurrencies,
      asOf: new Date(now).toISOString(),
      months: data,
    };
  }
}
