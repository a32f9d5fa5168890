import type {
  PaywallShownRow,
  ToolStats,
  ToolStatsQuery,
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
  ROLLUP_GROUP,
  SERVER,
  TOOL,
} from './analytics/record-sql';
import { rollupTables, type UsageRollups } from './analytics/rollups';
import type { RangePlan, TimeRange } from './analytics/slots';
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

  private async rows<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const result = await this.clickhouse.client.query({ query, query_params: params, format: 'JSONEachRow' });
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
    const tables = rollupTables(query.environment);
    return {
      days: plan.days.length > 0 ? `${tenant} AND ${daysIn.sql}` : undefined,
      rolled: plan.rolled.length > 0 ? `${tenant} AND ${rolledIn.sql}` : undefined,
      /**
       * The raw records of the rest, each counted once: beside rolled slots the rest is recent
       * or small, found in the newest parts; alone (one customer, by customer, nothing rolled)
       * it is the whole range, where FINAL over the customer-sorted table is the cheaper read.
       */
      raw:
        plan.raw.length === 0
          ? undefined
          : plan.rolled.length + plan.days.length > 0
            ? lastCopies(rawTable, rawWhere)
            : `(SELECT * FROM ${rawTable} FINAL WHERE ${rawWhere})`,
      params: {
        providerId: query.providerId,
        meterRef: query.meterRef,
        ...(query.customerRef === undefined ? {} : { customerRef: query.customerRef }),
        ...daysIn.params,
        ...rolledIn.params,
        ...rawIn.params,
      },
      tables: {
        rollup: `${this.database}.${tables.rollup}`,
        paywalls: `${this.database}.${tables.paywalls}`,
        days: `${this.database}.${tables.days}`,
      },
    };
  }

  /** The parts' SELECTs as one UNION ALL (at least one part is always there). */
  private static union(parts: readonly (string | false)[]): string {
    return parts.filter((p): p is string => p !== false).join('\n UNION ALL \n');
  }

  async series(query: UsageSeriesQuery): Promise<UsageSeriesRow[]> {
    // By customer the rollups have no answer (they hold no customer): the raw records give it.
    const rollupKey = query.groupBy === 'customer' ? undefined : ROLLUP_GROUP[query.groupBy];
    const part = await this.split(query, rollupKey !== undefined);
    const inner = ClickHouseUsageAnalytics.union([
      part.rolled !== undefined &&
        `SELECT ${bucketOf(query.grain, 'slot')} AS bucket, ${rollupKey} AS key, calls, units, errors
           FROM (SELECT * FROM ${part.tables.rollup} FINAL WHERE ${part.rolled}) WHERE calls > 0`,
      part.raw !== undefined &&
        `SELECT ${bucketOf(query.grain, 'timestamp')} AS bucket, ${RECORD_GROUP[query.groupBy]} AS key,
                toUInt64(1) AS calls, value AS units, toUInt64(${IS_ERROR}) AS errors
           FROM ${part.raw}`,
    ]);
    const rows = await this.rows<{
      bucket: string;
      key: string;
      calls: string;
      units: string;
      errors: string;
    }>(
      `SELECT bucket, key, sum(calls) AS calls, toString(sum(units)) AS units, sum(errors) AS errors
         FROM (${inner}) GROUP BY bucket, key ORDER BY bucket, key`,
      { ...part.params, timeZone: query.timeZone },
    );
    return rows.map((r) => ({
      bucket: r.bucket,
      key: r.key,
      calls: Number(r.calls),
      units: r.units,
      errors: Number(r.errors),
    }));
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
