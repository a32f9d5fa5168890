import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestUsageStore } from '../../test/helpers/usage-store';
import { UsageRollups } from '../src/analytics/rollups';
import { ceilSlot, floorSlot, SLOT_MS } from '../src/analytics/slots';
import { migrateClickHouse } from '../src/clickhouse/client';
import {
  base,
  checkCallsUntilNow,
  checkEverything,
  END,
  HOUR,
  inRange,
  METER,
  next,
  outcomeOf,
  PROVIDER,
  record,
  SLOTS_STARTING_INSIDE,
  START,
  stored,
  useStore,
  write,
} from './helpers/rollup-fixture';

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
  useStore(handle);
});
afterAll(async () => {
  await handle?.close();
});

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

  it('moves a customer out of a slot in both orders of the rollup by customer', async () => {
    // The only record of its customer in its slot, resent an hour later under its id: the
    // customer's row there must read zero in the rollup sorted by customer and the one by slot.
    const at = ceilSlot(START) + 40 * SLOT_MS + 2_000;
    const solo: UsageRecord = { ...record(at), customerRef: 'cus_solo', idGiven: true };
    await write([solo]);
    await handle.rollups?.roll();
    await checkEverything();
    await new Promise((resolve) => setTimeout(resolve, 5)); // a later ingestion time
    await write([{ ...solo, timestamp: new Date(at + HOUR).toISOString() }]);
    await handle.rollups?.roll();
    await checkEverything();
    for (const table of ['usage_rollup_customers_sandbox', 'usage_rollup_customer_slots_sandbox']) {
      const rows = await (
        await handle.client.query({
          query: `SELECT calls FROM mcpmeter.${table} FINAL
                   WHERE provider_id = {provider:String} AND customer_ref = 'cus_solo'
                     AND slot = fromUnixTimestamp64Milli({slot:Int64}, 'UTC')`,
          query_params: { provider: PROVIDER, slot: floorSlot(at) },
          format: 'JSONEachRow',
        })
      ).json<{ calls: string }>();
      expect(
        rows.map((r) => Number(r.calls)),
        table,
      ).toEqual([0]);
    }
  });

  it('fills the rollup by customer sorted by slot from the one sorted by customer (an upgrade)', async () => {
    await handle.rollups?.roll();
    const clean = await handle.rollups?.cleanSlots('sandbox', { from: START, to: END });
    // As before migration 009: the table empty, the migration not recorded.
    await handle.client.command({ query: 'TRUNCATE TABLE mcpmeter.usage_rollup_customer_slots_sandbox' });
    await handle.client.command({
      query: "DELETE FROM mcpmeter.schema_migrations WHERE version = '009_customer_slot_rollups.sql'",
    });
    await migrateClickHouse(handle.client, 'mcpmeter');
    // Filled at its rows' versions: the same slots clean, nothing to roll again, every answer
    // (the ranking of customers from it) and both orders exact.
    expect(await handle.rollups?.cleanSlots('sandbox', { from: START, to: END })).toEqual(clean);
    await checkEverything();
  });

  it('rolls the same when a rebuild reads the records in each statement, and leaves no table of its own', async () => {
    const tables = async () =>
      (
        await (
          await handle.client.query({
            query:
              "SELECT name FROM system.tables WHERE database = 'mcpmeter' AND startsWith(name, 'usage_rebuild_')",
            format: 'JSONEachRow',
          })
        ).json<{ name: string }>()
      ).map((t) => t.name);
    // A table a stopped process left mid-rebuild (named by its rebuild's version, µs) goes at the
    // next roll once an hour old; one of a rebuild running now stays.
    const fresh = `usage_rebuild_${BigInt(Date.now()) * 1000n}_0000beef`;
    for (const name of ['usage_rebuild_1_0000dead', fresh])
      await handle.client.command({
        query: `CREATE TABLE mcpmeter.${name} ENGINE = Memory AS SELECT * FROM mcpmeter.usage_records_sandbox WHERE 0`,
      });
    await handle.rollups?.roll();
    expect(await tables()).toEqual([fresh]);
    await handle.client.command({ query: `DROP TABLE mcpmeter.${fresh}` });
    // Rebuilds with more rows than a table of their own may hold (here none may): late records
    // and a record resent under its id with another time, every answer still exact.
    const direct = new UsageRollups(handle.clickhouse, 'mcpmeter', 0);
    // Merges would drop the resent record's first copy before the roll looks for its newest.
    await handle.client.command({ query: 'SYSTEM STOP MERGES mcpmeter.usage_records_sandbox' });
    const [moved] = [...stored.values()].filter(
      (r) => inRange(r) && Date.parse(r.timestamp) < END - 6 * HOUR,
    );
    if (moved === undefined) throw new Error('no record to resend');
    await write(
      Array.from({ length: 5 }, (_, i) => record(ceilSlot(START) + (20 * i + 5) * SLOT_MS + 3_000)),
    );
    await new Promise((resolve) => setTimeout(resolve, 5)); // a later ingestion time
    await write([
      { ...moved, timestamp: new Date(Date.parse(moved.timestamp) + 2 * HOUR).toISOString(), idGiven: true },
    ]);
    try {
      expect(await direct.roll()).toBeGreaterThan(0);
      await checkEverything();
    } finally {
      await handle.client.command({ query: 'SYSTEM START MERGES mcpmeter.usage_records_sandbox' });
    }
    expect(await tables()).toEqual([]);
    expect(await handle.rollups?.cleanSlots('sandbox', { from: START, to: END })).toEqual(
      await direct.cleanSlots('sandbox', { from: START, to: END }),
    );
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

  it('drops a copy resent past both looks once its earlier slot is rolled again', async () => {
    // The first copy stored three hours before its resend (ingestion time set back): past the
    // consumer's and the roll's lookback, so nothing marks its slot and it is counted in both
    // slots meanwhile (docs/analytics.md). The resend's slot is rolled on its own first; then a
    // late record makes the earlier slot roll again by itself, its window not holding the
    // resend: only the rebuild's look at copies beyond its window can drop the first one. Merges
    // are stopped, as two copies in different months (partitions) are never merged. Last in the
    // file: the resend's slot stays marked until the next roll, and with merges stopped the first
    // copies of the records resent at the time of now (tests above) stay too, so for two minutes
    // each roll's look at the open slots marks their earlier slots again (VISIBLE_WITHIN_US).
    await handle.rollups?.roll();
    const at = ceilSlot(START) + 52 * SLOT_MS + 3_000;
    const early: UsageRecord = { ...record(at), idGiven: true };
    await write([early]);
    await handle.rollups?.roll();
    await handle.client.command({
      query: `ALTER TABLE mcpmeter.usage_records_sandbox UPDATE ingested_at = ingested_at - INTERVAL 3 HOUR
               WHERE provider_id = {provider:String} AND id = {id:String}`,
      query_params: { provider: PROVIDER, id: early.id },
      clickhouse_settings: { mutations_sync: '2' },
    });
    await handle.client.command({ query: 'SYSTEM STOP MERGES mcpmeter.usage_records_sandbox' });
    try {
      await write([{ ...early, timestamp: new Date(at + 5 * HOUR).toISOString() }]);
      await handle.rollups?.roll();
      const versions = async () =>
        (await handle.rollups?.cleanSlots('sandbox', { from: START, to: END })) ?? new Map();
      const before = await versions();
      await write([record(at + 60_000)]);
      await handle.rollups?.roll();
      const after = await versions();
      // The earlier slot rolled again, the resend's clean before (so not in its rebuild's
      // window; the rebuild marks it now, having found the copy there).
      expect(before.has(floorSlot(at + 5 * HOUR))).toBe(true);
      expect(after.get(floorSlot(at))).toBeGreaterThan(before.get(floorSlot(at)) ?? 0n);
      await checkEverything();
    } finally {
      await handle.client.command({ query: 'SYSTEM START MERGES mcpmeter.usage_records_sandbox' });
    }
  });
});
