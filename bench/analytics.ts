/**
 * Analytics benchmark (issue 63): loads usage records into the embedded ClickHouse (chdb) and
 * times each usage analytics query the console and the API make, at two sizes in one run, so
 * the reader sees how a query's cost grows with the rows it reads.
 *
 *   npm run bench:analytics [-- --small 1000000 --large 10000000 --runs 20 --large-runs 5]
 *
 * Records are generated inside ClickHouse (INSERT … SELECT FROM numbers), deterministic: 2,000
 * customers, 40 tools on 5 servers, 3 products, 2 % errors and 1 % paywalls, spread over 30 days.
 * Uses a fresh chdb directory, stops by itself, writes bench/results/analytics.{md,json}.
 */
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { openTestUsageStore } from '../test/helpers/usage-store';

const root = resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    small: { type: 'string', default: '1000000' },
    large: { type: 'string', default: '10000000' },
    runs: { type: 'string', default: '20' },
    'large-runs': { type: 'string', default: '5' },
  },
});
const SMALL = Number(args.small);
const LARGE = Number(args.large);
const RUNS = Number(args.runs);
/** Fewer at the large size, where a raw query takes seconds: there p99 is the slowest run. */
const LARGE_RUNS = Number(args['large-runs']);
const CHUNK = 1_000_000;
const PROVIDER = 'prv_bench';
const METER = 'mtr_bench_requests';
const DAY_MS = 86_400_000;
const END = Date.UTC(2026, 10, 1);
const START = END - 30 * DAY_MS;

// A fresh chdb directory, removed on close.
const handle = await openTestUsageStore('bench-analytics');

/** Rows [from, to) of the deterministic data set, generated and inserted by ClickHouse itself. */
async function load(from: number, to: number) {
  for (let at = from; at < to; at += CHUNK) {
    const n = Math.min(CHUNK, to - at);
    await handle.client.command({
      query: `INSERT INTO mcpmeter.usage_records_sandbox
                (provider_id, meter_ref, meter_name, customer_ref, id, timestamp, value, properties)
              SELECT '${PROVIDER}', '${METER}', 'requests', concat('cus_', toString(number % 2000)),
                     concat('rec_', toString(number)),
                     fromUnixTimestamp64Milli(toInt64(${START} + (number * 7919) % ${END - START})), 1,
                     concat('{"tool":"tool_', toString(number % 40), '","outcome":"',
                            multiIf(number % 50 = 0, 'error', number % 100 = 7, 'paywall', 'success'),
                            '","server":"mcp_', toString(number % 5), '","productId":"prd_', toString(number % 3),
                            '","latencyMs":', toString(((number * 7907) % 20000) / 10),
                            if(number % 100 = 7,
                               concat(',"paywall":"text_link","paywallEra":"legacy","checkoutSessionId":"cs_',
                                      toString(number % 3000), '"'), ''),
                            '}')
                FROM numbers(${at}, ${n})`,
    });
  }
}

const base = {
  providerId: PROVIDER,
  environment: 'sandbox' as const,
  meterRef: METER,
  from: new Date(START),
  to: new Date(END),
};
const QUERIES: Record<string, () => Promise<unknown>> = {
  'calls per day by tool, 30 days (Europe/Paris)': () =>
    handle.analytics.series({ ...base, grain: 'day', timeZone: 'Europe/Paris', groupBy: 'tool' }),
  'calls per hour, 7 days (UTC)': () =>
    handle.analytics.series({
      ...base,
      from: new Date(END - 7 * DAY_MS),
      grain: 'hour',
      timeZone: 'UTC',
      groupBy: 'none',
    }),
  'calls per day by customer, 30 days': () =>
    handle.analytics.series({ ...base, grain: 'day', timeZone: 'UTC', groupBy: 'customer' }),
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
};

/** Nearest rank. */
const rank = (sorted: number[], level: number) =>
  sorted[Math.max(0, Math.ceil(level * sorted.length) - 1)] ?? 0;

async function measure(rows: number, runs: number) {
  const results: Record<string, { p50: number; p99: number; max: number }> = {};
  for (const [name, query] of Object.entries(QUERIES)) {
    await query(); // warm
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await query();
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    results[name] = { p50: rank(times, 0.5), p99: rank(times, 0.99), max: times[times.length - 1] ?? 0 };
    console.log(
      `[bench] ${rows} rows: ${name}: p50 ${results[name]?.p50.toFixed(1)} ms, p99 ${results[name]?.p99.toFixed(1)} ms`,
    );
  }
  return results;
}

try {
  let started = performance.now();
  await load(0, SMALL);
  const loadSmall = performance.now() - started;
  const small = await measure(SMALL, RUNS);
  started = performance.now();
  await load(SMALL, LARGE);
  const loadLarge = performance.now() - started;
  const large = await measure(LARGE, LARGE_RUNS);

  const result = {
    date: new Date().toISOString(),
    node: process.version,
    cores: cpus().length,
    runs: { small: RUNS, large: LARGE_RUNS },
    sizes: { small: SMALL, large: LARGE },
    loadSeconds: { small: loadSmall / 1000, rest: loadLarge / 1000 },
    goalP99Ms: 200,
    queries: Object.keys(QUERIES).map((name) => ({
      name,
      small: small[name],
      large: large[name],
      growth: (large[name]?.p99 ?? 0) / Math.max(0.001, small[name]?.p99 ?? 0),
    })),
  };
  writeFileSync(join(root, 'bench/results/analytics.json'), `${JSON.stringify(result, null, 2)}\n`);
  const S = `${SMALL / 1e6} M`;
  const L = `${LARGE / 1e6} M`;
  const ms = (v: number | undefined) => (v === undefined ? '–' : v.toFixed(1));
  const lines = [
    `# Usage analytics queries at ${S} and ${L} records (issue 63)`,
    '',
    `Measured by \`npm run bench:analytics\` on ${result.date.slice(0, 10)}, Node ${result.node}, ${result.cores} cores: the embedded ClickHouse (chdb, in this process) loaded with ${SMALL.toLocaleString('en')} then ${LARGE.toLocaleString('en')} usage records of one provider over 30 days (2,000 customers, 40 tools, 2 % errors, 1 % paywalls; generated by ClickHouse, loaded in ${result.loadSeconds.small.toFixed(1)} s and ${result.loadSeconds.rest.toFixed(1)} s), each query run once to warm and then ${RUNS} times (${LARGE_RUNS} at the large size, where p99 is the slowest run), timed from the caller (the analytics code the API uses). Parts are left as the inserts made them (no OPTIMIZE).`,
    '',
    `| Query | ${S} p50 ms | ${S} p99 ms | ${L} p50 ms | ${L} p99 ms | p99 ${L} ÷ ${S} | goal p99 < 200 ms at ${L} |`,
    '|---|---:|---:|---:|---:|---:|---|',
    ...result.queries.map(
      (q) =>
        `| ${q.name} | ${ms(q.small?.p50)} | ${ms(q.small?.p99)} | ${ms(q.large?.p50)} | ${ms(q.large?.p99)} | ${q.growth.toFixed(1)} | ${(q.large?.p99 ?? Infinity) < 200 ? 'met' : 'NOT met'} |`,
    ),
    '',
  ];
  writeFileSync(join(root, 'bench/results/analytics.md'), `${lines.join('\n')}\n`);
  console.log(lines.join('\n'));
} finally {
  await handle.close();
}
