import type {
  PaywallShownRow,
  ToolStats,
  ToolStatsQuery,
  TopCustomers,
  UsageAnalytics,
  UsageSeriesQuery,
  UsageSeriesRow,
} from '@mcp-meter/contracts/usage';
import { percentilesOf } from './analytics/latency';
import {
  HAS_LATENCY,
  IS_ERROR,
  IS_PAYWALL,
  inRanges,
  LATENCY_BUCKET,
  lastCopies,
  PAYWALL_ERA,
  PAYWALL_FORM,
  PAYWALL_SESSION,
  PRODUCT,
  RECORD_GROUP,
  ROLLUP_GROUPINGS,
  SERVER,
  TOOL,
} from './analytics/record-sql';
import type { UsageRollups } from './analytics/rollups';
import type { RangePlan, TimeRange } from './analytics/slots';
import { ROLLUP_TABLES } from './analytics/tables';
import type { ClickHouse } from './clickhouse/client';
import { TABLES } from './usage-store';

/**
 * The bucket of a time column in the caller's time zone: the local date that starts its day, its
 * week (from Monday) or its month, or the instant (Unix seconds) that starts its local hour.
 */
function bucketOf(grain: UsageSeriesQuery['grain'], column: string): string {
  switch (grain) {
    case 'hour':
      // The instant less the local clock's minutes and seconds: the same rule as the console's
      // calendar (control-plane analytics/calendar.ts), so a zone at a half-hour offset buckets alike.
      return `toString(toUnixTimestamp(${column}) - toMinute(${column}, {timeZone:String}) * 60 - toSecond(${column}, {timeZone:String}))`;
    case 'day':
      return `toString(toDate(${column}, {timeZone:String}))`;
    case 'week':
      return `toString(toMonday(toDate(${column}, {timeZone:String})))`;
    case 'month':
      return `toString(toStartOfMonth(toDate(${column}, {timeZone:String})))`;
  }
}

type Split = Awaited<ReturnType<ClickHouseUsageAnalytics['split']>>;

/** A series row as ClickHouse answers it (64-bit counts as strings). */
interface SeriesRow {
  bucket: string;
  key: string;
  calls: string;
  units: string;
  errors: string;
}

const seriesRow = (r: SeriesRow): UsageSeriesRow => ({
  bucket: r.bucket,
  key: r.key,
  calls: Number(r.calls),
  units: r.units,
  errors: Number(r.errors),
});

/**
 * Usage analytics, exact: the whole 15-minute slots the rollups hold clean are read from them,
 * the rest of the range (its partial ends, slots not rolled yet or reached by records since)
 * from the raw records, each record's last copy once, as billing's FINAL counts it.
 * Questions about one customer or by customer read the raw records, which are sorted by customer.
 */
export class ClickHouseUsageAnalytics implements UsageAnalytics {
  constructor(
    private readonly clickhouse: ClickHouse,
    private readonly database: string,
    /** Absent on a cluster, where the rollups are not kept: everything is read raw. */
    private readonly rollups?: UsageRollups,
  ) {}

  private async rows<T>(
    query: string,
    params: Record<string, unknown>,
    settings: Record<string, number> = {},
  ): Promise<T[]> {
    const result = await this.clickhouse.client.query({
      query,
      query_params: params,
      format: 'JSONEachRow',
      clickhouse_settings: settings,
    });
    return result.json<T>();
  }

  /**
   * Which parts of the range the rollups answer and which the raw records do, as the WHERE of
   * each and the raw records' FROM. `days`: whole UTC days may come from the day rollup (for a
   * question over the whole range, not per bucket).
   */
  private async split(query: ToolStatsQuery, useRollups: boolean, days = false) {
    const range: TimeRange = { from: query.from.getTime(), to: query.to.getTime() };
    const plan: RangePlan =
      useRollups && this.rollups !== undefined && query.customerRef === undefined
        ? await this.rollups.plan(query.environment, range, days)
        : { days: [], rolled: [], raw: [range] };
    const tenant = 'provider_id = {providerId:String} AND meter_ref = {meterRef:String}';
    const daysIn = inRanges('day', plan.days, 'days', 'toDate');
    const rolledIn = inRanges('slot', plan.rolled, 'rolled');
    const rawIn = inRanges('timestamp', plan.raw, 'raw');
    const rawTable = `${this.database}.${TABLES[query.environment]}`;
    const rawWhere = `${tenant} AND ${rawIn.sql}${query.customerRef === undefined ? '' : ' AND customer_ref = {customerRef:String}'}`;
    /**
     * The raw records of the rest (with `also`, those of them that meet it too), each counted
     * once: beside rolled slots the rest is recent or small, found in the newest parts; alone
     * (one customer, by customer, nothing rolled) it is the whole range, where FINAL over the
     * customer-sorted table is the cheaper read.
     */
    const rawOf = (also?: string) => {
      if (plan.raw.length === 0) return undefined;
      const where = also === undefined ? rawWhere : `${rawWhere} AND ${also}`;
      return plan.rolled.length + plan.days.length > 0
        ? lastCopies(rawTable, where)
        : `(SELECT * FROM ${rawTable} FINAL WHERE ${where})`;
    };
    const tables = ROLLUP_TABLES[query.environment];
    // Days and rolled slots together, as slots: for the per-slot tables where days are whole slots.
    const coveredIn = inRanges('slot', [...plan.days, ...plan.rolled], 'covered');
    return {
      days: plan.days.length > 0 ? `${tenant} AND ${daysIn.sql}` : undefined,
      rolled: plan.rolled.length > 0 ? `${tenant} AND ${rolledIn.sql}` : undefined,
      covered: plan.rolled.length + plan.days.length > 0 ? `${tenant} AND ${coveredIn.sql}` : undefined,
      raw: rawOf(),
      rawOf,
      params: {
        providerId: query.providerId,
        meterRef: query.meterRef,
        ...(query.customerRef === undefined ? {} : { customerRef: query.customerRef }),
        ...daysIn.params,
        ...rolledIn.params,
        ...coveredIn.params,
        ...rawIn.params,
      },
      tables: {
        rollup: `${this.database}.${tables.rollup}`,
        groups: `${this.database}.${tables.groups}`,
        totals: `${this.database}.${tables.totals}`,
        paywalls: `${this.database}.${tables.paywalls}`,
        days: `${this.database}.${tables.days}`,
        customers: `${this.database}.${tables.customers}`,
        customerSlots: `${this.database}.${tables.customerSlots}`,
        customerDays: `${this.database}.${tables.customerDays}`,
      },
    };
  }

  /** The parts' SELECTs as one UNION ALL ('' when there are none) (at least one part is always there). */
  private static union(parts: readonly (string | false)[]): string {
    return parts.filter((p): p is string => p !== false).join('\n UNION ALL \n');
  }

  async series(query: UsageSeriesQuery): Promise<UsageSeriesRow[]> {
    // By customer the call-shape rollup has no answer: the raw records give it (topCustomers
    // is the question the API asks by customer).
    const part = await this.split(query, query.groupBy !== 'customer');
    const inner = ClickHouseUsageAnalytics.union([
      part.covered !== undefined &&
        query.groupBy !== 'customer' &&
        ClickHouseUsageAnalytics.coveredSeries(query, part, query.groupBy),
      part.raw !== undefined &&
        `SELECT ${bucketOf(query.grain, 'timestamp')} AS bucket, ${RECORD_GROUP[query.groupBy]} AS key,
                toUInt64(1) AS calls, value AS units, toUInt64(${IS_ERROR}) AS errors
           FROM ${part.raw}`,
    ]);
    const rows = await this.rows<SeriesRow>(
      `SELECT bucket, key, sum(calls) AS calls, toString(sum(units)) AS units, sum(errors) AS errors
         FROM (${inner}) GROUP BY bucket, key ORDER BY bucket, key`,
      { ...part.params, timeZone: query.timeZone },
    );
    return rows.map(seriesRow);
  }

  /**
   * The rows (bucket, key, calls, units, errors) of the slots the rollups cover: without a
   * grouping from the per-slot totals (a row a slot), else from the groups rollup's rows of
   * that grouping (its name from a closed list).
   */
  private static coveredSeries(
    query: UsageSeriesQuery,
    part: Split,
    groupBy: Exclude<UsageSeriesQuery['groupBy'], 'customer'>,
  ): string {
    // The grouping's name goes into the text only once found in the closed list.
    if (groupBy !== 'none' && !Object.hasOwn(ROLLUP_GROUPINGS, groupBy))
      throw new Error(`no rollup grouping ${groupBy}`);
    const [key, from] =
      groupBy === 'none'
        ? ["''", `${part.tables.totals} FINAL WHERE ${part.covered}`]
        : ['key', `${part.tables.groups} FINAL WHERE dimension = '${groupBy}' AND ${part.covered}`];
    return `SELECT ${bucketOf(query.grain, 'slot')} AS bucket, ${key} AS key, calls, units, errors
              FROM (SELECT * FROM ${from}) WHERE calls > 0`;
  }

  /**
   * By customer, without reading every customer's every slot: each customer's calls over the range
   * (a row a day from the day rollup, slots at the ends, raw records for the rest), the first
   * `limit` of them bucket by bucket, and the whole range's buckets for the rest. The raw records
   * are read once for the ranking and the whole range, and again only for the customers shown.
   */
  async topCustomers(query: UsageSeriesQuery, limit: number): Promise<TopCustomers> {
    const part = await this.split(query, true, true);
    const params = { ...part.params, timeZone: query.timeZone };
    // The whole range by bucket (rolled slots a row each, then the raw records), and the raw
    // records' calls by customer, in one read of them: the rolled rows have no customer (NULL).
    const wholeAndRaw = this.rows<SeriesRow & { byCustomer: number }>(
      `SELECT grouping(customer) = 0 AS byCustomer, bucket, ifNull(customer, '') AS key, sum(calls) AS calls,
              toString(sum(units)) AS units, sum(errors) AS errors
         FROM (${ClickHouseUsageAnalytics.union([
           part.covered !== undefined &&
             `SELECT bucket, CAST(NULL, 'Nullable(String)') AS customer, calls, units, errors
                FROM (${ClickHouseUsageAnalytics.coveredSeries({ ...query, groupBy: 'none' }, part, 'none')})`,
           part.raw !== undefined &&
             `SELECT ${bucketOf(query.grain, 'timestamp')} AS bucket, toNullable(customer_ref) AS customer,
                     toUInt64(1) AS calls, value AS units, toUInt64(${IS_ERROR}) AS errors
                FROM ${part.raw}`,
         ])})
        GROUP BY GROUPING SETS ((bucket), (customer))
       HAVING byCustomer = 0 OR customer IS NOT NULL
        ORDER BY byCustomer, bucket, key`,
      params,
      { force_grouping_standard_compatibility: 1 },
    );
    // Each customer's calls in the rolled part: a row a day and customer, slots at the ends,
    // from the rollup by customer sorted by slot (only the ends' rows are read). As PREWHERE,
    // the slots are picked before FINAL collapses versions, not after it has merged the
    // partition; exact, as the condition is on sorting-key columns, which every version of a
    // row shares.
    const rolled = ClickHouseUsageAnalytics.union([
      part.days !== undefined &&
        `SELECT customer_ref AS key, calls
           FROM (SELECT * FROM ${part.tables.customerDays} FINAL WHERE ${part.days}) WHERE calls > 0`,
      part.rolled !== undefined &&
        `SELECT customer_ref AS key, calls
           FROM (SELECT * FROM ${part.tables.customerSlots} FINAL PREWHERE ${part.rolled}) WHERE calls > 0`,
    ]);
    const [both, rolledTotals] = await Promise.all([
      wholeAndRaw,
      rolled === ''
        ? []
        : this.rows<{ key: string; calls: string }>(
            `SELECT key, sum(calls) AS calls FROM (${rolled}) GROUP BY key`,
            params,
          ),
    ]);
    const calls = new Map<string, number>();
    for (const t of rolledTotals) calls.set(t.key, Number(t.calls));
    for (const r of both)
      if (Number(r.byCustomer) === 1) calls.set(r.key, (calls.get(r.key) ?? 0) + Number(r.calls));
    // Ranked here, as the API ranks every grouping: most calls first, then the lesser ref.
    const ranked = [...calls.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const top = ranked.slice(0, limit).map(([key]) => key);
    // The customers shown, bucket by bucket: their rolled slots and their raw records (the raw
    // table is sorted by customer, so only their parts of it are read).
    const topRaw = part.rawOf('customer_ref IN {top:Array(String)}');
    const rows =
      top.length === 0
        ? []
        : await this.rows<SeriesRow>(
            `SELECT bucket, key, sum(calls) AS calls, toString(sum(units)) AS units, sum(errors) AS errors
               FROM (${ClickHouseUsageAnalytics.union([
                 part.covered !== undefined &&
                   `SELECT ${bucketOf(query.grain, 'slot')} AS bucket, customer_ref AS key, calls, units, errors
                      FROM (SELECT * FROM ${part.tables.customers} FINAL
                             WHERE ${part.covered} AND customer_ref IN {top:Array(String)})
                     WHERE calls > 0`,
                 topRaw !== undefined &&
                   `SELECT ${bucketOf(query.grain, 'timestamp')} AS bucket, customer_ref AS key,
                           toUInt64(1) AS calls, value AS units, toUInt64(${IS_ERROR}) AS errors
                      FROM ${topRaw}`,
               ])}) GROUP BY bucket, key ORDER BY bucket, key`,
            { ...params, top },
          );
    return {
      rows: rows.map(seriesRow),
      totals: both.filter((r) => Number(r.byCustomer) === 0).map(seriesRow),
      customers: ranked.length,
    };
  }

  async toolStats(query: ToolStatsQuery): Promise<ToolStats[]> {
    const part = await this.split(query, true, true);
    const inner = ClickHouseUsageAnalytics.union([
      part.days !== undefined &&
        `SELECT tool, server, calls, errors, latency
           FROM (SELECT * FROM ${part.tables.days} FINAL WHERE ${part.days}) WHERE calls > 0`,
      part.rolled !== undefined &&
        `SELECT tool, server, calls, errors, latency
           FROM (SELECT * FROM ${part.tables.rollup} FINAL WHERE ${part.rolled}) WHERE calls > 0 AND tool != ''`,
      part.raw !== undefined &&
        `SELECT ${TOOL} AS tool, ${SERVER} AS server, toUInt64(1) AS calls, toUInt64(${IS_ERROR}) AS errors,
                if(${HAS_LATENCY}, map(${LATENCY_BUCKET}, toUInt64(1)), map()) AS latency
           FROM ${part.raw} WHERE ${TOOL} != ''`,
    ]);
    const rows = await this.rows<{
      tool: string;
      server: string;
      calls: string;
      errors: string;
      latency: Record<string, string | number>;
    }>(
      `SELECT tool, server, sum(calls) AS calls, sum(errors) AS errors, sumMap(latency) AS latency
         FROM (${inner}) GROUP BY tool, server ORDER BY calls DESC, tool, server`,
      part.params,
    );
    return rows.map((r) => {
      const p = percentilesOf(r.latency, [0.5, 0.95, 0.99]);
      return {
        tool: r.tool,
        server: r.server,
        calls: Number(r.calls),
        errors: Number(r.errors),
        latencyMs: p === null ? null : { p50: p[0] ?? 0, p95: p[1] ?? 0, p99: p[2] ?? 0 },
      };
    });
  }

  async paywalls(query: ToolStatsQuery): Promise<PaywallShownRow[]> {
    const part = await this.split(query, true);
    const inner = ClickHouseUsageAnalytics.union([
      part.rolled !== undefined &&
        `SELECT form, era, session, product, shown, first
           FROM (SELECT * FROM ${part.tables.paywalls} FINAL WHERE ${part.rolled}) WHERE shown > 0`,
      part.raw !== undefined &&
        `SELECT ${PAYWALL_FORM} AS form, ${PAYWALL_ERA} AS era, ${PAYWALL_SESSION} AS session,
                ${PRODUCT} AS product, toUInt64(1) AS shown, timestamp AS first
           FROM ${part.raw} WHERE ${IS_PAYWALL}`,
    ]);
    const rows = await this.rows<{
      form: string;
      era: string;
      session: string;
      product: string;
      shown: string;
      first: string;
    }>(
      `SELECT toString(form) AS form, toString(era) AS era, session, product, sum(shown) AS shown,
              toUnixTimestamp64Milli(min(first)) AS first
         FROM (${inner}) GROUP BY form, era, session, product ORDER BY form, era, session, product`,
      part.params,
    );
    return rows.map((r) => ({
      form: r.form,
      era: r.era,
      checkoutSessionId: r.session,
      productId: r.product,
      shown: Number(r.shown),
      firstShownMs: Number(r.first),
    }));
  }
}
