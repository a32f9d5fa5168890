import type {
  AnalyticsGroup,
  PaywallShownRow,
  ToolStats,
  ToolStatsQuery,
  UsageAnalytics,
  UsageSeriesQuery,
  UsageSeriesRow,
} from '@mcp-meter/contracts/usage';
import type { ClickHouse } from './clickhouse/client';
import { TABLES } from './usage-store';

/** A call's outcome as analytics names it (see ANALYTICS_OUTCOMES); records reported through the API are `reported`. */
const OUTCOME = `multiIf(
    JSONExtractBool(properties, 'cancelled'), 'cancelled',
    JSONExtractString(properties, 'outcome') IN ('error', 'upstream_error', 'unavailable'), 'error',
    JSONExtractString(properties, 'outcome') = '', 'reported',
    JSONExtractString(properties, 'outcome'))`;

const IS_ERROR = `JSONExtractString(properties, 'outcome') IN ('error', 'upstream_error', 'unavailable')`;

/** The group's column, from a closed set: no caller string reaches the query's text. */
const GROUP_KEY: Readonly<Record<AnalyticsGroup, string>> = {
  none: "''",
  tool: "JSONExtractString(properties, 'tool')",
  customer: 'customer_ref',
  product: "JSONExtractString(properties, 'productId')",
  server: "JSONExtractString(properties, 'server')",
  outcome: OUTCOME,
};

/**
 * The bucket of a record in the caller's time zone: the local date that starts its day, its
 * week (from Monday) or its month, or the instant (Unix seconds) that starts its local hour.
 */
const BUCKET: Readonly<Record<UsageSeriesQuery['grain'], string>> = {
  // The instant less the local clock's minutes and seconds: the same rule as the console's
  // calendar (control-plane analytics/calendar.ts), so a zone at a half-hour offset buckets alike.
  hour: 'toString(toUnixTimestamp(timestamp) - toMinute(timestamp, {timeZone:String}) * 60 - toSecond(timestamp, {timeZone:String}))',
  day: 'toString(toDate(timestamp, {timeZone:String}))',
  week: 'toString(toMonday(toDate(timestamp, {timeZone:String})))',
  month: 'toString(toStartOfMonth(toDate(timestamp, {timeZone:String})))',
};

/**
 * Usage analytics read from the raw usage records with FINAL, so every figure is exact and
 * counts a record sent twice once, as billing does.
 */
export class ClickHouseUsageAnalytics implements UsageAnalytics {
  constructor(
    private readonly clickhouse: ClickHouse,
    private readonly database: string,
  ) {}

  private async rows<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const result = await this.clickhouse.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return result.json<T>();
  }

  private scope(query: ToolStatsQuery): { where: string; params: Record<string, unknown> } {
    return {
      where: `provider_id = {providerId:String}
        AND meter_ref = {meterRef:String}
        AND timestamp >= fromUnixTimestamp64Milli({fromMs:Int64}, 'UTC')
        AND timestamp < fromUnixTimestamp64Milli({toMs:Int64}, 'UTC')
        ${query.customerRef === undefined ? '' : 'AND customer_ref = {customerRef:String}'}`,
      params: {
        providerId: query.providerId,
        meterRef: query.meterRef,
        fromMs: query.from.getTime(),
        toMs: query.to.getTime(),
        ...(query.customerRef === undefined ? {} : { customerRef: query.customerRef }),
      },
    };
  }

  async series(query: UsageSeriesQuery): Promise<UsageSeriesRow[]> {
    const { where, params } = this.scope(query);
    const rows = await this.rows<{
      bucket: string;
      key: string;
      calls: string;
      units: string;
      errors: string;
    }>(
      `SELECT ${BUCKET[query.grain]} AS bucket, ${GROUP_KEY[query.groupBy]} AS key,
              count() AS calls, toString(sum(value)) AS units, countIf(${IS_ERROR}) AS errors
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${where}
        GROUP BY bucket, key ORDER BY bucket, key`,
      { ...params, timeZone: query.timeZone },
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
    const { where, params } = this.scope(query);
    const rows = await this.rows<{
      tool: string;
      server: string;
      calls: string;
      errors: string;
      timed: string;
      p: number[];
    }>(
      `SELECT JSONExtractString(properties, 'tool') AS tool, JSONExtractString(properties, 'server') AS server,
              count() AS calls, countIf(${IS_ERROR}) AS errors,
              countIf(JSONHas(properties, 'latencyMs')) AS timed,
              quantilesExactIf(0.5, 0.95, 0.99)(JSONExtractFloat(properties, 'latencyMs'), JSONHas(properties, 'latencyMs')) AS p
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${where} AND JSONHas(properties, 'tool')
        GROUP BY tool, server ORDER BY calls DESC, tool, server`,
      params,
    );
    return rows.map((r) => ({
      tool: r.tool,
      server: r.server,
      calls: Number(r.calls),
      errors: Number(r.errors),
      latencyMs:
        Number(r.timed) === 0 ? null : { p50: Number(r.p[0]), p95: Number(r.p[1]), p99: Number(r.p[2]) },
    }));
  }

  async paywalls(query: ToolStatsQuery): Promise<PaywallShownRow[]> {
    const { where, params } = this.scope(query);
    const rows = await this.rows<{
      form: string;
      era: string;
      session: string;
      product: string;
      shown: string;
      first: string;
    }>(
      `SELECT JSONExtractString(properties, 'paywall') AS form, JSONExtractString(properties, 'paywallEra') AS era,
              JSONExtractString(properties, 'checkoutSessionId') AS session,
              JSONExtractString(properties, 'productId') AS product,
              count() AS shown, toUnixTimestamp64Milli(min(timestamp)) AS first
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${where} AND JSONExtractString(properties, 'outcome') = 'paywall'
        GROUP BY form, era, session, product ORDER BY form, era, session, product`,
      params,
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
