/**
 * Analytics benchmark (issue 63): loads usage records into the embedded ClickHouse (chdb) and
 * times each usage analytics query the console and the API make, at two sizes in one run, first
 * from the raw records alone and then once the rollups are built, so the reader sees how a
 * query's cost grows with the rows it reads and how the rollups keep it flat.
 *
 *   npm run bench:analytics [-- --small 1000000 --large 10000000 --runs 20 --raw-runs 3]
 *
 * Records are generated inside ClickHouse (INSERT … SELECT FROM numbers), deterministic: 2,000
 * customers (each on one of 4 plans), 40 tools on 5 servers, 3 products, 2 % errors and 1 % paywalls, over the 30 days
 * before now (the range the API asks by default: whole quarter hours to the end of this one), in time order as ingest writes them: a million rows an insert up to the last hour,
 * then a minute an insert. Then, in each store, the roll after 1, 24 and 96 late records in as
 * many quarter hours is timed. Each size gets a fresh chdb directory; stops by itself, writes
 * bench/results/analytics.{md,json}.
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { storeUsageBatch } from '../ingest/src/service';
import { openTestUsageStore } from '../test/helpers/usage-store';

const root = resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    small: { type: 'string', default: '1000000' },
    large: { type: 'string', default: '10000000' },
    runs: { type: 'string', default: '20' },
    'raw-runs': { type: 'string', default: '3' },
  },
});
const SMALL = Number(args.small);
const LARGE = Number(args.large);
const RUNS = Number(args.runs);
/** Fewer from the raw records, where a query takes seconds: there p99 is the slowest run. */
const RAW_RUNS = Number(args['raw-runs']);
const CHUNK = 1_000_000;
const PROVIDER = 'prv_bench';
const METER = 'mtr_bench_requests';
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** Where the API's default range ends: the end of the current quarter hour (records stop at now). */
const NOW = Math.floor(Date.now() / 1000) * 1000;
const END = Math.ceil(NOW / 900_000) * 900_000;
const START = END - 30 * DAY_MS;

type Store = Awaited<ReturnType<typeof openTestUsageStore>>;

/**
 * Rows [from, to) of `total`, their times spread evenly over the 30 days in row order, each
 * stamped as ingested 1.5 s after its time: the store then holds what a month of live ingestion
 * leaves (recent records in recent parts), not a month loaded in the last minute.
 */
async function insert(handle: Store, total: number, from: number, to: number) {
  await handle.client.command({
    query: `INSERT INTO mcpmeter.usage_records_sandbox
              (provider_id, meter_ref, meter_name, customer_ref, id, timestamp, value, properties, ingested_at, id_given)
            SELECT '${PROVIDER}', '${METER}', 'requests', concat('cus_', toString(number % 2000)),
                   concat('rec_', toString(number)),
                   fromUnixTimestamp64Milli(toInt64(${START} + intDiv(number * ${NOW - START}, ${total}))), 1,
                   concat('{"tool":"tool_', toString(number % 40), '","outcome":"',
                          multiIf(number % 50 = 0, 'error', number % 100 = 7, 'paywall', 'success'),
                          '","server":"mcp_', toString(number % 5), '","productId":"prd_', toString(number % 3),
                          '","planId":"pln_', toString(intDiv(number % 2000, 500)),
                          '","latencyMs":', toString(((number * 7907) % 20000) / 10),
                          if(number % 100 = 7,
                             concat(',"paywall":"text_link","paywallEra":"legacy","checkoutSessionId":"cs_',
                                    toString(number % 3000), '"'), ''),
                          '}'),
                   -- Written 1.5 s after the call, as the consumer writes a live proxy's records.
                   fromUnixTimestamp64Milli(toInt64(${START} + intDiv(number * ${NOW - START}, ${total}) + 1500)),
                   -- Ids made here, as the proxy's are (the rollups look for no other copies of them).
                   false
              FROM numbers(${from}, ${to - from})`,
  });
}

/** The data set of `total` rows: big inserts up to the last hour, then one a minute. */
async function load(handle: Store, total: number) {
  const lastHour = Math.floor((total * (NOW - START - HOUR_MS)) / (NOW - START));
  for (let at = 0; at < lastHour; at += CHUNK)
    await insert(handle, total, at, Math.min(lastHour, at + CHUNK));
  for (let minute = 0; minute < 60; minute++)
    await insert(
      handle,
      total,
      lastHour + Math.floor(((total - lastHour) * minute) / 60),
      lastHour + Math.floor(((total - lastHour) * (minute + 1)) / 60),
    );
}

const base = {
  providerId: PROVIDER,
  environment: 'sandbox' as const,
  meterRef: METER,
  from: new Date(START),
  to: new Date(END),
};
const queries = (handle: Store): Record<string, () => Promise<unknown>> => ({
  'calls per day by tool, 30 days (Europe/Paris)': () =>
    handle.analytics.series({ ...base, grain: 'day', timeZone: 'Europe/Paris', groupBy: 'tool' }),
  'calls per day by plan, 30 days (UTC)': () =>
    handle.analytics.series({ ...base, grain: 'day', timeZone: 'UTC', groupBy: 'plan' }),
  'calls per hour, 7 days (UTC)': () =>
    handle.analytics.series({
      ...base,
      from: new Date(END - 7 * DAY_MS),
      grain: 'hour',
      timeZone: 'UTC',
      groupBy: 'none',
    }),
  // As the API asks it: the 10 customers with the most calls (its default limit) and the rest.
  'calls per day by customer (top 10), 30 days': () =>
    handle.analytics.topCustomers({ ...base, grain: 'day', timeZone: 'UTC', groupBy: 'customer' }, 10),
  'one customer per day, 30 days': () =>
    handle.analytics.series({
      ...base,
      grain: 'day',
      timeZone: 'UTC',
      groupBy: 'outcome',
      customerRef: 'cus_42',
    }),
  'tools: errors and latency p50/p95/p99, 30 days': () => handle.analytics.toolStats(base),
  'paywalls shown by form and session, 30 days': () => handle.analytics.paywalls(base),
});

/** Nearest rank. */
const rank = (sorted: number[], level: number) =>
  sorted[Math.max(0, Math.ceil(level * sorted.length) - 1)] ?? 0;

type Timings = Record<string, { p50: number; p99: number; max: number }>;

async function measure(handle: Store, label: string, runs: number): Promise<Timings> {
  const results: Timings = {};
  for (const [name, query] of Object.entries(queries(handle))) {
    await query(); // warm
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await query();
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const timing = { p50: rank(times, 0.5), p99: rank(times, 0.99), max: times[times.length - 1] ?? 0 };
    results[name] = timing;
    console.log(
      `[bench] ${label}: ${name}: p50 ${timing.p50.toFixed(1)} ms, p99 ${timing.p99.toFixed(1)} ms`,
    );
  }
  return results;
}

/** How many late records, each in its own slot, a late roll is timed with (the first is the baseline). */
const LATE_COUNTS = [1, 24, 96];
let lateSerial = 0;

/**
 * Late records, as the usage API takes them (up to 35 days old, ids chosen by the sender):
 * `count` records in as many slots spread evenly over the 30 days, stored as the consumer
 * stores a batch, then one roll timed. Each count twice, the faster kept (a roll may also
 * close the quarter hour that just ended).
 */
async function lateRolls(handle: Store) {
  const results: { records: number; seconds: number; rebuilds: number }[] = [];
  for (const count of LATE_COUNTS) {
    let best: { seconds: number; rebuilds: number } | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      const step = Math.floor((NOW - START - 2 * HOUR_MS) / count / 900_000) * 900_000;
      const records = Array.from({ length: count }, (_, i) => ({
        id: `late_${lateSerial++}`,
        idGiven: true as const,
        providerId: PROVIDER,
        environment: 'sandbox' as const,
        meterRef: METER,
        meterName: 'requests',
        customerRef: 'cus_7',
        value: 1,
        timestamp: new Date(START + HOUR_MS + i * step + attempt * 900_000 + 61_000).toISOString(),
        properties: {
          tool: 'tool_3',
          server: 'mcp_3',
          productId: 'prd_1',
          outcome: 'success',
          latencyMs: 12,
        },
      }));
      await storeUsageBatch(handle.store, handle.rollups, records);
      const rebuilds = handle.rollups?.rebuilds ?? 0;
      const started = performance.now();
      await handle.rollups?.roll();
      const timing = {
        seconds: (performance.now() - started) / 1000,
        rebuilds: (handle.rollups?.rebuilds ?? 0) - rebuilds,
      };
      if (best === undefined || timing.seconds < best.seconds) best = timing;
    }
    if (best === undefined) throw new Error('no late roll timed');
    console.log(
      `[bench] late roll: ${count} records in ${count} slots: ${best.seconds.toFixed(2)} s, ${best.rebuilds} rebuilds`,
    );
    results.push({ records: count, ...best });
  }
  return results;
}

/** One size: a fresh store, loaded, timed raw, rolled up, timed again. */
async function size(rows: number) {
  const handle = await openTestUsageStore('bench-analytics');
  try {
    let started = performance.now();
    await load(handle, rows);
    const loadSeconds = (performance.now() - started) / 1000;
    const raw = await measure(handle, `${rows} raw`, RAW_RUNS);
    started = performance.now();
    const slots = await handle.rollups?.roll();
    const rollSeconds = (performance.now() - started) / 1000;
    // The store at rest, as it is between rolls: the merges the load and the roll started are done.
    for (let waited = 0; waited < 60_000; waited += 500) {
      const [merging] = await (
        await handle.client.query({ query: 'SELECT count() AS n FROM system.merges', format: 'JSONEachRow' })
      ).json<{ n: string }>();
      if (Number(merging?.n ?? 0) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const [counted] = await (
      await handle.client.query({
        query: 'SELECT count() AS rows FROM mcpmeter.usage_rollup_sandbox',
        format: 'JSONEachRow',
      })
    ).json<{ rows: string }>();
    const rolled = await measure(handle, `${rows} rolled`, RUNS);
    const late = await lateRolls(handle);
    return { loadSeconds, rollSeconds, slots, rollupRows: Number(counted?.rows ?? 0), raw, rolled, late };
  } finally {
    await handle.close();
  }
}

const small = await size(SMALL);
const large = await size(LARGE);
const names = Object.keys(small.rolled);
const result = {
  date: new Date().toISOString(),
  node: process.version,
  cores: cpus().length,
  /** The cores this process may run on (its CPU affinity): fewer when the machine confines it. */
  usableCores: availableParallelism(),
  runs: { rolled: RUNS, raw: RAW_RUNS },
  sizes: { small: SMALL, large: LARGE },
  load: {
    small: {
      seconds: small.loadSeconds,
      rollSeconds: small.rollSeconds,
      slots: small.slots,
      rollupRows: small.rollupRows,
    },
    large: {
      seconds: large.loadSeconds,
      rollSeconds: large.rollSeconds,
      slots: large.slots,
      rollupRows: large.rollupRows,
    },
  },
  lateRolls: { small: small.late, large: large.late },
  goalP99Ms: 200,
  queries: names.map((name) => ({
    name,
    small: { raw: small.raw[name], rolled: small.rolled[name] },
    large: { raw: large.raw[name], rolled: large.rolled[name] },
    growth: (large.rolled[name]?.p99 ?? 0) / Math.max(0.001, small.rolled[name]?.p99 ?? 0),
  })),
};
writeFileSync(join(root, 'bench/results/analytics.json'), `${JSON.stringify(result, null, 2)}\n`);
const S = `${SMALL / 1e6} M`;
const L = `${LARGE / 1e6} M`;
const ms = (v: number | undefined) => (v === undefined ? '–' : v.toFixed(1));
const lines = [
  `# Usage analytics queries at ${S} and ${L} records (issue 63)`,
  '',
  `Measured by \`npm run bench:analytics\` on ${result.date.slice(0, 10)}, Node ${result.node}, ${result.cores} cores (${result.usableCores} of them usable by this process): the embedded ClickHouse (chdb, in this process), one fresh store per size, loaded with ${SMALL.toLocaleString('en')} and then ${LARGE.toLocaleString('en')} usage records of one provider over the 30 days before now (2,000 customers on 4 plans, 40 tools, 3 products, 2 % errors, 1 % paywalls; generated by ClickHouse in time order, a million rows an insert and the last hour a minute an insert, each record stamped as ingested 1.5 s after its time, as a month of live ingestion leaves them; loaded in ${small.loadSeconds.toFixed(1)} s and ${large.loadSeconds.toFixed(1)} s). Each query ran once to warm and then ${RAW_RUNS} times from the raw records alone, then the rollups were built (${small.rollSeconds.toFixed(1)} s, ${small.rollupRows.toLocaleString('en')} rollup rows; ${large.rollSeconds.toFixed(1)} s, ${large.rollupRows.toLocaleString('en')} rows) and it ran ${RUNS} times more; p99 of ${RAW_RUNS} runs is the slowest. Before the rolled runs the store's merges were let finish. Times are from the caller (the analytics code the API uses); each asks the range the API asks by default, whole quarter hours to the end of the current one, and in every rolled run the slots not rolled yet (the current quarter hour, and the one before it in its first minute) are read raw.`,
  '',
  `| Query | ${S} raw p99 ms | ${S} rolled p99 ms | ${L} raw p99 ms | ${L} rolled p50 ms | ${L} rolled p99 ms | rolled p99 ${L} ÷ ${S} | goal p99 < 200 ms at ${L} |`,
  '|---|---:|---:|---:|---:|---:|---:|---|',
  ...result.queries.map(
    (q) =>
      `| ${q.name} | ${ms(q.small.raw?.p99)} | ${ms(q.small.rolled?.p99)} | ${ms(q.large.raw?.p99)} | ${ms(q.large.rolled?.p50)} | ${ms(q.large.rolled?.p99)} | ${q.growth.toFixed(1)} | ${(q.large.rolled?.p99 ?? Infinity) < 200 ? 'met' : 'NOT met'} |`,
  ),
  '',
  '## Rolling late records again',
  '',
  `Then, in each store, late records as the usage API takes them (ids chosen by the sender, up to 35 days old): N records in N quarter hours spread evenly over the 30 days, stored as the consumer stores a batch, and the next roll timed (each N twice, the faster kept). A month's late slots are rebuilt together, its records read once, so the roll's cost should grow with the months touched, not with N: the ratio is against N = 1 in the same store.`,
  '',
  '| Late records (slots) | 1 M roll s | 1 M rebuilds | 1 M ÷ N = 1 | 10 M roll s | 10 M rebuilds | 10 M ÷ N = 1 |',
  '|---:|---:|---:|---:|---:|---:|---:|',
  ...small.late.map((row, i) => {
    const big = large.late[i];
    const ratio = (v: number | undefined, one: number | undefined) =>
      ((v ?? 0) / Math.max(0.001, one ?? 0)).toFixed(2);
    return `| ${row.records} | ${row.seconds.toFixed(2)} | ${row.rebuilds} | ${ratio(row.seconds, small.late[0]?.seconds)} | ${big?.seconds.toFixed(2)} | ${big?.rebuilds} | ${ratio(big?.seconds, large.late[0]?.seconds)} |`;
  }),
  '',
];
writeFileSync(join(root, 'bench/results/analytics.md'), `${lines.join('\n')}\n`);
console.log(lines.join('\n'));
