import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { Account } from '../ledger/repository';
import { monthsOf, PERIOD_FORMS, priorOf, type ReportPeriod, reportPeriod } from './periods';
import { accountTotals, balanceBefore, currenciesIn, type RevenueEntry, revenueEntries } from './repository';

/**
 * Revenue earned by `t` from one revenue entry: nothing before it was received; then what it
 * paid for up to `t`, evenly over its service period (from when it was received, if later), to
 * the minor unit rounded down. Cumulative, so the months of a period always add up to the payment.
 */
export function recognisedBy(entry: RevenueEntry, t: Date): number {
  const received = entry.occurred_at.getTime();
  if (t.getTime() <= received) return 0;
  const end = entry.recognition_end?.getTime();
  if (entry.recognition_start === null || end === undefined || end <= received || t.getTime() >= end)
    return entry.amount;
  const start = Math.max(entry.recognition_start.getTime(), received);
  if (t.getTime() <= start) return 0;
  return Number((BigInt(entry.amount) * BigInt(t.getTime() - start)) / BigInt(end - start));
}

export interface RevenueSummary {
  grossRevenue: number;
  refunds: number;
  disputes: number;
  platformFees: number;
  netRevenue: number;
  costOfRevenue: number;
  recognisedRevenue: number;
  deferredRevenue: number;
  hasCostTransactions: boolean;
  grossProfit: { amount: number };
  grossMargin: { basisPoints: number | null; percent: number | null };
}

export interface BalanceSummary {
  openingBalance: number;
  paymentsReceived: number;
  refundsIssued: number;
  disputes: number;
  platformFees: number;
  costsPaid: number;
  payouts: number;
  closingBalance: number;
  netChange: number;
}

/**
 * The P&L and cash-flow reports (spec 4.7, 4.8), computed from the ledger alone, in one currency.
 * Amounts are integers in minor units; money in is positive, and each deduction is reported as a
 * positive amount that is subtracted (refunds 500 means 500 went back).
 */
export class FinancialService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async pnl(auth: AuthContext, query: { period?: string | undefined; currency?: string | undefined }) {
    const { period, currency, otherCurrencies } = await this.scope(auth, query);
    const prior = priorOf(period);
    return {
      periodLabel: period.label,
      period: { start: period.start.toISOString(), end: period.end.toISOString() },
      currency,
      otherCurrencies,
      current: await this.revenue(auth, currency, period),
      prior: { ...(await this.revenue(auth, currency, prior)), periodLabel: prior.label },
      monthly: await this.monthly(auth, currency, period),
    };
  }

  async cashflow(auth: AuthContext, query: { period?: string | undefined; currency?: string | undefined }) {
    const { period, currency, otherCurrencies } = await this.scope(auth, query);
    return {
      periodLabel: period.label,
      period: { start: period.start.toISOString(), end: period.end.toISOString() },
      currency,
      otherCurrencies,
      current: await this.balance(auth, currency, period),
      monthly: await this.monthly(auth, currency, period),
    };
  }

  /** Both summaries of each calendar month of the period. */
  private monthly(auth: AuthContext, currency: string, period: ReportPeriod) {
    return Promise.all(
      monthsOf(period).map(async (month) => ({
        month: month.label,
        revenue: await this.revenue(auth, currency, month),
        balance: await this.balance(auth, currency, month),
      })),
    );
  }

  /** The period named, and the report's currency: the one asked for, else the provider's most used. */
  private async scope(
    auth: AuthContext,
    query: { period?: string | undefined; currency?: string | undefined },
  ) {
    const name = query.period ?? 'this-month';
    const period = reportPeriod(name, this.clock.now());
    if (period === undefined) {
      throw new ValidationError([
        { path: '/period', message: `must be one of ${PERIOD_FORMS}`, location: 'querystring' },
      ]);
    }
    const inPeriod = await currenciesIn(this.pool, auth, period.start, period.end);
    const currency =
      query.currency?.toLowerCase() ?? (await currenciesIn(this.pool, auth, null, null))[0] ?? 'usd';
    return { period, currency, otherCurrencies: inPeriod.filter((c) => c !== currency) };
  }

  private async revenue(auth: AuthContext, currency: string, period: ReportPeriod): Promise<RevenueSummary> {
    const totals = await accountTotals(this.pool, auth, currency, period.start, period.end);
    const sum = (account: Account) => totals.get(account)?.total ?? 0;
    const grossRevenue = -sum('revenue');
    const refunds = sum('refunds');
    const disputes = sum('disputes');
    const platformFees = sum('platform_fees');
    const costOfRevenue = sum('costs');
    const netRevenue = grossRevenue - refunds - disputes - platformFees;
    const grossProfit = netRevenue - costOfRevenue;

    // Earned in the period, and still owed in service at its end (or now, for a running period).
    const now = this.clock.now();
    const asOf = period.end < now ? period.end : now;
    const entries = await revenueEntries(this.pool, auth, currency, period.start, asOf);
    let recognisedRevenue = 0;
    let deferredRevenue = 0;
    for (const entry of entries) {
      recognisedRevenue += recognisedBy(entry, asOf) - recognisedBy(entry, period.start);
      deferredRevenue += entry.amount - recognisedBy(entry, asOf);
    }
    const basisPoints = netRevenue === 0 ? null : Math.round((grossProfit * 10_000) / netRevenue);
    return {
      grossRevenue,
      refunds,
      disputes,
      platformFees,
      netRevenue,
      costOfRevenue,
      recognisedRevenue,
      deferredRevenue,
      hasCostTransactions: (totals.get('costs')?.entries ?? 0) > 0,
      grossProfit: { amount: grossProfit },
      grossMargin: { basisPoints, percent: basisPoints === null ? null : basisPoints / 100 },
    };
  }

  private async balance(auth: AuthContext, currency: string, period: ReportPeriod): Promise<BalanceSummary> {
    const totals = await accountTotals(this.pool, auth, currency, period.start, period.end);
    const sum = (account: Account) => totals.get(account)?.total ?? 0;
    const openingBalance = await balanceBefore(this.pool, auth, currency, period.start);
    const netChange = sum('processor_balance');
    return {
      openingBalance,
      paymentsReceived: -sum('revenue'),
      refundsIssued: sum('refunds'),
      disputes: sum('disputes'),
      platformFees: sum('platform_fees'),
      costsPaid: sum('costs'),
      payouts: sum('bank'),
      closingBalance: openingBalance + netChange,
      netChange,
    };
  }
}
