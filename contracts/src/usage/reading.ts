import type { Environment } from '../usage-record';

/**
 * The read side of usage, as its users see it: how a meter aggregates, the queries the usage
 * store answers (the control plane's usage API, limit checks, billing), and the calendar buckets
 * of a usage series. The ClickHouse implementation lives in ingest.
 */

export const AGGREGATIONS = ['sum', 'count', 'max', 'unique_count'] as const;
export type Aggregation = (typeof AGGREGATIONS)[number];
export const GRANULARITIES = ['hour', 'day', 'week', 'month'] as const;
export type Granularity = (typeof GRANULARITIES)[number];

/** How a meter turns records into one number; `valueProperty` names the property unique_count counts. */
export interface MeterAggregation {
  aggregation: Aggregation;
  valueProperty?: string | null | undefined;
  /**
   * Aggregate only billable records (the requests meter): not the calls the proxy refused
   * (`refused`, or the paywall's outcome) nor a multi-round call's rounds that asked for input.
   * `records` and groupings still count every record.
   */
  billableOnly?: boolean | undefined;
}

export interface UsageScope {
  providerId: string;
  environment: Environment;
  meterRef: string;
  customerRef?: string | undefined;
  from: Date;
  to: Date;
}

export interface UsageTotalQuery extends UsageScope {
  meter?: MeterAggregation | undefined;
}

export interface UsageTotal {
  /** The aggregation as a JSON number: beyond about 15 significant digits, the nearest double. */
  total: number;
  /** The same, exactly: ClickHouse's Decimal(38, 9) in plain decimal form ("12.5", "0"). */
  totalDecimal: string;
  records: number;
}

/**
 * ClickHouse's text of a Decimal ("12.500000000", "-0.000000001", "7") in plain form without
 * trailing zeros ("12.5"): what `totalDecimal` carries. Anything else is not a total and throws.
 */
export function decimalText(text: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text);
  if (match === null) throw new Error(`not a decimal total: ${JSON.stringify(text.slice(0, 40))}`);
  const whole = match[2]?.replace(/^0+(?=\d)/, '') ?? '0';
  const fraction = (match[3] ?? '').replace(/0+$/, '');
  const zero = whole === '0' && fraction === '';
  return `${zero ? '' : (match[1] ?? '')}${whole}${fraction === '' ? '' : `.${fraction}`}`;
}

export interface UsageBucket extends UsageTotal {
  start: string;
}

export interface CustomerUsage extends UsageTotal {
  customerRef: string;
}

export interface DailyStats {
  date: string;
  records: number;
  customers: number;
  meters: number;
}

/** Read side used by the control plane: usage queries, limit checks, billing and analytics. */
/**
 * What a limit counter starts from: `used` as `limitUsage` counts it, and the billionths of a unit
 * the reported usage's exact sum holds past its whole units (0 to 999,999,999), which `used`
 * already counts as one whole unit: the next reported fraction completes it before a new unit counts.
 */
export interface LimitCount {
  used: number;
  fractionNanos: number;
}

export interface UsageReader {
  total(query: UsageTotalQuery): Promise<UsageTotal>;
  buckets(query: UsageTotalQuery & { granularity: Granularity }): Promise<UsageBucket[]>;
  byCustomer(query: UsageTotalQuery & { limit: number }): Promise<CustomerUsage[]>;
  daily(query: {
    providerId: string;
    environment: Environment;
    from: Date;
    to: Date;
    /** One customer's days only (their id). */
    customerRef?: string | undefined;
  }): Promise<DailyStats[]>;
  /**
   * What a usage limit has counted for one customer and product in [from, to), the start of a
   * limit counter: calls the proxy or the SDK limit check admitted (`admitted: true` and this
   * `productId`, one each), plus usage reported through the usage API (records without
   * `admitted` and without the proxy's `server` or the limit check's `source`), whose values
   * count for this product when they name it as `productId` or name no product: their exact
   * sum rounded up once (reported-units.ts).
   */
  limitUsage(query: UsageScope & { customerRef: string; productId: string }): Promise<number>;
  /** `limitUsage` with the reported sum's fractional part: the start of a running limit counter. */
  limitCount(query: UsageScope & { customerRef: string; productId: string }): Promise<LimitCount>;
  /**
   * Credits spent by calls on the requests meter (the `credits` the proxy or the SDK limit check
   * wrote on each admitted call of a credit-paid plan), per customer, over all time: what a credit
   * counter starts from and what usage settlement debits up to. `customerRef` narrows to one,
   * `productId` to the calls of one product, `from` and `to` to record times in [from, to).
   */
  creditUsage(query: {
    providerId: string;
    environment: Environment;
    meterRef: string;
    customerRef?: string | undefined;
    productId?: string | undefined;
    from?: Date | undefined;
    to?: Date | undefined;
  }): Promise<Map<string, { credits: number; calls: number }>>;
  /** Record counts grouped by one string property (e.g. `server` on the requests meter). */
  countByProperty(query: UsageScope & { property: string }): Promise<Map<string, number>>;
}

/** Start of the bucket holding `date`, in UTC. */
export function bucketStart(date: Date, granularity: Granularity): Date {
  const d = new Date(date.getTime());
  switch (granularity) {
    case 'hour':
      d.setUTCMinutes(0, 0, 0);
      return d;
    case 'day':
      d.setUTCHours(0, 0, 0, 0);
      return d;
    case 'week': {
      d.setUTCHours(0, 0, 0, 0);
      d.setUTCDate(d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
      return d;
    }
    case 'month':
      return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));
  }
}

export function nextBucket(start: Date, granularity: Granularity): Date {
  const d = new Date(start.getTime());
  if (granularity === 'hour') d.setUTCHours(d.getUTCHours() + 1);
  else if (granularity === 'day') d.setUTCDate(d.getUTCDate() + 1);
  else if (granularity === 'week') d.setUTCDate(d.getUTCDate() + 7);
  else d.setUTCMonth(d.getUTCMonth() + 1);
  return d;
}

/** Buckets overlapping [from, to). */
export function bucketStarts(from: Date, to: Date, granularity: Granularity): Date[] {
  const starts: Date[] = [];
  for (let s = bucketStart(from, granularity); s.getTime() < to.getTime(); s = nextBucket(s, granularity))
    starts.push(s);
  return starts;
}

export function countBuckets(from: Date, to: Date, granularity: Granularity): number {
  const approx: Record<Granularity, number> = {
    hour: 3600e3,
    day: 86400e3,
    week: 7 * 86400e3,
    month: 28 * 86400e3,
  };
  return Math.ceil((to.getTime() - from.getTime()) / approx[granularity]) + 1;
}
