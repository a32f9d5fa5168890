import type { ClickHouseClient } from './clickhouse/client';
import type { Environment, UsageRecord } from './record';

/** The environment picks the table from a closed set; no caller string reaches an identifier. */
const TABLES: Readonly<Record<Environment, string>> = {
  sandbox: 'usage_records_sandbox',
  live: 'usage_records_live',
};

export interface UsageTotalQuery {
  providerId: string;
  environment: Environment;
  meterRef: string;
  customerRef?: string | undefined;
  from: Date;
  to: Date;
}

export interface UsageTotal {
  total: number;
  records: number;
}

/** Read side used by the control plane (usage queries, later limits and billing). */
export interface UsageReader {
  total(query: UsageTotalQuery): Promise<UsageTotal>;
}

/** Write side used by the ingest consumer. Inserts only: no code path updates or deletes a record. */
export interface UsageWriter {
  insert(records: readonly UsageRecord[]): Promise<void>;
}

export class ClickHouseUsageStore implements UsageReader, UsageWriter {
  constructor(
    private readonly client: ClickHouseClient,
    private readonly database: string,
  ) {}

  async insert(records: readonly UsageRecord[]): Promise<void> {
    for (const environment of Object.keys(TABLES) as Environment[]) {
      const rows = records
        .filter((r) => r.environment === environment)
        .map((r) => ({
          provider_id: r.providerId,
          meter_ref: r.meterRef,
          meter_name: r.meterName,
          customer_ref: r.customerRef,
          id: r.id,
          // The column is UTC; ClickHouse's default text form has no 'T' and no zone suffix.
          timestamp: r.timestamp.replace('T', ' ').replace('Z', ''),
          value: r.value,
          properties: JSON.stringify(r.properties),
        }));
      if (rows.length === 0) continue;
      await this.client.insert({
        table: `${this.database}.${TABLES[environment]}`,
        values: rows,
        format: 'JSONEachRow',
      });
    }
  }

  async total(query: UsageTotalQuery): Promise<UsageTotal> {
    const customerFilter = query.customerRef === undefined ? '' : 'AND customer_ref = {customerRef:String}';
    const result = await this.client.query({
      query: `SELECT toString(sum(value)) AS total, count() AS records
              FROM ${this.database}.${TABLES[query.environment]} FINAL
              WHERE provider_id = {providerId:String}
                AND meter_ref = {meterRef:String}
                AND timestamp >= fromUnixTimestamp64Milli({fromMs:Int64}, 'UTC')
                AND timestamp < fromUnixTimestamp64Milli({toMs:Int64}, 'UTC')
                ${customerFilter}`,
      query_params: {
        providerId: query.providerId,
        meterRef: query.meterRef,
        customerRef: query.customerRef,
        fromMs: query.from.getTime(),
        toMs: query.to.getTime(),
      },
      format: 'JSONEachRow',
    });
    const rows = await result.json<{ total: string; records: string | number }>();
    const row = rows[0];
    return {
      total: row === undefined ? 0 : Number(row.total),
      records: row === undefined ? 0 : Number(row.records),
    };
  }
}
