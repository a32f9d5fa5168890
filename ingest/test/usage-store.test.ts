import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildUsageRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestUsageStore } from '../../test/helpers/usage-store';
import { createClickHouse, migrateClickHouse } from '../src/clickhouse/client';
import { ClickHouseUsageStore } from '../src/usage-store';

/** The ClickHouse usage store (chdb in-process, one session shared by every query). */
let store: Awaited<ReturnType<typeof openTestUsageStore>>;
beforeAll(async () => {
  store = await openTestUsageStore('store');
});
afterAll(async () => {
  await store?.close();
});

const records = (customerRef: string, count: number, value: number): UsageRecord[] =>
  Array.from({ length: count }, () => {
    const built = buildUsageRecord(
      { customerRef, value },
      {
        providerId: 'prv_store',
        environment: 'sandbox',
        meterRef: 'mtr_s',
        meterName: 'requests',
        now: new Date(),
      },
    );
    if (built.record === undefined) throw new Error(JSON.stringify(built.errors));
    return built.record;
  });
const total = (customerRef: string) =>
  store.store.total({
    providerId: 'prv_store',
    environment: 'sandbox',
    meterRef: 'mtr_s',
    customerRef,
    from: new Date(0),
    to: new Date(Date.now() + 60_000),
  });

describe('usage store insert deduplication', () => {
  it('drops a replayed batch by its token, and never lets that token swallow a later insert', async () => {
    const first = records('tokened', 10, 1);
    await store.store.insert(first, 'token-a');
    // A different batch under the same token is a replay by definition: dropped whole.
    await store.store.insert(records('tokened', 5, 1), 'token-a');
    expect(await total('tokened')).toEqual({ total: 10, totalDecimal: '10', records: 10 });

    // An insert without a token right after: chdb keeps settings on its session, so a token
    // still set from the previous insert would drop these rows without an error.
    await store.store.insert(records('plain', 7, 2));
    expect(await total('plain')).toEqual({ total: 14, totalDecimal: '14', records: 7 });

    // Records resent without a token still count once, by their ids.
    await store.store.insert(first);
    expect(await total('tokened')).toEqual({ total: 10, totalDecimal: '10', records: 10 });
  });
});

describe('usage store rows', () => {
  it('stores every field exactly as the record has it, whatever characters its strings hold', async () => {
    const properties = {
      tool: 'say "hi"\\now',
      note: 'line\nbreak\ttab \u0001 ünïcødé 🚀 </script>',
      nested: { list: [1, 2.5, null, true], empty: {} },
    };
    const record: UsageRecord = {
      id: 'rec_roundtrip:1',
      providerId: 'prv_store',
      environment: 'live',
      meterRef: 'mtr_s',
      meterName: 'requests "quoted"\ttab\nline \\t \\N',
      customerRef: 'cus "odd" \\ ref\r\u0000\b\f',
      value: 1234.000000125,
      timestamp: '2026-11-02T03:04:05.678Z',
      properties,
    };
    // Records of one batch after one another: each row has its own fields, however alike.
    const other: UsageRecord = {
      ...record,
      id: 'rec_roundtrip:2',
      providerId: 'prv\\other',
      meterName: 'requests "quoted"\ttab\nline',
      customerRef: 'cus plain',
      timestamp: '2026-11-02T03:04:06.000Z',
    };
    // The third's sender chose its id (the usage API's `id`): the row says so (migration 008).
    await store.store.insert([record, other, { ...record, id: 'rec_roundtrip:3', idGiven: true }]);
    const result = await store.client.query({
      query: `SELECT provider_id, meter_ref, meter_name, customer_ref, id,
                     toString(timestamp) AS timestamp,
                     toString(value) AS value, properties, id_given
                FROM mcpmeter.usage_records_live FINAL WHERE id LIKE 'rec_roundtrip:%' ORDER BY id`,
      format: 'JSONEachRow',
    });
    const row = {
      provider_id: 'prv_store',
      meter_ref: 'mtr_s',
      meter_name: 'requests "quoted"\ttab\nline \\t \\N',
      customer_ref: 'cus "odd" \\ ref\r\u0000\b\f',
      id: 'rec_roundtrip:1',
      timestamp: '2026-11-02 03:04:05.678',
      value: '1234.000000125',
      properties: JSON.stringify(properties),
      id_given: false,
    };
    expect(await result.json()).toEqual([
      row,
      {
        ...row,
        provider_id: 'prv\\other',
        meter_name: 'requests "quoted"\ttab\nline',
        customer_ref: 'cus plain',
        id: 'rec_roundtrip:2',
        timestamp: '2026-11-02 03:04:06.000',
      },
      { ...row, id: 'rec_roundtrip:3', id_given: true },
    ]);
  });

  it('reads rows stored before migration 008, or written without id_given, as given', async () => {
    // Such a row may have had its id chosen by its sender: the rollups look for its other copies.
    const row = (customer: string) =>
      `INSERT INTO mcpmeter.usage_records_sandbox (provider_id, meter_ref, meter_name, customer_ref, id, timestamp, value, properties)
       VALUES ('prv_store', 'mtr_s', 'requests', '${customer}', 'rec_old', now64(3), 1, '{}')`;
    const givenOf = async (customer: string) =>
      (
        await store.client.query({
          query: `SELECT id_given FROM mcpmeter.usage_records_sandbox WHERE customer_ref = '${customer}'`,
          format: 'JSONEachRow',
        })
      ).json();
    // An upgrade: a table as it was before 008, a row stored in it, then the migration.
    await store.client.command({ query: 'ALTER TABLE mcpmeter.usage_records_sandbox DROP COLUMN id_given' });
    await store.client.command({ query: row('before-008') });
    await store.client.command({
      query: "DELETE FROM mcpmeter.schema_migrations WHERE version = '008_id_given.sql'",
    });
    expect(await migrateClickHouse(store.client, 'mcpmeter')).toContain('008_id_given.sql');
    expect(await givenOf('before-008')).toEqual([{ id_given: true }]);
    // After it, a writer that leaves the column out.
    await store.client.command({ query: row('old-writer') });
    expect(await givenOf('old-writer')).toEqual([{ id_given: true }]);
  });

  it('keeps values JavaScript writes in exponent form exact, down to the ninth decimal place', async () => {
    const values = [1e-7, 1.5e-8, 1e-9, 0.000001, 999999999999999];
    const rows = records('tiny', values.length, 1).map((record, i) => ({ ...record, value: values[i] ?? 0 }));
    await store.store.insert(rows);
    const result = await store.client.query({
      query: `SELECT toString(value) AS value FROM mcpmeter.usage_records_sandbox FINAL
               WHERE customer_ref = 'tiny' ORDER BY value`,
      format: 'JSONEachRow',
    });
    expect((await result.json<{ value: string }>()).map((r) => r.value)).toEqual([
      '0.000000001',
      '0.000000015',
      '0.0000001',
      '0.000001',
      '999999999999999',
    ]);
    expect((await total('tiny')).records).toBe(5);
  });
});

describe('usage store over HTTP', () => {
  it('sends the rows as the body of one INSERT … FORMAT TabSeparated, its token for that insert only', async () => {
    // No ClickHouse server on this machine: a loopback listener takes what the store sends, as
    // ClickHouse's HTTP interface would receive it. chdb, above, parses the same text.
    const seen: { query: URLSearchParams; body: string }[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        seen.push({
          query: new URL(req.url ?? '/', 'http://x').searchParams,
          body: Buffer.concat(chunks).toString(),
        });
        res.writeHead(200, { 'x-clickhouse-summary': '{}' }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const clickhouse = createClickHouse({
      url: `http://127.0.0.1:${port}`,
      chdbPath: '',
      database: 'mcpmeter',
    });
    try {
      const http = new ClickHouseUsageStore(clickhouse, 'mcpmeter');
      const [built] = records('http', 1, 2.5);
      if (built === undefined) throw new Error('no record');
      const record = { ...built, customerRef: 'over "http"\t1' };
      await http.insert([record, { ...record, id: `${record.id}-given`, idGiven: true }], 'token-h');
      expect(seen).toHaveLength(1);
      const columns = 'provider_id, meter_ref, meter_name, customer_ref, id, timestamp, value, properties';
      expect(seen[0]?.query.get('query')).toBe(
        `INSERT INTO mcpmeter.usage_records_sandbox (${columns}, id_given) FORMAT TabSeparated`,
      );
      expect(seen[0]?.query.get('insert_deduplication_token')).toBe('token-h:sandbox');
      const fields = (id: string) =>
        `prv_store\tmtr_s\trequests\tover "http"\\t1\t${id}\t${record.timestamp.replace('T', ' ').replace('Z', '')}\t2.5\t${JSON.stringify(record.properties)}`;
      expect(seen[0]?.body).toBe(`${fields(record.id)}\tfalse\n${fields(`${record.id}-given`)}\ttrue\n`);
      // A cluster's tables have no id_given (it serves the rollups, which a cluster does not keep).
      await new ClickHouseUsageStore(clickhouse, 'mcpmeter', true).insert([record]);
      expect(seen[1]?.query.get('query')).toBe(
        `INSERT INTO mcpmeter.usage_records_sandbox (${columns}) FORMAT TabSeparated`,
      );
      expect(seen[1]?.body).toBe(`${fields(record.id)}\n`);
    } finally {
      await clickhouse.client.close();
      server.close();
    }
  });
});
