import type { AnalyticsGroup } from '@mcp-meter/contracts/usage';
import { latencyBucketSql } from './latency';
import type { TimeRange } from './slots';

/**
 * What analytics reads of a raw usage record, as SQL over its columns: the same expressions build
 * the rollups and answer the slots the rollups do not hold, so both give one answer.
 */

/** A call's outcome as analytics names it (see ANALYTICS_OUTCOMES); records reported through the API are `reported`. */
export const OUTCOME = `multiIf(
    JSONExtractBool(properties, 'cancelled'), 'cancelled',
    JSONExtractString(properties, 'outcome') IN ('error', 'upstream_error', 'unavailable'), 'error',
    JSONExtractString(properties, 'outcome') = '', 'reported',
    JSONExtractString(properties, 'outcome'))`;

export const IS_ERROR = `JSONExtractString(properties, 'outcome') IN ('error', 'upstream_error', 'unavailable')`;
export const TOOL = "JSONExtractString(properties, 'tool')";
export const SERVER = "JSONExtractString(properties, 'server')";
export const PRODUCT = "JSONExtractString(properties, 'productId')";
/** The plan the call was judged by ('' for calls recorded before plans were, or without one). */
export const PLAN = "JSONExtractString(properties, 'planId')";
export const HAS_LATENCY = "JSONHas(properties, 'latencyMs')";
export const LATENCY_BUCKET = latencyBucketSql("JSONExtractFloat(properties, 'latencyMs')");
export const IS_PAYWALL = "JSONExtractString(properties, 'outcome') = 'paywall'";
export const PAYWALL_FORM = "JSONExtractString(properties, 'paywall')";
export const PAYWALL_ERA = "JSONExtractString(properties, 'paywallEra')";
export const PAYWALL_SESSION = "JSONExtractString(properties, 'checkoutSessionId')";

/** A record's group, from a closed set: no caller string reaches the query's text. */
export const RECORD_GROUP: Readonly<Record<AnalyticsGroup, string>> = {
  none: "''",
  tool: TOOL,
  customer: 'customer_ref',
  product: PRODUCT,
  plan: PLAN,
  server: SERVER,
  outcome: OUTCOME,
};

/**
 * The groupings the groups rollup keeps per slot, each a record's value (none reads the per-slot
 * totals; by customer, the customer rollups).
 */
export const ROLLUP_GROUPINGS: Readonly<Record<Exclude<AnalyticsGroup, 'customer' | 'none'>, string>> = {
  tool: TOOL,
  product: PRODUCT,
  plan: PLAN,
  server: SERVER,
  outcome: OUTCOME,
};

/** The identity of a record: the raw tables' sorting key, which FINAL deduplicates on. */
const IDENTITY = 'provider_id, meter_ref, customer_ref, id';

/**
 * The rows `table FINAL WHERE where` would give, read without FINAL: FINAL merges every part of
 * a month partition to find each record's last copy (seconds at ten million rows), while a
 * window's rows sit in a few parts. The copies of the window's records written since the
 * earliest of them (the `ingested_at` skip index leaves older parts unread), of which each
 * record's newest is kept if it is in the window. A copy of a record that is not in the window
 * but was written before its newest copy cannot be its newest, so the result is FINAL's.
 *
 * `elsewhere` says which copies outside the window are read. `any`: every row written since,
 * in one read with the window's: cheapest when that is little more than the window (the open
 * quarter hour, which analytics reads beside the rollups). `given`: the window whole, then of
 * the rows written since only those whose sender chose the id (`id_given`, migration 008): a
 * copy outside the window has another time, which only such a sender can give (every copy the
 * proxy makes of a record has its one time). For a window of old records (a rebuild that late
 * records reached) `any` reads the identity of everything written in the month since; `given`
 * reads one column of it (0.9 s against 0.25 at 10 M records; 4 ms more for the open quarter
 * hour, 20 against 24).
 */
export function lastCopies(table: string, where: string, elsewhere: 'any' | 'given' = 'any'): string {
  const since = `(SELECT ifNull(minOrNull(ingested_at), toDateTime64('2299-12-31 00:00:00', 3, 'UTC'))
                    FROM ${table} WHERE ${where})`;
  const copies =
    elsewhere === 'any'
      ? `SELECT * FROM ${table}
          WHERE ingested_at >= ${since}
            AND (${IDENTITY}) IN (SELECT ${IDENTITY} FROM ${table} WHERE ${where})`
      : `SELECT * FROM ${table} WHERE ${where}
         UNION ALL
         SELECT * FROM ${table}
       PREWHERE id_given AND ingested_at >= ${since}
          WHERE NOT (${where})
            AND (${IDENTITY}) IN (SELECT ${IDENTITY} FROM ${table} WHERE ${where})`;
  return `(SELECT * FROM (
             SELECT * FROM (${copies})
              ORDER BY ingested_at DESC
              LIMIT 1 BY ${IDENTITY})
           WHERE ${where})`;
}

/**
 * `column` inside any of the ranges, with the bounds as named parameters (`prefix0from`, …):
 * the values travel as parameters, the text only names them.
 */
export function inRanges(
  column: string,
  ranges: readonly TimeRange[],
  prefix: string,
  /** How a bound is put to the column: as an instant, or (for a Date column) its UTC date. */
  bound: 'instant' | 'toDate' = 'instant',
): { sql: string; params: Record<string, number> } {
  const params: Record<string, number> = {};
  const at = (name: string) =>
    bound === 'toDate'
      ? `toDate(fromUnixTimestamp64Milli({${name}:Int64}, 'UTC'))`
      : `fromUnixTimestamp64Milli({${name}:Int64}, 'UTC')`;
  const terms = ranges.map((range, i) => {
    params[`${prefix}${i}from`] = range.from;
    params[`${prefix}${i}to`] = range.to;
    return `(${column} >= ${at(`${prefix}${i}from`)} AND ${column} < ${at(`${prefix}${i}to`)})`;
  });
  return { sql: terms.length === 0 ? '0' : `(${terms.join(' OR ')})`, params };
}
