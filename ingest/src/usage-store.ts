import { createHash } from 'node:crypto';
import {
  bucketStarts,
  type CustomerUsage,
  type DailyStats,
  decimalText,
  type Granularity,
  type LimitCount,
  type MeterAggregation,
  splitNanos,
  toNanos,
  type UsageBucket,
  type UsageReader,
  type UsageScope,
  type UsageTotal,
  type UsageTotalQuery,
  unitsRoundedUp,
} from '@mcp-meter/contracts/usage';
import type { Environment, UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { ClickHouse } from './clickhouse/client';

/** The environment picks the table from a closed set; no caller string reaches an identifier. */
export const TABLES: Readonly<Record<Environment, string>> = {
  sandbox: 'usage_records_sandbox',
  live: 'usage_records_live',
};

/** The columns an insert fills, in the order of each row's values (the rest take their defaults). */
const INSERTED_COLUMNS: [string, ...string[]] = [
  'provider_id',
  'meter_ref',
  'meter_name',
  'customer_ref',
  'id',
  'timestamp',
  'value',
  'properties',
];

/**
 * The same with `id_given` (migration 008), which only the single-server tables have: it serves
 * the rollups' looks for moved records, and a cluster keeps no rollups (docs/analytics.md).
 */
const INSERTED_COLUMNS_WITH_ID_GIVEN: [string, ...string[]] = [...INSERTED_COLUMNS, 'id_given'];

/** Write side used by the ingest consumer. Inserts only: no code path updates or deletes a record. */
export interface UsageWriter {
  insert(records: readonly UsageRecord[], dedupeToken?: string): Promise<void>;
}

const BUCKET_START: Readonly<Record<Granularity, string>> = {
  hour: 'toStartOfHour(timestamp)',
  day: 'toStartOfDay(timestamp)',
  // ISO weeks: Monday 00:00 UTC.
  week: 'toMonday(timestamp)',
  month: 'toStartOfMonth(timestamp)',
};

/** A total as read (aggregateExpression's text; none for an empty bucket), as both forms. */
function totalOf(text: string | undefined): { total: number; totalDecimal: string } {
  const totalDecimal = decimalText(text ?? '0');
  return { total: Number(totalDecimal), totalDecimal };
}

/** Only these fixed SQL fragments are ever spliced in; every value travels as a parameter. */
/**
 * A record of the requests meter that is billable: a call that was served (or failed upstream),
 * never one the proxy refused nor a round of a multi-round call that only asked for input.
 */
export const BILLABLE_RECORD = `NOT JSONExtractBool(properties, 'refused')
  AND JSONExtractString(properties, 'outcome') NOT IN ('paywall', 'unavailable', 'input_required')`;

function aggregateExpression(meter: MeterAggregation | undefined): string {
  const only = meter?.billableOnly === true ? BILLABLE_RECORD : '1';
  switch (meter?.aggregation ?? 'sum') {
    case 'sum':
      return `toString(sumIf(value, ${only}))`;
    case 'count':
      return `toString(countIf(${only}))`;
    case 'max':
      return `toString(if(countIf(${only}) = 0, toDecimal128(0, 9), maxIf(value, ${only})))`;
    case 'unique_count':
      return `toString(uniqExactIf(JSONExtractRaw(properties, {valueProperty:String}), JSONHas(properties, {valueProperty:String}) AND ${only}))`;
  }
}

/** What ends or changes a TabSeparated field, and its escape there. */
const TSV_SPECIAL = /[\\\t\n\r\0]/;
const TSV_SPECIALS = /[\\\t\n\r\0]/g;
const TSV_ESCAPES: Readonly<Record<string, string>> = {
  '\\': '\\\\',
  '\t': '\\t',
  '\n': '\\n',
  '\r': '\\r',
  '\0': '\\0',
};

/** A string as one TabSeparated field: most need no escape, and are only scanned. */
function tsvField(text: string): string {
  return TSV_SPECIAL.test(text) ? text.replace(TSV_SPECIALS, (c) => TSV_ESCAPES[c] ?? c) : text;
}

export class ClickHouseUsageStore implements UsageReader, UsageWriter {
  constructor(
    private readonly clickhouse: ClickHouse,
    private readonly database: string,
    /** The tables are distributed over a cluster (CLICKHOUSE_CLUSTER, clickhouse/cluster/). */
    private readonly distributed = false,
  ) {}

  /**
   * One INSERT per environment. `dedupeToken` (from the Kafka offsets of the batch) lets
   * ClickHouse drop an identical block replayed after a crash; the ReplacingMergeTree key and
   * FINAL reads collapse whatever still gets through. Rows go as TabSeparated text, written here
   * in one pass and handed over as bytes: no array per row for a client to turn into JSON, and
   * chdb gets the Buffer itself (about 0.5 µs a record less on the inserting thread than
   * JSONCompactEachRow through the client, measured with chdb in a process doing nothing else).
   */
  async insert(records: readonly UsageRecord[], dedupeToken?: string): Promise<void> {
    for (const environment of Object.keys(TABLES) as Environment[]) {
      // A row a string, joined once: a text grown row by row is a tree of pieces that turning
      // into bytes first flattens (about 330 ns a row against 180 for the join, 6,500 rows).
      const rows: string[] = [];
      for (const r of records) {
        if (r.environment !== environment) continue;
        // The column is UTC; ClickHouse's default text form has no 'T' and no zone suffix.
        const timestamp = tsvField(r.timestamp.replace('T', ' ').replace('Z', ''));
        const idGiven = this.distributed ? '' : r.idGiven === true ? '\ttrue' : '\tfalse';
        rows.push(
          `${tsvField(r.providerId)}\t${tsvField(r.meterRef)}\t${tsvField(r.meterName)}\t${tsvField(r.customerRef)}\t${tsvField(r.id)}\t${timestamp}\t${r.value}\t${tsvField(JSON.stringify(r.properties))}${idGiven}\n`,
        );
      }
      if (rows.length === 0) continue;
      await this.clickhouse.insertText({
        table: `${this.database}.${TABLES[environment]}`,
        columns: this.distributed ? INSERTED_COLUMNS : INSERTED_COLUMNS_WITH_ID_GIVEN,
        body: Buffer.from(rows.join('')),
        // Empty when there is none: a token is for this insert alone.
        settings: {
          insert_deduplication_token: dedupeToken === undefined ? '' : `${dedupeToken}:${environment}`,
          // On a cluster the insert returns once every shard has its rows, not when they are
          // queued on this node: a batch is acknowledged to Kafka only when it is stored.
          ...(this.distributed ? { insert_distributed_sync: '1' } : {}),
        },
      });
    }
  }

  private where(query: UsageScope): string {
    return `provider_id = {providerId:String}
        AND meter_ref = {meterRef:String}
        AND timestamp >= fromUnixTimestamp64Milli({fromMs:Int64}, 'UTC')
        AND timestamp < fromUnixTimestamp64Milli({toMs:Int64}, 'UTC')
        ${query.customerRef === undefined ? '' : 'AND customer_ref = {customerRef:String}'}`;
  }

  private params(query: UsageTotalQuery): Record<string, unknown> {
    return {
      providerId: query.providerId,
      meterRef: query.meterRef,
      customerRef: query.customerRef,
      fromMs: query.from.getTime(),
      toMs: query.to.getTime(),
      valueProperty: query.meter?.valueProperty ?? '',
    };
  }

  private async rows<T>(query: string, params: Record<string, unknown>): Promise<T[]> {
    const result = await this.clickhouse.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return result.json<T>();
  }

  async total(query: UsageTotalQuery): Promise<UsageTotal> {
    const [row] = await this.rows<{ total: string; records: string | number }>(
      `SELECT ${aggregateExpression(query.meter)} AS total, count() AS records
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${this.where(query)}`,
      this.params(query),
    );
    return { ...totalOf(row?.total), records: Number(row?.records ?? 0) };
  }

  async buckets(query: UsageTotalQuery & { granularity: Granularity }): Promise<UsageBucket[]> {
    const rows = await this.rows<{ start: string | number; total: string; records: string | number }>(
      `SELECT toUnixTimestamp(toDateTime(${BUCKET_START[query.granularity]}, 'UTC')) AS start,
              ${aggregateExpression(query.meter)} AS total, count() AS records
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${this.where(query)}
        GROUP BY start ORDER BY start`,
      this.params(query),
    );
    const found = new Map(rows.map((r) => [Number(r.start) * 1000, r]));
    // Every bucket of the range is present, empty ones as zero, so a chart never has holes.
    return bucketStarts(query.from, query.to, query.granularity).map((start) => {
      const row = found.get(start.getTime());
      return {
        start: start.toISOString(),
        ...totalOf(row?.total),
        records: Number(row?.records ?? 0),
      };
    });
  }

  async byCustomer(query: UsageTotalQuery & { limit: number }): Promise<CustomerUsage[]> {
    const rows = await this.rows<{ customer_ref: string; total: string; records: string | number }>(
      `SELECT customer_ref, ${aggregateExpression(query.meter)} AS total, count() AS records
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${this.where(query)}
        GROUP BY customer_ref
        ORDER BY toDecimal128(total, 9) DESC, customer_ref
        LIMIT {limit:UInt32}`,
      { ...this.params(query), limit: query.limit },
    );
    return rows.map((r) => ({
      customerRef: r.customer_ref,
      ...totalOf(r.total),
      records: Number(r.records),
    }));
  }

  async limitUsage(query: UsageScope & { customerRef: string; productId: string }): Promise<number> {
    return (await this.limitCount(query)).used;
  }

  async limitCount(query: UsageScope & { customerRef: string; productId: string }): Promise<LimitCount> {
    const [row] = await this.rows<{ calls: string | number; reported: string | number }>(
      `SELECT countIf(JSONExtractBool(properties, 'admitted')
                      AND JSONExtractString(properties, 'productId') = {productId:String}) AS calls,
              toString(sumIf(value, NOT JSONHas(properties, 'admitted')
                      AND NOT JSONHas(properties, 'server')
                      AND JSONExtractString(properties, 'source') != 'sdk.limits'
                      AND JSONExtractString(properties, 'productId') IN ('', {productId:String}))) AS reported
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${this.where(query)}`,
      { ...this.params(query), productId: query.productId },
    );
    // The Decimal sum exactly: a Number of it can be a billionth off, and so a unit.
    const reported = toNanos(String(row?.reported ?? '0'));
    return {
      used: Number(row?.calls ?? 0) + unitsRoundedUp(reported),
      fractionNanos: splitNanos(reported).nanos,
    };
  }

  async creditUsage(query: {
    providerId: string;
    environment: Environment;
    meterRef: string;
    customerRef?: string | undefined;
    productId?: string | undefined;
    from?: Date | undefined;
    to?: Date | undefined;
  }): Promise<Map<string, { credits: number; calls: number }>> {
    const narrow = [
      query.customerRef === undefined ? '' : 'AND customer_ref = {customerRef:String}',
      query.productId === undefined
        ? ''
        : "AND JSONExtractString(properties, 'productId') = {productId:String}",
      query.from === undefined ? '' : "AND timestamp >= fromUnixTimestamp64Milli({fromMs:Int64}, 'UTC')",
      query.to === undefined ? '' : "AND timestamp < fromUnixTimestamp64Milli({toMs:Int64}, 'UTC')",
    ].join(' ');
    const rows = await this.rows<{ customer_ref: string; credits: string | number; calls: string | number }>(
      `SELECT customer_ref, toString(sum(JSONExtractUInt(properties, 'credits'))) AS credits, count() AS calls
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE provider_id = {providerId:String}
          AND meter_ref = {meterRef:String}
          ${narrow}
          AND JSONExtractUInt(properties, 'credits') > 0
        GROUP BY customer_ref`,
      Object.fromEntries(
        Object.entries({
          providerId: query.providerId,
          meterRef: query.meterRef,
          customerRef: query.customerRef,
          productId: query.productId,
          fromMs: query.from?.getTime(),
          toMs: query.to?.getTime(),
        }).filter(([, value]) => value !== undefined),
      ),
    );
    return new Map(rows.map((r) => [r.customer_ref, { credits: Number(r.credits), calls: Number(r.calls) }]));
  }

  async countByProperty(query: UsageScope & { property: string }): Promise<Map<string, number>> {
    const rows = await this.rows<{ value: string; records: string | number }>(
      `SELECT JSONExtractString(properties, {property:String}) AS value, count() AS records
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE ${this.where(query)}
        GROUP BY value`,
      { ...this.params(query), property: query.property },
    );
    return new Map(rows.map((r) => [r.value, Number(r.records)]));
  }

  async daily(query: {
    providerId: string;
    environment: Environment;
    from: Date;
    to: Date;
    customerRef?: string | undefined;
  }): Promise<DailyStats[]> {
    const rows = await this.rows<{
      day: string;
      records: string | number;
      customers: string | number;
      meters: string | number;
    }>(
      `SELECT toDate(timestamp) AS day, count() AS records, uniqExact(customer_ref) AS customers, uniqExact(meter_ref) AS meters
         FROM ${this.database}.${TABLES[query.environment]} FINAL
        WHERE provider_id = {providerId:String}
          AND timestamp >= fromUnixTimestamp64Milli({fromMs:Int64}, 'UTC')
          AND timestamp < fromUnixTimestamp64Milli({toMs:Int64}, 'UTC')
          ${query.customerRef === undefined ? '' : 'AND customer_ref = {customerRef:String}'}
        GROUP BY day ORDER BY day`,
      {
        providerId: query.providerId,
        fromMs: query.from.getTime(),
        toMs: query.to.getTime(),
        ...(query.customerRef === undefined ? {} : { customerRef: query.customerRef }),
      },
    );
    const found = new Map(rows.map((r) => [r.day, r]));
    return bucketStarts(query.from, query.to, 'day').map((start) => {
      const date = start.toISOString().slice(0, 10);
      const row = found.get(date);
      return {
        date,
        records: Number(row?.records ?? 0),
        customers: Number(row?.customers ?? 0),
        meters: Number(row?.meters ?? 0),
      };
    });
  }
}

/** A stable token for a batch from its Kafka coordinates: the same batch replayed gets the same token. */
export function dedupeTokenFor(
  ranges: readonly { topic: string; partition: number; first: string; last: string }[],
): string {
  const text = [...ranges]
    .sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition)
    .map((r) => `${r.topic}/${r.partition}/${r.first}-${r.last}`)
    .join(',');
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}
