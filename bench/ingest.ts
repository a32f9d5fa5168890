/**
 * Ingest benchmark: Kafka → ingest consumer → ClickHouse (chdb), against a baseline measured in
 * the same run: the same rows inserted straight into ClickHouse by the same store code.
 *
 *   npm run bench:ingest [-- --records 300000 --customers 200]
 *
 * Starts its own Kafka broker on free loopback ports (deploy/infra.sh), uses fresh chdb
 * directories, stops by itself, and writes bench/results/ingest.{md,json}.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import { readBusConfig } from '@mcp-meter/contracts/usage';
import { buildUsageRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import {
  type ClickHouseClient,
  ClickHouseUsageStore,
  createClickHouse,
  migrateClickHouse,
  openUsageBus,
} from '@mcp-meter/ingest';

const root = resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '300000' },
    customers: { type: 'string', default: '200' },
    'fresh-rate': { type: 'string', default: '20000' },
    'fresh-seconds': { type: 'string', default: '10' },
  },
});
const N = Number(args.records);
const CUSTOMERS = Number(args.customers);
const FRESH_RATE = Number(args['fresh-rate']);
const FRESH_SECONDS = Number(args['fresh-seconds']);
const BATCH_SIZE = 5000;
const FLUSH_INTERVAL_MS = 500;
const logger = createLogger({ level: process.env.BENCH_DEBUG === '1' ? 'warn' : 'silent', name: 'bench' });

function makeRecords(count: number, providerId: string, now = new Date()): UsageRecord[] {
  const records: UsageRecord[] = [];
  for (let i = 0; i < count; i++) {
    const built = buildUsageRecord(
      {
        customerRef: `cus_${i % CUSTOMERS}`,
        properties: {
          tool: `tool_${i % 17}`,
          outcome: i % 50 === 0 ? 'error' : 'success',
          latencyMs: i % 300,
        },
      },
      { providerId, environment: 'sandbox', meterRef: 'mtr_bench', meterName: 'requests', now },
    );
    if (built.record === undefined) throw new Error('invalid bench record');
    records.push(built.record);
  }
  return records;
}

async function count(client: ClickHouseClient, providerId: string): Promise<number> {
  const result = await client.query({
    query: 'SELECT count() AS n FROM mcpmeter.usage_records_sandbox WHERE provider_id = {p:String}',
    query_params: { p: providerId },
    format: 'JSONEachRow',
  });
  return Number((await result.json<{ n: string }>())[0]?.n ?? 0);
}

let debugInserts = () => 0;
/** Waits for `expected` rows; gives up when nothing new arrives for 30 s, so a stuck run ends. */
async function waitForRows(client: ClickHouseClient, providerId: string, expected: number): Promise<void> {
  let last = -1;
  let lastChange = Date.now();
  for (;;) {
    const n = await count(client, providerId);
    if (n >= expected) return;
    if (process.env.BENCH_DEBUG === '1') console.log('rows', n, 'inserts', debugInserts());
    if (n !== last) {
      last = n;
      lastChange = Date.now();
    } else if (Date.now() - lastChange > 30_000) {
      throw new Error(`stuck at ${n} of ${expected} rows`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function exactTotal(store: ClickHouseUsageStore, providerId: string) {
  return store.total({
    providerId,
    environment: 'sandbox',
    meterRef: 'mtr_bench',
    from: new Date(0),
    to: new Date(Date.now() + 3600e3),
  });
}

const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-bench-'));
chmodSync(dir, 0o755);
const kafkaEnv = {
  ...process.env,
  STACK_DIR: join(dir, 'stack'),
  KAFKA_PORT: String(await freePort()),
  KAFKA_CONTROLLER_PORT: String(await freePort()),
};
const infra = join(root, 'deploy', 'infra.sh');
execFileSync('bash', [infra, 'kafka', 'start'], { env: kafkaEnv, stdio: 'inherit' });

try {
  const records = makeRecords(N, 'prv_bench');

  // chdb binds one data directory per process: one client, one database per measurement.
  mkdirSync(join(dir, 'ch'), { recursive: true });
  const clickhouse = createClickHouse({ chdbPath: join(dir, 'ch'), database: 'mcpmeter' });
  const client = clickhouse.client;
  await migrateClickHouse(client, 'baseline');
  await migrateClickHouse(client, 'mcpmeter');

  // Baseline: the same rows, same batch size, straight into ClickHouse by the same store code.
  const baselineStore = new ClickHouseUsageStore(clickhouse, 'baseline');
  let started = performance.now();
  for (let i = 0; i < records.length; i += BATCH_SIZE)
    await baselineStore.insert(records.slice(i, i + BATCH_SIZE));
  const baselineSeconds = (performance.now() - started) / 1000;
  const baselineRate = N / baselineSeconds;
  console.log(`baseline: ${N} rows in ${baselineSeconds.toFixed(2)} s = ${Math.round(baselineRate)} rows/s`);

  const env = readEnv({
    KAFKA_BROKERS: `127.0.0.1:${kafkaEnv.KAFKA_PORT}`,
    BUS_NAMESPACE: 'bench',
    INGEST_BATCH_SIZE: String(BATCH_SIZE),
    INGEST_FLUSH_INTERVAL_MS: String(FLUSH_INTERVAL_MS),
  });
  const bus = await openUsageBus(env.done(readBusConfig(env)), logger);

  // Pre-load the topic, as after an outage or at a consumer's first start.
  started = performance.now();
  const PUBLISH_BATCH = 2000;
  for (let i = 0; i < records.length; i += PUBLISH_BATCH)
    await bus.publisher.publish(records.slice(i, i + PUBLISH_BATCH));
  const produceSeconds = (performance.now() - started) / 1000;
  console.log(`produced ${N} records in ${produceSeconds.toFixed(2)} s`);

  // Drain: the consumer alone, from the first fetch to the last row written.
  const store = new ClickHouseUsageStore(clickhouse, 'mcpmeter');
  const subscription = bus.subscription();
  const cpuBefore = process.cpuUsage();
  started = performance.now();
  let inserts = 0;
  let firstInsertAt = 0;
  let lastInsertAt = 0;
  let rowsAfterFirst = 0;
  debugInserts = () => inserts;
  await subscription.start(async (batch, token) => {
    const begin = performance.now();
    await store.insert(batch, token);
    if (inserts === 0) firstInsertAt = begin;
    else rowsAfterFirst += batch.length;
    lastInsertAt = performance.now();
    inserts++;
  });
  await waitForRows(client, 'prv_bench', N);
  const drainSeconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const drainInserts = inserts;
  const drainRate = N / drainSeconds;
  // Steady state: from the end of the first insert to the end of the last, which leaves out the
  // consumer-group join (a one-off of about a second) but keeps every fetch, parse and write.
  const sustainedRate = rowsAfterFirst / ((lastInsertAt - firstInsertAt) / 1000);
  const exact = await exactTotal(store, 'prv_bench');
  console.log(
    `drained ${N} in ${drainSeconds.toFixed(2)} s = ${Math.round(drainRate)} records/s (sustained ${Math.round(sustainedRate)}), ${inserts} inserts, exact=${exact.records}`,
  );

  // Freshness: a steady stream while the consumer runs; accepted = the record's own timestamp,
  // taken before the publish (so the bus round trip counts against us); queryable = the
  // ClickHouse insert time of its row.
  const freshProvider = 'prv_fresh';
  const tickMs = 50;
  const perTick = Math.round((FRESH_RATE * tickMs) / 1000);
  const insertsBefore = inserts;
  const freshStart = performance.now();
  let sent = 0;
  for (let tick = 0; performance.now() - freshStart < FRESH_SECONDS * 1000; tick++) {
    const due = freshStart + tick * tickMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const batch = makeRecords(perTick, freshProvider);
    await bus.publisher.publish(batch);
    sent += batch.length;
  }
  const freshSendSeconds = (performance.now() - freshStart) / 1000;
  await waitForRows(client, freshProvider, sent);
  const freshResult = await client.query({
    query: `SELECT quantileExact(0.5)(ms) AS p50, quantileExact(0.99)(ms) AS p99, max(ms) AS max
              FROM (SELECT toUnixTimestamp64Milli(ingested_at) - toUnixTimestamp64Milli(timestamp) AS ms
                      FROM mcpmeter.usage_records_sandbox WHERE provider_id = {p:String})`,
    query_params: { p: freshProvider },
    format: 'JSONEachRow',
  });
  const fresh = (await freshResult.json<{ p50: number; p99: number; max: number }>())[0] ?? {
    p50: Number.NaN,
    p99: Number.NaN,
    max: Number.NaN,
  };
  const freshInserts = inserts - insertsBefore;
  console.log(
    `freshness at ${Math.round(sent / freshSendSeconds)} records/s: p50 ${fresh.p50} ms, p99 ${fresh.p99} ms, max ${fresh.max} ms`,
  );

  await subscription.stop();
  await bus.close();
  await client.close();

  const results = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version },
    settings: {
      records: N,
      customers: CUSTOMERS,
      batchSize: BATCH_SIZE,
      flushIntervalMs: FLUSH_INTERVAL_MS,
      publishBatch: PUBLISH_BATCH,
    },
    baseline: { rowsPerSecond: Math.round(baselineRate), seconds: baselineSeconds },
    produce: { recordsPerSecond: Math.round(N / produceSeconds) },
    drain: {
      recordsPerSecond: Math.round(drainRate),
      sustainedRecordsPerSecond: Math.round(sustainedRate),
      seconds: drainSeconds,
      inserts: drainInserts,
      rowsPerInsert: Math.round(N / Math.max(drainInserts, 1)),
      insertsPerSecond: Number((drainInserts / drainSeconds).toFixed(2)),
      cpuSeconds,
      coresUsed: Number((cpuSeconds / drainSeconds).toFixed(2)),
      exactRecords: exact.records,
      ratioToBaseline: Number((drainRate / baselineRate).toFixed(3)),
      sustainedRatioToBaseline: Number((sustainedRate / baselineRate).toFixed(3)),
    },
    freshness: {
      offeredRate: FRESH_RATE,
      achievedRate: Math.round(sent / freshSendSeconds),
      records: sent,
      inserts: freshInserts,
      p50Ms: fresh.p50,
      p99Ms: fresh.p99,
      maxMs: fresh.max,
      p99OverFlushInterval: Number((fresh.p99 / FLUSH_INTERVAL_MS).toFixed(2)),
    },
    goals: {
      sustainedAtLeast100kPerSecond: sustainedRate >= 100_000,
      freshnessP99AtMost2xFlush: fresh.p99 <= 2 * FLUSH_INTERVAL_MS,
      exact: exact.records === N,
    },
  };
  mkdirSync(join(root, 'bench', 'results'), { recursive: true });
  writeFileSync(join(root, 'bench', 'results', 'ingest.json'), `${JSON.stringify(results, null, 2)}\n`);
  console.log(JSON.stringify(results, null, 2));
} finally {
  execFileSync('bash', [infra, 'kafka', 'stop'], { env: kafkaEnv, stdio: 'inherit' });
  rmSync(dir, { recursive: true, force: true });
}
