import type { ToolStatsQuery, UsageSeriesQuery } from '@mcp-meter/contracts/usage';
import type { Environment, UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestUsageStore } from '../../test/helpers/usage-store';
import { LATENCY_ACCURACY } from '../src/analytics/latency';
import { ceilSlot, floorSlot, SLOT_MS } from '../src/analytics/slots';
import { migrateClickHouse } from '../src/clickhouse/client';
import { storeUsageBatch } from '../src/service';

/**
 * The analytics rollups against the raw records, in the embedded ClickHouse: every answer equals
 * the test's own account of the records it wrote (calls, units and errors to the unit, latency
 * percentiles within 1 % of the exact nearest rank), before the slots are rolled, once they are,
 * while late records and a record resent with other properties make slots dirty, and after those
 * are rolled again. A row planted in the rollup shows the rolled slots really are read from it.
 */
let handle: Awaited<ReturnType<typeof openTestUsageStore>>;
beforeAll(async () => {
  handle = await openTestUsageStore('rollups');
});
afterAll(async () => {
  await handle?.close();
});

const PROVIDER = 'prv_roll';
const METER = 'mtr_roll';
const HOUR = 3_600_000;
// Three days ending two days ago: every slot is closed by the store's clock.
const END = floorSlot(Date.now() - 2 * 24 * HOUR) + 7 * 60_000 + 123; // not on a slot edge
const START = END - 3 * 24 * HOUR + 11 * 60_000 + 457; // nor this

const SLOTS_STARTING_INSIDE = (floorSlot(END) - ceilSlot(START)) / SLOT_MS + 1;

let seed = 7;
const next = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
  return seed / 2_147_483_648;
};
const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)] as T;

let serial = 0;
function record(
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
const stored = new Map<string, UsageRecord>();
async function write(records: UsageRecord[]) {
  // What the ingest consumer does with a batch.
  await storeUsageBatch(handle.store, handle.rollups, records);
  for (const r of records) stored.set(`${r.environment}/${r.id}`, r);
}

const ZONES = ['UTC', 'Asia/Kolkata'] as const;
const GROUPS = ['none', 'tool', 'customer', 'product', 'plan', 'server', 'outcome'] as const;
const GRAINS = ['hour', 'day'] as const;
const base: ToolStatsQuery = {
  providerId: PROVIDER,
  environment: 'sandbox',
  meterRef: METER,
  from: new Date(START),
  to: new Date(END),
};

function outcomeOf(p: Record<string, unknown>): string {
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

const inRange = (r: UsageRecord) =>
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

const billionths = (decimal: string) => {
  const [whole = '0', fraction = ''] = decimal.split('.');
  return BigInt(whole) * 1_000_000_000n + BigInt(fraction.padEnd(9, '0'));
};

/**
 * Every question checked; `full` asks each time zone at each grain, otherwise day in UTC and
 * hour in Kolkata (where a half-hour offset splits UTC hours), enough after the first full checks.
 */
async function checkEverything(full = false) {
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
async function checkCallsUntilNow() {
  const until = { ...base, to: new Date(Date.now() + 15 * 60_000) };
  const calls = (
    await handle.analytics.series({ ...until, grain: 'day', timeZone: 'UTC', groupBy: 'none' })
  ).reduce((sum, r) => sum + r.calls, 0);
  expect(calls).toBe(
    [...stored.values()].filter((r) => r.environment === 'sandbox' && Date.parse(r.timestamp) >= START)
      .length,
  );
}

describe('usage rollups', () => {
  it('answer every question exactly before and after the slots are rolled', async () => {
    // 2,000 records over three days in batches, some batches sent twice (a replay).
    const all = Array.from({ length: 2000 }, () => record(START - HOUR + next() * (END - START + 2 * HOUR)));
    for (let i = 0; i < all.length; i += 250) {
      const batch = all.slice(i, i + 250);
      await write(batch);
      if (i % 1000 === 0) await write(batch);
    }
    // Live records in the same slots: sandbox answers never count them.
    await write(Array.from({ length: 200 }, () => record(START + next() * (END - START), 'live')));
    expect((await handle.rollups?.cleanSlots('sandbox', { from: START, to: END }))?.size).toBe(0);
    await checkEverything(true);

    const rolled = await handle.rollups?.roll();
    expect(rolled).toBeGreaterThan(280);
    const clean = (await handle.rollups?.cleanSlots('sandbox', { from: START, to: END })) ?? new Map();
    // Every slot that starts inside the range is rolled (the last one reaches past its end), and
    // the UTC days wholly inside it answer the tools from the day rollup.
    expect(clean.size).toBe(SLOTS_STARTING_INSIDE);
    const plan = await handle.rollups?.plan('sandbox', { from: START, to: END }, true);
    const firstDay = Math.ceil(START / (24 * HOUR)) * 24 * HOUR;
    const wholeDays = Math.floor((END - firstDay) / (24 * HOUR));
    expect(wholeDays).toBeGreaterThan(0);
    expect(plan?.days.reduce((sum, d) => sum + (d.to - d.from), 0)).toBe(wholeDays * 24 * HOUR);
    await checkEverything(true);
    // A second roll with nothing new rebuilds none of these slots (only ones the clock closed since).
    await handle.rollups?.roll();
    expect(await handle.rollups?.cleanSlots('sandbox', { from: START, to: END })).toEqual(clean);
  });

  it('reads the rolled slots from the rollups, and dirty ones from the records until rolled again', async () => {
    const slot = floorSlot(START) + 10 * SLOT_MS;
    // A row planted in a clean slot, newer than its figures: the answer moves by it.
    const [row] = await (
      await handle.client.query({
        query: `SELECT tool, server, product, outcome FROM mcpmeter.usage_rollup_sandbox FINAL
                 WHERE slot = fromUnixTimestamp64Milli({slot:Int64}, 'UTC') AND calls > 0 LIMIT 1`,
        query_params: { slot },
        format: 'JSONEachRow',
      })
    ).json<{ tool: string; server: string; product: string; outcome: string }>();
    expect(row).toBeDefined();
    await handle.client.command({
      query: `INSERT INTO mcpmeter.usage_rollup_sandbox
              SELECT {provider:String}, {meter:String}, fromUnixTimestamp64Milli({slot:Int64}, 'UTC'),
                     {tool:String}, {server:String}, {product:String}, {outcome:String}, 1000, 0, 0, 0, map(), now64(6)`,
      query_params: { ...row, provider: PROVIDER, meter: METER, slot },
    });
    // One in the groups rollup, replacing the slot's figures for that tool...
    await handle.client.command({
      query: `INSERT INTO mcpmeter.usage_rollup_groups_sandbox
              SELECT {provider:String}, {meter:String}, 'tool', fromUnixTimestamp64Milli({slot:Int64}, 'UTC'),
                     {tool:String}, 1000, 0, 0, now64(6)`,
      query_params: { tool: row?.tool, provider: PROVIDER, meter: METER, slot },
    });
    // ...and one in the per-slot totals, which replaces the slot's figures (its only group).
    await handle.client.command({
      query: `INSERT INTO mcpmeter.usage_rollup_totals_sandbox
              SELECT {provider:String}, {meter:String}, fromUnixTimestamp64Milli({slot:Int64}, 'UTC'), 5000, 0, 0, now64(6)`,
      query_params: { provider: PROVIDER, meter: METER, slot },
    });
    const total = async (groupBy: 'none' | 'tool') =>
      (await handle.analytics.series({ ...base, grain: 'day', timeZone: 'UTC', groupBy })).reduce(
        (sum, r) => sum + r.calls,
        0,
      );
    const counted = [...stored.values()].filter(inRange).length;
    expect(await total('tool')).toBeGreaterThan(counted + 900);
    expect(await total('none')).toBeGreaterThan(counted + 4000);

    // The slot marked (a late record in it) is read raw: the planted row no longer counts.
    await write([record(slot + 1_000)]);
    await checkEverything();
    expect(await total('tool')).toBe(counted + 1);
    expect(await total('none')).toBe(counted + 1);

    // A record resent under its id with another tool moves its call; late records land in old slots.
    // The only record of its group in its slot: moved away, the group must read zero there.
    const shape = (r: UsageRecord) =>
      [
        floorSlot(Date.parse(r.timestamp)),
        r.properties.tool,
        r.properties.server,
        r.properties.productId,
        r.properties.planId,
        outcomeOf(r.properties),
      ].join('|');
    const groups = new Map<string, number>();
    for (const r of stored.values())
      if (r.environment === 'sandbox') groups.set(shape(r), (groups.get(shape(r)) ?? 0) + 1);
    const moved = [...stored.values()].find(
      (r) => inRange(r) && r.properties.tool !== undefined && groups.get(shape(r)) === 1,
    );
    if (moved === undefined) throw new Error('no record to move');
    await write([
      { ...moved, properties: { ...moved.properties, tool: 'a_new_tool' } },
      ...Array.from({ length: 50 }, () => record(START + next() * (END - START))),
    ]);
    await checkEverything();
    expect(await handle.rollups?.roll()).toBeGreaterThan(0);
    // Rolled again: the planted row is superseded, the moved call counted under its new tool only.
    await checkEverything();
    const clean = (await handle.rollups?.cleanSlots('sandbox', { from: START, to: END })) ?? new Map();
    expect(clean.has(slot)).toBe(true);
    expect(clean.has(floorSlot(Date.parse(moved.timestamp)))).toBe(true);
    expect(clean.size).toBe(SLOTS_STARTING_INSIDE);
    // The group the record left holds a zero row, which no answer shows.
    const [left] = await (
      await handle.client.query({
        query: `SELECT calls FROM mcpmeter.usage_rollup_sandbox FINAL
                 WHERE slot = fromUnixTimestamp64Milli({slot:Int64}, 'UTC') AND tool = {tool:String}
                   AND server = {server:String} AND product = {product:String}`,
        query_params: {
          slot: floorSlot(Date.parse(moved.timestamp)),
          tool: String(moved.properties.tool),
          server: String(moved.properties.server ?? ''),
          product: String(moved.properties.productId ?? ''),
        },
        format: 'JSONEachRow',
      })
    ).json<{ calls: string }>();
    expect(Number(left?.calls)).toBe(0);
  });

  it("rolls late records scattered over a month's slots in one rebuild a month", async () => {
    await handle.rollups?.roll();
    const before = handle.rollups?.rebuilds ?? 0;
    // Ten slots apart inside the range, and three in the month before the range's start month.
    const first = new Date(START);
    const earlier = Date.UTC(first.getUTCFullYear(), first.getUTCMonth() - 1, 3);
    const late = [
      ...Array.from({ length: 10 }, (_, i) => record(ceilSlot(START) + (14 * i + 3) * SLOT_MS + 1_000)),
      ...Array.from({ length: 3 }, (_, i) => record(earlier + i * 2 * 24 * HOUR + 5_000)),
    ];
    await write(late);
    await checkEverything();
    await handle.rollups?.roll();
    // One rebuild per month touched; one more at most if a slot closed since the roll above
    // (now's month, unless it joins a month already being rebuilt).
    const months = new Set(late.map((r) => r.timestamp.slice(0, 7)));
    const rebuilds = (handle.rollups?.rebuilds ?? 0) - before;
    expect(rebuilds).toBeGreaterThanOrEqual(months.size);
    expect(rebuilds).toBeLessThanOrEqual(months.size + 1);
    await checkEverything();
    expect((await handle.rollups?.cleanSlots('sandbox', { from: START, to: END }))?.size).toBe(
      SLOTS_STARTING_INSIDE,
    );
    // The earlier month's slots are rolled and answer exactly.
    const week = { from: earlier, to: earlier + 7 * 24 * HOUR };
    const clean = (await handle.rollups?.cleanSlots('sandbox', week)) ?? new Map();
    expect([...clean.keys()].sort((a, b) => a - b)).toEqual(
      late.slice(10).map((r) => floorSlot(Date.parse(r.timestamp))),
    );
    const series = await handle.analytics.series({
      ...base,
      from: new Date(week.from),
      to: new Date(week.to),
      grain: 'day',
      timeZone: 'UTC',
      groupBy: 'none',
    });
    expect(series.map((r) => r.calls)).toEqual([1, 1, 1]);
  });

  it('moves a record resent under its id with another time out of its earlier slot', async () => {
    // Resent by a sender that chose the id (the usage API's `id`): only such a record can move.
    const later = (r: UsageRecord, at: number): UsageRecord => ({
      ...r,
      timestamp: new Date(at).toISOString(),
      idGiven: true,
    });
    const candidates = [...stored.values()].filter(
      (r) => inRange(r) && Date.parse(r.timestamp) < END - 6 * HOUR,
    );
    // One resent an hour later, inside the range: counted in its new slot only once the roll
    // that rebuilds the new slot has marked the old one.
    const [first, second] = candidates;
    if (first === undefined || second === undefined) throw new Error('no records to resend');
    await new Promise((resolve) => setTimeout(resolve, 5)); // a later ingestion time than the first copy
    await write([later(first, Date.parse(first.timestamp) + HOUR)]);
    expect(await handle.rollups?.roll()).toBeGreaterThan(0);
    await checkEverything();
    await handle.rollups?.roll();
    await checkEverything();
    // One resent with the time of now (a retry whose time the API filled in): its earlier slot is
    // marked by the next roll, while the new slot is still open.
    await write([later(second, Date.now())]);
    await handle.rollups?.roll();
    await checkCallsUntilNow();
    await checkEverything();
  });

  it("marks the earlier slot of a resend stored past the consumer's look, in the next roll", async () => {
    // Two consumers storing two copies at once each look for the other before it is stored: the
    // roll's look at the open slots catches it. Rolls before it have looked at what was stored
    // then; this one reads what came in since, which must still include the resend.
    await handle.rollups?.roll();
    const third = [...stored.values()].filter(
      (r) => inRange(r) && Date.parse(r.timestamp) < END - 6 * HOUR,
    )[2];
    if (third === undefined) throw new Error('no record to resend');
    const resent: UsageRecord = { ...third, timestamp: new Date().toISOString(), idGiven: true };
    await handle.store.insert([resent]);
    await handle.rollups?.mark([resent]);
    stored.set(`${resent.environment}/${resent.id}`, resent);
    await handle.rollups?.roll();
    await checkCallsUntilNow();
    await checkEverything();
  });

  it('rebuilds the slots rolled before a rollup table existed (an upgrade), reading them raw meanwhile', async () => {
    await handle.rollups?.roll();
    // What is clean now (a record resent with the time of now keeps its earlier slot marked
    // while the new copy's slot is open: test above).
    const clean = await handle.rollups?.cleanSlots('sandbox', { from: START, to: END });
    expect(clean?.size).toBeGreaterThan(SLOTS_STARTING_INSIDE - 3);
    // As before migration 007: no groups rollup rows, the migration not recorded.
    await handle.client.command({ query: 'TRUNCATE TABLE mcpmeter.usage_rollup_groups_sandbox' });
    await handle.client.command({
      query: "DELETE FROM mcpmeter.schema_migrations WHERE version = '007_group_rollups.sql'",
    });
    expect(await migrateClickHouse(handle.client, 'mcpmeter')).toContain('007_group_rollups.sql');
    // Every rolled slot is marked: read from the records, exactly, until rolled again.
    expect((await handle.rollups?.cleanSlots('sandbox', { from: START, to: END }))?.size).toBe(0);
    await checkEverything();
    await handle.rollups?.roll();
    // The same slots clean again (the store answers them in no particular order).
    const again = await handle.rollups?.cleanSlots('sandbox', { from: START, to: END });
    expect([...(again ?? []).keys()].sort((a, b) => a - b)).toEqual(
      [...(clean ?? []).keys()].sort((a, b) => a - b),
    );
    await checkEverything();
  });
});
