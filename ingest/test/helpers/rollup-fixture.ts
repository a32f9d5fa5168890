import type { ToolStatsQuery, UsageSeriesQuery } from '@mcp-meter/contracts/usage';
import type { Environment, UsageRecord } from '@mcp-meter/contracts/usage-record';
import { expect } from 'vitest';
import type { openTestUsageStore } from '../../../test/helpers/usage-store';
import { LATENCY_ACCURACY } from '../../src/analytics/latency';
import { ceilSlot, floorSlot, SLOT_MS } from '../../src/analytics/slots';
import { storeUsageBatch } from '../../src/service';

/**
 * The records of the rollups' tests (ingest/test/usage-rollups.test.ts) and the test's own
 * account of them: what every analytics answer must equal, checked against the store in use.
 */
let handle: Awaited<ReturnType<typeof openTestUsageStore>>;
/** The store the records are written to and the answers read from. */
export function useStore(store: typeof handle) {
  handle = store;
}

export const PROVIDER = 'prv_roll';
export const METER = 'mtr_roll';
export const HOUR = 3_600_000;
// Three days ending two days ago: every slot is closed by the store's clock.
export const END = floorSlot(Date.now() - 2 * 24 * HOUR) + 7 * 60_000 + 123; // not on a slot edge
export const START = END - 3 * 24 * HOUR + 11 * 60_000 + 457; // nor this

export const SLOTS_STARTING_INSIDE = (floorSlot(END) - ceilSlot(START)) / SLOT_MS + 1;

let seed = 7;
export const next = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
  return seed / 2_147_483_648;
};
const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)] as T;

let serial = 0;
export function record(
  at: number,
  environment: Environment = 'sandbox',
  shape: Record<string, unknown> = {},
): UsageRecord {
  const roll = next();
  const outcome = roll < 0.08 ? 'error' : roll < 0.1 ? 'upstream_error' : roll < 0.16 ? 'paywall' : 'success';
  const properties: Record<string, unknown> = {
    tool: pick(['search', 'fetch', 'summarise', 'translate']),
    server: pick(['mcp_a', 'mcp_b']),
    productId: pick(['prd_1', 'prd_2']),
    // Most calls were judged by a plan; some (free tools, records from before plans were) by none.
    ...(next() < 0.8 ? { planId: pick(['pln_free', 'pln_pro', 'pln_team']) } : {}),
    outcome,
    ...(next() < 0.05 ? { cancelled: true } : {}),
    ...(outcome !== 'paywall' && next() < 0.9 ? { latencyMs: Math.round(next() * 2_000_000) / 1000 } : {}),
    ...(outcome === 'paywall'
      ? {
          paywall: pick(['url_elicitation', 'error_32042', 'text_link']),
          paywallEra: pick(['modern', 'legacy']),
          checkoutSessionId: pick(['cs_1', 'cs_2', 'cs_3']),
        }
      : {}),
    ...shape,
  };
  // A few records reported through the API: no tool, no outcome.
  if (next() < 0.03) for (const key of ['tool', 'server', 'outcome', 'latencyMs']) delete properties[key];
  return {
    id: `rec_${serial++}`,
    providerId: PROVIDER,
    environment,
    meterRef: METER,
    meterName: 'requests',
    customerRef: pick(['cus_a', 'cus_b', 'cus_c']),
    value: pick([1, 1, 2.5, 0.125]),
    timestamp: new Date(at).toISOString(),
    properties,
  };
}

/** The records as stored: the last one written under an id is the one FINAL reads. */
export const stored = new Map<string, UsageRecord>();
export async function write(records: UsageRecord[]) {
  // What the ingest consumer does with a batch.
  await storeUsageBatch(handle.store, handle.rollups, records);
  for (const r of records) stored.set(`${r.environment}/${r.id}`, r);
}

const ZONES = ['UTC', 'Asia/Kolkata'] as const;
const GROUPS = ['none', 'tool', 'customer', 'product', 'plan', 'server', 'outcome'] as const;
const GRAINS = ['hour', 'day'] as const;
export const base: ToolStatsQuery = {
  providerId: PROVIDER,
  environment: 'sandbox',
  meterRef: METER,
  from: new Date(START),
  to: new Date(END),
};

export function outcomeOf(p: Record<string, unknown>): string {
  if (p.cancelled === true) return 'cancelled';
  if (['error', 'upstream_error', 'unavailable'].includes(String(p.outcome))) return 'error';
  return p.outcome === undefined ? 'reported' : String(p.outcome);
}

function bucketOf(at: number, grain: 'hour' | 'day', timeZone: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    })
      .formatToParts(new Date(at))
      .map((p) => [p.type, p.value]),
  );
  if (grain === 'day') return `${parts.year}-${parts.month}-${parts.day}`;
  return String(Math.floor(at / 1000) - Number(parts.minute) * 60 - Number(parts.second));
}

export const inRange = (r: UsageRecord) =>
  r.environment === 'sandbox' && Date.parse(r.timestamp) >= START && Date.parse(r.timestamp) < END;

/** The series as the test counts it: calls, units (in billionths) and errors per bucket and key. */
function expectedSeries(grain: 'hour' | 'day', timeZone: string, groupBy: (typeof GROUPS)[number]) {
  const rows = new Map<
    string,
    { bucket: string; key: string; calls: number; units: bigint; errors: number }
  >();
  for (const r of stored.values()) {
    if (!inRange(r)) continue;
    const p = r.properties;
    const key =
      groupBy === 'none'
        ? ''
        : groupBy === 'customer'
          ? r.customerRef
          : groupBy === 'outcome'
            ? outcomeOf(p)
            : String(
                p[{ tool: 'tool', product: 'productId', plan: 'planId', server: 'server' }[groupBy]] ?? '',
              );
    const bucket = bucketOf(Date.parse(r.timestamp), grain, timeZone);
    const row = rows.get(`${bucket}|${key}`) ?? { bucket, key, calls: 0, units: 0n, errors: 0 };
    row.calls += 1;
    row.units += BigInt(Math.round(r.value * 1e9));
    row.errors += ['error', 'upstream_error', 'unavailable'].includes(String(p.outcome)) ? 1 : 0;
    rows.set(`${bucket}|${key}`, row);
  }
  return [...rows.values()]
    .sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : a.key < b.key ? -1 : 1))
    .map((r) => ({ ...r, units: r.units }));
}

export const billionths = (decimal: string) => {
  const [whole = '0', fraction = ''] = decimal.split('.');
  return BigInt(whole) * 1_000_000_000n + BigInt(fraction.padEnd(9, '0'));
};

/**
 * Every question checked; `full` asks each time zone at each grain, otherwise day in UTC and
 * hour in Kolkata (where a half-hour offset splits UTC hours), enough after the first full checks.
 */
export async function checkEverything(full = false) {
  const asked = ZONES.flatMap((timeZone) =>
    GRAINS.filter((grain) => full || (timeZone === 'UTC') === (grain === 'day')).map((grain) => ({
      timeZone,
      grain,
    })),
  );
  for (const { timeZone, grain } of asked)
    for (const groupBy of GROUPS) {
      const query: UsageSeriesQuery = { ...base, grain, timeZone, groupBy };
      const got = (await handle.analytics.series(query)).map((r) => ({ ...r, units: billionths(r.units) }));
      expect(got, `${grain} ${timeZone} by ${groupBy}`).toEqual(expectedSeries(grain, timeZone, groupBy));
    }
  // By customer: the two with the most calls bucket by bucket, the whole range beside them.
  for (const { timeZone, grain } of asked) {
    const query: UsageSeriesQuery = { ...base, grain, timeZone, groupBy: 'customer' };
    const perCustomer = new Map<string, number>();
    for (const r of expectedSeries(grain, timeZone, 'customer'))
      perCustomer.set(r.key, (perCustomer.get(r.key) ?? 0) + r.calls);
    const top = [...perCustomer]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, 2)
      .map(([key]) => key);
    const got = await handle.analytics.topCustomers(query, 2);
    const billionthsOf = (rows: typeof got.rows) => rows.map((r) => ({ ...r, units: billionths(r.units) }));
    expect(billionthsOf(got.rows), `top customers ${grain} ${timeZone}`).toEqual(
      expectedSeries(grain, timeZone, 'customer').filter((r) => top.includes(r.key)),
    );
    expect(billionthsOf(got.totals)).toEqual(expectedSeries(grain, timeZone, 'none'));
    expect(got.customers).toBe(perCustomer.size);
  }
  await checkCustomerRollups();
  // Tools: calls, errors, and each percentile within 1 % of the exact nearest rank.
  const tools = await handle.analytics.toolStats(base);
  const byTool = new Map<string, { calls: number; errors: number; latencies: number[] }>();
  for (const r of stored.values()) {
    const p = r.properties;
    if (!inRange(r) || p.tool === undefined) continue;
    const key = `${p.tool}|${p.server}`;
    const t = byTool.get(key) ?? { calls: 0, errors: 0, latencies: [] };
    t.calls += 1;
    t.errors += ['error', 'upstream_error', 'unavailable'].includes(String(p.outcome)) ? 1 : 0;
    if (typeof p.latencyMs === 'number') t.latencies.push(p.latencyMs);
    byTool.set(key, t);
  }
  expect(tools.map((t) => `${t.tool}|${t.server}`).sort()).toEqual([...byTool.keys()].sort());
  for (const t of tools) {
    const want = byTool.get(`${t.tool}|${t.server}`);
    expect({ calls: t.calls, errors: t.errors }).toEqual({ calls: want?.calls, errors: want?.errors });
    const sorted = [...(want?.latencies ?? [])].sort((a, b) => a - b);
    for (const [level, value] of [
      [0.5, t.latencyMs?.p50],
      [0.95, t.latencyMs?.p95],
      [0.99, t.latencyMs?.p99],
    ] as const) {
      const exact = sorted[Math.max(0, Math.ceil(level * sorted.length) - 1)] ?? 0;
      expect(Math.abs((value ?? 0) - exact)).toBeLessThanOrEqual(exact * LATENCY_ACCURACY + 0.001);
    }
  }
  // Paywalls by form, era, session and product, with the first showing.
  const paywalls = new Map<string, { shown: number; first: number }>();
  for (const r of stored.values()) {
    const p = r.properties;
    if (!inRange(r) || p.outcome !== 'paywall') continue;
    const key = [p.paywall, p.paywallEra, p.checkoutSessionId, p.productId]
      .map((v) => String(v ?? ''))
      .join('|');
    const row = paywalls.get(key) ?? { shown: 0, first: Number.POSITIVE_INFINITY };
    row.shown += 1;
    row.first = Math.min(row.first, Date.parse(r.timestamp));
    paywalls.set(key, row);
  }
  const shown = await handle.analytics.paywalls(base);
  expect(
    Object.fromEntries(
      shown.map((s) => [
        [s.form, s.era, s.checkoutSessionId, s.productId].join('|'),
        { shown: s.shown, first: s.firstShownMs },
      ]),
    ),
  ).toEqual(Object.fromEntries(paywalls));
}

/** Every sandbox call from START to the open slots counted once, the resent at their last time. */
export async function checkCallsUntilNow() {
  const until = { ...base, to: new Date(Date.now() + 15 * 60_000) };
  const calls = (
    await handle.analytics.series({ ...until, grain: 'day', timeZone: 'UTC', groupBy: 'none' })
  ).reduce((sum, r) => sum + r.calls, 0);
  expect(calls).toBe(
    [...stored.values()].filter((r) => r.environment === 'sandbox' && Date.parse(r.timestamp) >= START)
      .length,
  );
}

/**
 * The rollup by customer in both its orders (sorted by customer, which shows the top customers,
 * and by slot, which ranks them and sums the days): in every clean slot, each customer's calls,
 * units and errors equal the test's count of the records there, and a customer gone from a slot
 * reads zero in both.
 */
async function checkCustomerRollups() {
  const clean = (await handle.rollups?.cleanSlots('sandbox', { from: 0, to: Date.now() })) ?? new Map();
  const want = new Map<string, string>();
  const count = new Map<string, { calls: number; units: bigint; errors: number }>();
  for (const r of stored.values()) {
    const slot = floorSlot(Date.parse(r.timestamp));
    if (r.environment !== 'sandbox' || !clean.has(slot)) continue;
    const key = `${slot / 1000}|${r.customerRef}`;
    const c = count.get(key) ?? { calls: 0, units: 0n, errors: 0 };
    c.calls += 1;
    c.units += BigInt(Math.round(r.value * 1e9));
    c.errors += ['error', 'upstream_error', 'unavailable'].includes(String(r.properties.outcome)) ? 1 : 0;
    count.set(key, c);
  }
  for (const [key, c] of count) want.set(key, `${c.calls} ${c.units} ${c.errors}`);
  for (const table of ['usage_rollup_customers_sandbox', 'usage_rollup_customer_slots_sandbox']) {
    const rows = await (
      await handle.client.query({
        query: `SELECT toUnixTimestamp(slot) AS slot, customer_ref AS customer, calls, toString(units) AS units, errors
                  FROM mcpmeter.${table} FINAL
                 WHERE provider_id = {provider:String} AND meter_ref = {meter:String} AND calls > 0`,
        query_params: { provider: PROVIDER, meter: METER },
        format: 'JSONEachRow',
      })
    ).json<{ slot: number; customer: string; calls: string; units: string; errors: string }>();
    const got = new Map(
      rows
        .filter((r) => clean.has(Number(r.slot) * 1000))
        .map((r) => [`${r.slot}|${r.customer}`, `${r.calls} ${billionths(r.units)} ${r.errors}`]),
    );
    expect(got, table).toEqual(want);
  }
}
