import type { Environment } from '../usage-record';

/**
 * Usage analytics (issue 63): calls and units over time in a provider's time zone, grouped by a
 * dimension of the call, and per-tool error rates and origin latency. Read exactly from the
 * usage records (the same rows billing reads, duplicates collapsed); the ClickHouse
 * implementation lives in ingest.
 */

/**
 * Analytics count whole 15-minute slots, the unit the usage rollups hold: every time zone's hours
 * and days are whole slots, and a range is widened to the slots that hold its ends. The control
 * plane snaps ranges to it, ingest rolls by it (its SQL floors with toStartOfFifteenMinutes: the
 * two change together), the console ends its ranges on it.
 */
export const ANALYTICS_SLOT_MS = 15 * 60_000;

export const ANALYTICS_GRAINS = ['hour', 'day', 'week', 'month'] as const;
export type AnalyticsGrain = (typeof ANALYTICS_GRAINS)[number];
export const ANALYTICS_GROUPS = ['none', 'tool', 'customer', 'product', 'plan', 'server', 'outcome'] as const;
export type AnalyticsGroup = (typeof ANALYTICS_GROUPS)[number];
/**
 * What the usage API groups by: the store's groupings, and the environment, which the API answers
 * by asking the store once per environment the caller may read (the tables are per environment).
 */
export const USAGE_GROUPINGS = [...ANALYTICS_GROUPS, 'environment'] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

/**
 * What a call came to, as analytics groups it: `success`, `error` (the tool's error, the
 * origin's, or no origin), `paywall` (refused for payment), `cancelled` (the client left),
 * `input_required` (a round that asked for input), `task` (a task started).
 */
export const ANALYTICS_OUTCOMES = [
  'success',
  'error',
  'paywall',
  'cancelled',
  'input_required',
  'task',
] as const;

export interface UsageSeriesQuery {
  providerId: string;
  environment: Environment;
  meterRef: string;
  from: Date;
  to: Date;
  grain: AnalyticsGrain;
  /** An IANA time zone the caller has checked. */
  timeZone: string;
  groupBy: AnalyticsGroup;
  customerRef?: string | undefined;
}

/** One bucket of one group: its start (a local date, or an instant for hours) and what it held. */
export interface UsageSeriesRow {
  /** `YYYY-MM-DD` (day, week from Monday, month from the 1st) or Unix seconds of the hour. */
  bucket: string;
  /** The group's value ('' for none, or a call that has no such dimension). */
  key: string;
  calls: number;
  /** The meter's values summed exactly, as a decimal string. */
  units: string;
  errors: number;
}

export interface ToolStatsQuery {
  providerId: string;
  environment: Environment;
  meterRef: string;
  from: Date;
  to: Date;
  customerRef?: string | undefined;
}

export interface ToolStats {
  tool: string;
  server: string;
  calls: number;
  errors: number;
  /** Origin latency in ms over the calls that reached the origin; null when none did. */
  latencyMs: { p50: number; p95: number; p99: number } | null;
}

/** Paywalls shown, by how and which checkout they offered (one row per form, era, session, product). */
export interface PaywallShownRow {
  /** url_elicitation, error_32042 or text_link; '' for records made before forms were recorded. */
  form: string;
  /** modern or legacy; '' likewise. */
  era: string;
  /** The checkout session offered; '' when none was. */
  checkoutSessionId: string;
  productId: string;
  /** Calls the paywall answered. */
  shown: number;
  /** When it was first shown (ms since the epoch). */
  firstShownMs: number;
}

/** Usage by customer: the customers with the most calls, and the whole range to set them against. */
export interface TopCustomers {
  /** Rows (bucket, customer) of the `limit` customers with the most calls (ties: the lesser ref). */
  rows: UsageSeriesRow[];
  /** Rows (bucket, '') of every call in the range: the other customers' are these less the rows above. */
  totals: UsageSeriesRow[];
  /** How many customers had calls in the range. */
  customers: number;
}

export interface UsageAnalytics {
  series(query: UsageSeriesQuery): Promise<UsageSeriesRow[]>;
  /** `groupBy` is taken as customer. */
  topCustomers(query: UsageSeriesQuery, limit: number): Promise<TopCustomers>;
  toolStats(query: ToolStatsQuery): Promise<ToolStats[]>;
  paywalls(query: ToolStatsQuery): Promise<PaywallShownRow[]>;
}
