import {
  ANALYTICS_GRAINS,
  type AnalyticsGrain,
  ANALYTICS_SLOT_MS as SLOT_MS,
  type ToolStatsQuery,
  USAGE_GROUPINGS,
  type UsageAnalytics,
  type UsageGrouping,
  type UsageSeriesRow,
} from '@mcp-meter/contracts/usage';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import {
  DomainError,
  type FieldProblem,
  NotFoundError,
  UnavailableError,
  ValidationError,
} from '../../errors';
import type { AuthContext } from '../../tenancy';
import { sessionsByIds } from '../checkout/repository';
import { customerFilter } from '../customers/filter';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { bucketsOf, isTimeZone } from './calendar';
import { funnelOf } from './funnel';
import { namesOf } from './names';
import type { FunnelQuery, ToolAnalyticsQuery, UsageAnalyticsQuery } from './schemas';

/** Buckets one series may hold: a year of days, or 41 days of hours. */
export const MAX_BUCKETS = 1000;
const DAY_MS = 86_400_000;
const LATEST = Date.UTC(2200, 0, 1);
/** Decimal(38, 9): the store's values, summed here as integers of 10⁻⁹. */
const SCALE = 9;

function scaled(decimal: string): bigint {
  const [whole = '0', fraction = ''] = decimal.split('.');
  const negative = whole.startsWith('-');
  const digits = BigInt(`${negative ? whole.slice(1) : whole}${fraction.padEnd(SCALE, '0').slice(0, SCALE)}`);
  return negative ? -digits : digits;
}

function decimalOf(value: bigint): string {
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString().padStart(SCALE + 1, '0');
  const whole = digits.slice(0, -SCALE);
  const fraction = digits.slice(-SCALE).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

const problem = (path: string, message: string): FieldProblem => ({ path, message, location: 'querystring' });

/**
 * Usage analytics for the console and the API: series over calendar buckets in the provider's
 * time zone, grouped by a dimension, and per-tool error rates and latency. The store answers
 * the figures; this checks the question, lays the buckets out (empty ones included) and keeps
 * the largest groups.
 */
export class AnalyticsService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly store: UsageAnalytics | undefined,
  ) {}

  private analytics(): UsageAnalytics {
    if (this.store === undefined)
      throw new UnavailableError(
        'usage_store_unavailable',
        'Usage analytics are not available in this deployment',
      );
    return this.store;
  }

  /**
   * The range, its meter and customer, checked. Analytics count whole 15-minute slots (which the
   * usage rollups hold): the range is widened to the quarter hours that hold its ends, and the
   * answer says so in its from and to. By default the 30 days to the end of this quarter hour.
   */
  private async scope(auth: AuthContext, query: Static<typeof ToolAnalyticsQuery>) {
    const askedTo = query.to === undefined ? this.clock.now() : new Date(query.to);
    const askedFrom =
      query.from === undefined ? new Date(askedTo.getTime() - 30 * DAY_MS) : new Date(query.from);
    // The store keeps times from 1970 to 2200 (DateTime64); a range outside it asks for nothing.
    const outside = (
      [
        ['/from', askedFrom],
        ['/to', askedTo],
      ] as const
    ).filter(([, at]) => Number.isNaN(at.getTime()) || at.getTime() < 0 || at.getTime() > LATEST);
    if (outside.length > 0)
      throw new ValidationError(
        outside.map(([path]) => problem(path, 'must be a time between 1970 and 2200')),
      );
    if (askedFrom.getTime() >= askedTo.getTime())
      throw new ValidationError([problem('/from', 'must be before to')]);
    const from = new Date(Math.floor(askedFrom.getTime() / SLOT_MS) * SLOT_MS);
    const to = new Date(Math.ceil(askedTo.getTime() / SLOT_MS) * SLOT_MS);
    const customerRef = await customerFilter(this.pool, auth, query.customerRef);
    // Records carry the meter's id; the caller may name it by id or name.
    const meter = await findMeter(
      this.pool,
      auth.providerId,
      auth.environment,
      query.meterRef ?? REQUESTS_METER,
    );
    if (meter === undefined) throw new NotFoundError('meter_not_found', `No meter ${query.meterRef}`);
    // The question as the store takes it (records carry the meter's id and the customer's).
    const store: ToolStatsQuery = {
      providerId: auth.providerId,
      environment: auth.environment,
      meterRef: meter.id,
      from,
      to,
      customerRef,
    };
    return { from, to, meterName: meter.name, store };
  }

  async usage(auth: AuthContext, query: Static<typeof UsageAnalyticsQuery>) {
    const grain = (query.grain ?? 'day') as AnalyticsGrain;
    const groupBy = (query.groupBy ?? 'none') as UsageGrouping;
    const timeZone = query.timeZone ?? 'UTC';
    const problems: FieldProblem[] = [];
    if (!ANALYTICS_GRAINS.includes(grain))
      problems.push(problem('/grain', `names no grain: ${grain} (one of ${ANALYTICS_GRAINS.join(', ')})`));
    if (!USAGE_GROUPINGS.includes(groupBy))
      problems.push(
        problem('/groupBy', `names no grouping: ${groupBy} (one of ${USAGE_GROUPINGS.join(', ')})`),
      );
    else if (groupBy === 'environment' && query.customerRef !== undefined)
      problems.push(
        problem('/groupBy', 'a customer belongs to one environment: environment cannot go with customerRef'),
      );
    if (!isTimeZone(timeZone)) problems.push(problem('/timeZone', `is not an IANA time zone: ${timeZone}`));
    if (problems.length > 0) throw new ValidationError(problems);
    const scope = await this.scope(auth, query);
    const buckets = bucketsOf(scope.from, scope.to, grain, timeZone, MAX_BUCKETS);
    if (buckets === undefined)
      throw new DomainError(
        'range_too_large',
        `The range holds more than ${MAX_BUCKETS} ${grain} buckets; choose a shorter range or a larger grain`,
        { limit: MAX_BUCKETS, grain },
      );
    // By customer the store picks the largest customers itself and answers the whole range beside
    // them (a month of thousands of customers is not read slot by slot); the rest is the difference.
    const byCustomer =
      groupBy === 'customer'
        ? await this.analytics().topCustomers({ ...scope.store, grain, timeZone, groupBy }, query.limit)
        : undefined;
    const rows =
      byCustomer?.rows ??
      (groupBy === 'environment'
        ? await this.byEnvironment(auth, scope, grain, timeZone)
        : await this.analytics().series({ ...scope.store, grain, timeZone, groupBy }));
    const index = new Map(buckets.map((b, i) => [b.key, i]));
    const numeric = grain === 'hour';
    const before = (a: string, b: string) => (numeric ? Number(a) <= Number(b) : a <= b);
    /**
     * The bucket a row's key names; a key the calendar did not lay out (time zone data of the
     * store and of this process disagreeing) goes to the bucket it falls in, never dropped.
     */
    const place = (key: string): number => {
      const exact = index.get(key);
      if (exact !== undefined) return exact;
      let at = 0;
      buckets.forEach((b, i) => {
        if (before(b.key, key)) at = i;
      });
      return at;
    };
    const groups = new Map<
      string,
      { calls: number[]; units: bigint[]; errors: number[]; totalCalls: number }
    >();
    const empty = () => ({
      calls: buckets.map(() => 0),
      units: buckets.map(() => 0n),
      errors: buckets.map(() => 0),
      totalCalls: 0,
    });
    for (const row of rows) {
      const i = place(row.bucket);
      let group = groups.get(row.key);
      if (group === undefined) {
        group = empty();
        groups.set(row.key, group);
      }
      group.calls[i] = (group.calls[i] ?? 0) + row.calls;
      group.units[i] = (group.units[i] ?? 0n) + scaled(row.units);
      group.errors[i] = (group.errors[i] ?? 0) + row.errors;
      group.totalCalls += row.calls;
    }
    const ranked = [...groups.entries()].sort(
      (a, b) => b[1].totalCalls - a[1].totalCalls || (a[0] < b[0] ? -1 : 1),
    );
    const shown = ranked.slice(0, query.limit);
    const rest = ranked.slice(query.limit);
    const sum = (list: typeof ranked) => {
      const total = empty();
      for (const [, g] of list)
        buckets.forEach((_, i) => {
          total.calls[i] = (total.calls[i] ?? 0) + (g.calls[i] ?? 0);
          total.units[i] = (total.units[i] ?? 0n) + (g.units[i] ?? 0n);
          total.errors[i] = (total.errors[i] ?? 0) + (g.errors[i] ?? 0);
        });
      total.totalCalls = list.reduce((n, [, g]) => n + g.totalCalls, 0);
      return total;
    };
    const figures = (g: ReturnType<typeof empty>) => ({
      totalCalls: g.totalCalls,
      calls: g.calls,
      units: g.units.map(decimalOf),
      errors: g.errors,
    });
    // Products and plans are named as the console shows them; other keys are their own names.
    const named =
      groupBy === 'product' || groupBy === 'plan'
        ? await namesOf(
            this.pool,
            auth,
            groupBy === 'product' ? shown.map(([key]) => key) : [],
            groupBy === 'plan' ? shown.map(([key]) => key) : [],
          )
        : undefined;
    const nameOf = (key: string) =>
      (groupBy === 'product' ? named?.products.get(key) : named?.plans.get(key)) ?? null;
    let all = sum(ranked);
    let other = rest.length === 0 ? null : { groups: rest.length, ...figures(sum(rest)) };
    if (byCustomer !== undefined) {
      // The whole range, and the customers not shown as what it holds beyond them.
      const whole = empty();
      for (const row of byCustomer.totals) {
        const i = place(row.bucket);
        whole.calls[i] = (whole.calls[i] ?? 0) + row.calls;
        whole.units[i] = (whole.units[i] ?? 0n) + scaled(row.units);
        whole.errors[i] = (whole.errors[i] ?? 0) + row.errors;
        whole.totalCalls += row.calls;
      }
      const beyond = empty();
      buckets.forEach((_, i) => {
        beyond.calls[i] = (whole.calls[i] ?? 0) - (all.calls[i] ?? 0);
        beyond.units[i] = (whole.units[i] ?? 0n) - (all.units[i] ?? 0n);
        beyond.errors[i] = (whole.errors[i] ?? 0) - (all.errors[i] ?? 0);
      });
      beyond.totalCalls = whole.totalCalls - all.totalCalls;
      const groups = byCustomer.customers - shown.length;
      other = groups === 0 ? null : { groups, ...figures(beyond) };
      all = whole;
    }
    return {
      from: scope.from.toISOString(),
      to: scope.to.toISOString(),
      grain,
      timeZone,
      groupBy,
      meterRef: scope.meterName,
      buckets: buckets.map((b) => ({ start: b.start, label: b.label })),
      series: shown.map(([key, g]) => ({ key, name: nameOf(key), ...figures(g) })),
      other,
      totals: {
        calls: all.totalCalls,
        units: decimalOf(all.units.reduce((a, b) => a + b, 0n)),
        errors: all.errors.reduce((a, b) => a + b, 0),
      },
    };
  }

  /**
   * Every environment the caller may read, each its own series keyed by its name: the store is
   * asked once per environment, for the meter of the same name there (a meter is per environment).
   */
  private async byEnvironment(
    auth: AuthContext,
    scope: Awaited<ReturnType<AnalyticsService['scope']>>,
    grain: AnalyticsGrain,
    timeZone: string,
  ): Promise<UsageSeriesRow[]> {
    const rows: UsageSeriesRow[] = [];
    for (const environment of auth.readable ?? [auth.environment]) {
      const meter =
        environment === auth.environment
          ? { id: scope.store.meterRef }
          : await findMeter(this.pool, auth.providerId, environment, scope.meterName);
      if (meter === undefined) continue;
      const series = await this.analytics().series({
        ...scope.store,
        environment,
        meterRef: meter.id,
        grain,
        timeZone,
        groupBy: 'none',
      });
      for (const row of series) rows.push({ ...row, key: environment });
    }
    return rows;
  }

  async tools(auth: AuthContext, query: Static<typeof ToolAnalyticsQuery>) {
    const scope = await this.scope(auth, query);
    const stats = await this.analytics().toolStats(scope.store);
    return {
      from: scope.from.toISOString(),
      to: scope.to.toISOString(),
      data: stats.map((s) => ({ ...s, errorRate: s.calls === 0 ? 0 : s.errors / s.calls })),
    };
  }

  /** The paywall funnel over a range: shown → offered → opened → paid, by form and by plan. */
  async funnel(auth: AuthContext, query: Static<typeof FunnelQuery>) {
    const scope = await this.scope(auth, query);
    const rows = await this.analytics().paywalls(scope.store);
    const ids = [...new Set(rows.map((r) => r.checkoutSessionId).filter((id) => id !== ''))];
    const found = ids.length === 0 ? [] : await sessionsByIds(this.pool, auth, ids);
    const sessions = new Map(
      found.map((row) => [
        row.id,
        {
          id: row.id,
          planId: row.plan_id,
          kind: row.kind,
          openedAt: row.opened_at,
          paidAt: row.status === 'used' ? row.completed_at : null,
        },
      ]),
    );
    const funnel = funnelOf(rows, sessions);
    const names = await namesOf(
      this.pool,
      auth,
      funnel.byPlan.map((p) => p.productId),
      funnel.byPlan.flatMap((p) => (p.planId === null ? [] : [p.planId])),
    );
    return {
      from: scope.from.toISOString(),
      to: scope.to.toISOString(),
      totals: funnel.totals,
      byForm: funnel.byForm,
      byPlan: funnel.byPlan.map((p) => ({
        ...p,
        productName: names.products.get(p.productId) ?? null,
        planName: p.planId === null ? null : (names.plans.get(p.planId) ?? null),
      })),
    };
  }
}
