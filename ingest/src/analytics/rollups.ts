import { randomBytes } from 'node:crypto';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { Environment, UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { ClickHouse } from '../clickhouse/client';
import { TABLES } from '../usage-store';
import { dayStatements, slotStatements } from './rebuild';
import { inRanges, lastCopies } from './record-sql';
import {
  DAY_MS,
  floorSlot,
  planRange,
  type RangePlan,
  rebuildBatches,
  SLOT_MS,
  type TimeRange,
} from './slots';
import { ROLLUP_TABLES, type RollupTables } from './tables';

/** A slot is rolled once it closed this long ago, so most late records arrive before it is. */
const GRACE_MS = 60_000;
/** Rebuilds of slots this long in all are read from the newest parts (lastCopies), longer ones with FINAL. */
const SHORT_RANGE_MS = 6 * 3_600_000;
/**
 * A short rebuild with at most this many rows in its ranges reads their last copies once into a
 * table of its own (in memory: some 8 MB for records like the proxy's, at most about 110 MB when
 * every record carries the 4 KB of properties the usage API allows), which its statements then
 * read; with more, each statement reads them from the records.
 */
const SCRATCH_ROWS = 25_000;
/** The prefix of those tables; one left by a process that stopped mid-rebuild is dropped after an hour. */
const SCRATCH_PREFIX = 'usage_rebuild_';
const SCRATCH_STALE_US = 3_600_000_000n;
/** How far back, in ingestion time, a rebuilt slot's records are looked for under another time. */
const MOVED_LOOKBACK_MINUTES = 60;
/**
 * How long after its `ingested_at` a stored record may still be invisible to a read: an insert's
 * rows are stamped when the store takes the insert and visible once it is written (seconds for
 * the consumer's batches). The tail look of a roll reads the records stamped since the previous
 * look began, less this.
 */
const VISIBLE_WITHIN_US = 120_000_000n;
/** Slots past the DateTime columns' range are never marked nor rolled (such records read raw). */
const LAST_SLOT_MS = Date.UTC(2100, 0, 1);

const slotText = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');

/**
 * The usage rollups (docs/analytics.md): the ingest consumer marks the slots each stored batch
 * touched; `roll` rebuilds every closed slot not rolled yet and every slot marked since its last
 * roll from the raw records (FINAL, so duplicates count once); `cleanSlots` tells a query which
 * slots the rollups answer exactly. Marks and rolls are timed by the store's own clock, so they
 * compare on one clock whichever process wrote them. Rolling twice, or from two processes at
 * once, writes the same figures under a later version.
 */
export class UsageRollups {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /**
   * Per environment, from when (µs of the store's clock) the next roll's tail look reads the
   * records in the open slots; unset until this process's first look, which reads them all.
   */
  private readonly tailSince: Partial<Record<Environment, bigint>> = {};
  private rebuildCount = 0;

  constructor(
    private readonly clickhouse: ClickHouse,
    private readonly database: string,
    /** The most rows a short rebuild reads once into a table of its own (0: none does). */
    private readonly scratchRows = SCRATCH_ROWS,
  ) {}

  private table(name: string): string {
    return `${this.database}.${name}`;
  }

  /** An environment's rollup tables, with the database. */
  private tables(environment: Environment): RollupTables {
    const names = ROLLUP_TABLES[environment];
    return Object.fromEntries(
      Object.entries(names).map(([key, name]) => [key, this.table(name)]),
    ) as unknown as RollupTables;
  }

  private async rows<T>(query: string, params: Record<string, unknown> = {}): Promise<T[]> {
    const result = await this.clickhouse.client.query({ query, query_params: params, format: 'JSONEachRow' });
    return result.json<T>();
  }

  private async command(query: string, params: Record<string, unknown>): Promise<void> {
    await this.clickhouse.client.command({ query, query_params: params });
  }

  /** How many rebuilds this instance has run; each reads its month's records once. */
  get rebuilds(): number {
    return this.rebuildCount;
  }

  /** Marks the slots these stored records fall in; the consumer calls it after each batch is written. */
  async mark(records: readonly UsageRecord[]): Promise<void> {
    for (const environment of Object.keys(ROLLUP_TABLES) as Environment[]) {
      const slots = new Set<number>();
      for (const r of records) {
        if (r.environment !== environment) continue;
        const slot = floorSlot(Date.parse(r.timestamp));
        if (slot >= 0 && slot < LAST_SLOT_MS) slots.add(slot);
      }
      if (slots.size === 0) continue;
      await this.clickhouse.insertText({
        table: this.tables(environment).marks,
        columns: ['slot'],
        body: Buffer.from([...slots].map((s) => `${slotText(s)}\n`).join('')),
        settings: {},
      });
    }
  }

  /**
   * Before a batch is stored: marks the slots where copies of its records written in the last
   * MOVED_LOOKBACK_MINUTES lie under another time (a retry whose time the API filled in). Once
   * the new copy is stored, merges drop the old one, and nothing would tell its slot's rollup.
   * Only a record whose sender chose its id can come again under another time (`idGiven`): the
   * proxy's records, whose copies all carry one time, cost no look (one cost as much as storing
   * the batch).
   */
  async markMoves(batch: readonly UsageRecord[]): Promise<void> {
    const records = batch.filter((r) => r.idGiven === true);
    if (records.length === 0) return;
    for (const environment of Object.keys(ROLLUP_TABLES) as Environment[]) {
      const slotOf = new Map<string, number>();
      for (const r of records)
        if (r.environment === environment)
          slotOf.set(
            JSON.stringify([r.providerId, r.meterRef, r.customerRef, r.id]),
            floorSlot(Date.parse(r.timestamp)),
          );
      if (slotOf.size === 0) continue;
      const copies = await this.rows<{ p: string; m: string; c: string; id: string; slot: number | string }>(
        `SELECT provider_id AS p, meter_ref AS m, customer_ref AS c, id, toUnixTimestamp(toStartOfFifteenMinutes(timestamp)) AS slot
           FROM ${this.table(TABLES[environment])}
          WHERE ingested_at >= now64(3) - INTERVAL ${MOVED_LOOKBACK_MINUTES} MINUTE
            AND id IN {ids:Array(String)}`,
        { ids: [...new Set(records.filter((r) => r.environment === environment).map((r) => r.id))] },
      );
      const moved = new Set<number>();
      for (const copy of copies) {
        const slot = Number(copy.slot) * 1000;
        const now = slotOf.get(JSON.stringify([copy.p, copy.m, copy.c, copy.id]));
        if (now !== undefined && now !== slot && slot >= 0 && slot < LAST_SLOT_MS) moved.add(slot);
      }
      if (moved.size > 0)
        await this.clickhouse.insertText({
          table: this.tables(environment).marks,
          columns: ['slot'],
          body: Buffer.from([...moved].map((slot) => `${slotText(slot)}\n`).join('')),
          settings: {},
        });
    }
  }

  /**
   * The slots starting in [from, to) that the rollups hold and no record has reached since: slot
   * start (ms) → when it was rolled (µs of the store's clock).
   */
  async cleanSlots(environment: Environment, range: TimeRange): Promise<Map<number, bigint>> {
    const rows = await this.rows<{ slot: number | string; rolled: string }>(
      `SELECT toUnixTimestamp(r.slot) AS slot, toString(toUnixTimestamp64Micro(r.rolled)) AS rolled
         FROM (SELECT slot, max(rolled_at) AS rolled FROM ${this.tables(environment).rolls}
                WHERE slot >= fromUnixTimestamp64Milli({from:Int64}, 'UTC') AND slot < fromUnixTimestamp64Milli({to:Int64}, 'UTC')
                GROUP BY slot) AS r
         LEFT JOIN (SELECT slot, max(marked_at) AS marked FROM ${this.tables(environment).marks}
                WHERE slot >= fromUnixTimestamp64Milli({from:Int64}, 'UTC') AND slot < fromUnixTimestamp64Milli({to:Int64}, 'UTC')
                GROUP BY slot) AS m ON r.slot = m.slot
        WHERE m.marked <= r.rolled`,
      { from: range.from, to: Math.min(range.to, LAST_SLOT_MS) },
    );
    return new Map(rows.map((r) => [Number(r.slot) * 1000, BigInt(r.rolled)]));
  }

  /**
   * Which parts of a range the rollups answer: with `days`, whole UTC days from the day rollup
   * (for questions over the whole range, not per bucket); then clean slots; the rest raw.
   */
  async plan(environment: Environment, range: TimeRange, days: boolean): Promise<RangePlan> {
    const clean = await this.cleanSlots(environment, range);
    const summed = new Map<number, bigint>();
    if (days && range.to - range.from >= DAY_MS) {
      const rows = await this.rows<{ start: number | string; rolled: string }>(
        `SELECT toUnixTimestamp(toDateTime(day, 'UTC')) AS start, toString(toUnixTimestamp64Micro(max(rolled_at))) AS rolled
           FROM ${this.tables(environment).dayRolls}
          WHERE day >= toDate(fromUnixTimestamp64Milli({from:Int64}, 'UTC')) AND day < toDate(fromUnixTimestamp64Milli({to:Int64}, 'UTC'))
          GROUP BY day`,
        { from: range.from, to: Math.min(range.to, LAST_SLOT_MS) },
      );
      for (const row of rows) summed.set(Number(row.start) * 1000, BigInt(row.rolled));
    }
    return planRange(range, clean, summed);
  }

  /** Rolls what is due in both environments; returns the slots rebuilt. */
  async roll(): Promise<number> {
    await this.dropStaleScratch();
    let slots = 0;
    for (const environment of Object.keys(ROLLUP_TABLES) as Environment[])
      slots += await this.rollEnvironment(environment);
    return slots;
  }

  private async rollEnvironment(environment: Environment): Promise<number> {
    const [clock] = await this.rows<{ now: string }>(
      'SELECT toString(toUnixTimestamp64Micro(now64(6))) AS now',
    );
    const version = BigInt(clock?.now ?? '0');
    const closedEnd = Math.min(floorSlot(Number(version / 1000n) - GRACE_MS), LAST_SLOT_MS);
    const due = new Set<number>();
    // Slots after the newest roll, up to the last closed one (from the first record on a first run).
    const [state] = await this.rows<{ rolled: string; last: string | number }>(
      `SELECT count() AS rolled, toUnixTimestamp(max(slot)) AS last FROM ${this.tables(environment).rolls}`,
    );
    let start: number | undefined;
    if (Number(state?.rolled ?? 0) > 0) start = Number(state?.last) * 1000 + SLOT_MS;
    else {
      const [first] = await this.rows<{ records: string; first: string | number }>(
        `SELECT count() AS records, toUnixTimestamp64Milli(min(timestamp)) AS first FROM ${this.table(TABLES[environment])}`,
      );
      // From the start of its UTC day, so the first day can be summed whole.
      if (Number(first?.records ?? 0) > 0)
        start = Math.max(0, Math.floor(Number(first?.first) / DAY_MS) * DAY_MS);
    }
    if (start !== undefined) for (let s = start; s < closedEnd; s += SLOT_MS) due.add(s);
    // Closed slots marked after their last roll, or never rolled.
    const dirty = await this.rows<{ slot: number | string }>(
      `SELECT toUnixTimestamp(m.slot) AS slot
         FROM (SELECT slot, max(marked_at) AS marked FROM ${this.tables(environment).marks} GROUP BY slot) AS m
         LEFT JOIN (SELECT slot, max(rolled_at) AS rolled FROM ${this.tables(environment).rolls} GROUP BY slot) AS r
           ON m.slot = r.slot
        WHERE m.marked > r.rolled AND m.slot < fromUnixTimestamp64Milli({closedEnd:Int64}, 'UTC')`,
      { closedEnd },
    );
    for (const row of dirty) due.add(Number(row.slot) * 1000);
    // A month at a time (a backfill is resumable), each month's runs in one rebuild.
    for (const ranges of rebuildBatches(due)) await this.rebuild(environment, ranges, version);
    // Records in the slots not closed yet that were sent before under another time: their
    // earlier slots are marked now, not when these close. A record an earlier look of this
    // process already read needs no second one, so only those stored since are read: an idle
    // roll reads nothing, a busy one what came in since the last (not every record of the open
    // slots, a full 16 minutes of traffic, every 30 s).
    await this.markMoved(
      environment,
      "timestamp >= fromUnixTimestamp64Milli({tail:Int64}, 'UTC')",
      { tail: closedEnd },
      this.tailSince[environment],
    );
    this.tailSince[environment] = version - VISIBLE_WITHIN_US;
    // The UTC days those slots belong to, once all their slots are closed, summed again.
    const days = new Set([...due].map((slot) => Math.floor(slot / DAY_MS) * DAY_MS));
    for (const day of [...days].sort((a, b) => a - b))
      if (day + DAY_MS <= closedEnd) await this.sumDay(environment, day, version);
    return due.size;
  }

  /**
   * Rebuilds the slots of some ranges of one month at `version` (µs of the store's clock, read
   * before the records were): the figures, then zero rows for any group the ranges no longer
   * have (a record sent again under its id with other properties), then the rolls that let
   * queries use them. The month's records are read once for all its ranges.
   */
  private async rebuild(
    environment: Environment,
    ranges: readonly TimeRange[],
    version: bigint,
  ): Promise<void> {
    this.rebuildCount += 1;
    const raw = inRanges('timestamp', ranges, 'r');
    // Each record's last copy once, as FINAL gives it: for short ranges (the slots just closed,
    // late records') the ranges' records and the copies since of those a sender chose the id of
    // (late records make the ranges' records old: reading every identity written since would
    // read the month), with FINAL over the partition for long ones.
    const table = this.table(TABLES[environment]);
    const short = ranges.reduce((sum, range) => sum + (range.to - range.from), 0) <= SHORT_RANGE_MS;
    const slots = inRanges('slot', ranges, 'r');
    const params = { ...raw.params, version: version.toString() };
    if (short) await this.markMoved(environment, raw.sql, raw.params);
    const scratch = short ? await this.scratchCopies(table, raw, version) : undefined;
    try {
      const records =
        scratch !== undefined
          ? `(SELECT * FROM ${scratch})`
          : short
            ? lastCopies(table, raw.sql, 'given')
            : `(SELECT * FROM ${table} FINAL WHERE ${raw.sql})`;
      for (const statement of slotStatements(this.tables(environment), records, slots.sql))
        await this.command(statement, params);
    } finally {
      if (scratch !== undefined) await this.command(`DROP TABLE IF EXISTS ${scratch}`, {});
    }
    const starts: number[] = [];
    for (const range of ranges)
      for (let slot = range.from; slot < range.to; slot += SLOT_MS) starts.push(slot);
    await this.command(
      `INSERT INTO ${this.tables(environment).rolls}
       SELECT toDateTime(intDiv(start, 1000), 'UTC'), fromUnixTimestamp64Micro({version:Int64}, 'UTC')
         FROM (SELECT arrayJoin({starts:Array(Int64)}) AS start)`,
      { version: version.toString(), starts },
    );
  }

  /**
   * The last copies of the records in a short rebuild's ranges, read once into a table of the
   * rebuild's own when there are few (SCRATCH_ROWS), so its five statements do not each look for
   * them again (each look reads the ranges' records and, beyond them, what was written since:
   * about 0.25 s at 10 M records for a late record's quarter hour). Its name, or undefined.
   */
  private async scratchCopies(
    table: string,
    raw: { sql: string; params: Record<string, number> },
    version: bigint,
  ): Promise<string | undefined> {
    const [counted] = await this.rows<{ rows: string }>(
      `SELECT count() AS rows FROM ${table} WHERE ${raw.sql}`,
      raw.params,
    );
    if (Number(counted?.rows ?? 0) > this.scratchRows) return undefined;
    const name = this.table(`${SCRATCH_PREFIX}${version}_${randomBytes(4).toString('hex')}`);
    await this.command(`CREATE TABLE ${name} ENGINE = Memory AS SELECT * FROM ${table} WHERE 0`, {});
    try {
      await this.command(
        `INSERT INTO ${name} SELECT * FROM ${lastCopies(table, raw.sql, 'given')}`,
        raw.params,
      );
    } catch (error) {
      await this.command(`DROP TABLE IF EXISTS ${name}`, {});
      throw error;
    }
    return name;
  }

  /** Drops the rebuild tables a stopped process left (named by their rebuild's version) over an hour old. */
  private async dropStaleScratch(): Promise<void> {
    const stale = await this.rows<{ name: string }>(
      `SELECT name FROM system.tables
        WHERE database = {database:String} AND startsWith(name, {prefix:String})
          AND toUInt64OrZero(splitByChar('_', substring(name, length({prefix:String}) + 1))[1])
              < toUInt64(toUnixTimestamp64Micro(now64(6))) - {stale:UInt64}`,
      { database: this.database, prefix: SCRATCH_PREFIX, stale: SCRATCH_STALE_US.toString() },
    );
    for (const { name } of stale)
      if (/^usage_rebuild_\d+_[0-9a-f]{8}$/.test(name))
        await this.command(`DROP TABLE IF EXISTS ${this.table(name)}`, {});
  }

  /**
   * Marks the slots of the other copies of these records written up to MOVED_LOOKBACK before
   * them: a record resent under its id with another time (a retry whose time the API filled in)
   * leaves its earlier slot, which must be rolled again without it. The lookback reads only the
   * newest parts; a record resent with another time later than that is counted in both slots
   * until they are rolled again (docs/analytics.md). With `since` (µs of the store's clock), only
   * the window's records stored from then on are looked for.
   */
  private async markMoved(
    environment: Environment,
    window: string,
    params: Record<string, number>,
    since?: bigint,
  ) {
    const table = this.table(TABLES[environment]);
    // Only a record whose sender chose its id can have a copy under another time (markMoves):
    // the proxy's records, nearly all of them, are not looked for (`id_given`, migration 008).
    const looked =
      since === undefined
        ? `${window} AND id_given`
        : `${window} AND id_given AND ingested_at >= fromUnixTimestamp64Micro({since:Int64}, 'UTC')`;
    await this.command(
      `INSERT INTO ${this.tables(environment).marks} (slot)
       SELECT DISTINCT toDateTime(toStartOfFifteenMinutes(timestamp), 'UTC') FROM ${table}
        WHERE ingested_at >= (SELECT ifNull(minOrNull(ingested_at), toDateTime64('2299-12-31 00:00:00', 3, 'UTC'))
                                FROM ${table} WHERE ${looked}) - INTERVAL ${MOVED_LOOKBACK_MINUTES} MINUTE
          AND (provider_id, meter_ref, customer_ref, id) IN
              (SELECT provider_id, meter_ref, customer_ref, id FROM ${table} WHERE ${looked})
          AND NOT ${window}
          AND timestamp >= toDateTime64('1970-01-01 00:00:00', 3, 'UTC')
          AND timestamp < fromUnixTimestamp64Milli(${LAST_SLOT_MS}, 'UTC')`,
      since === undefined ? params : { ...params, since: since.toString() },
    );
  }

  /** Sums a UTC day's slots into the day rollup at `version`, zeroing groups it no longer has. */
  private async sumDay(environment: Environment, day: number, version: bigint): Promise<void> {
    for (const statement of dayStatements(this.tables(environment)))
      await this.command(statement, { day, version: version.toString() });
  }

  /** Rolls every `intervalMs` until stopped; a failed round is logged and tried again next time. */
  start(intervalMs: number, logger: Logger): void {
    const tick = () => {
      this.running = this.roll()
        .then((slots) => {
          if (slots > 0) logger.debug({ slots }, 'usage rollups rebuilt');
        })
        .catch((error: unknown) => logger.error({ err: error }, 'usage rollup failed; the slots stay raw'))
        .finally(() => {
          this.running = undefined;
          if (this.timer !== undefined) this.timer = setTimeout(tick, intervalMs).unref();
        });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async stop(): Promise<void> {
    const timer = this.timer;
    this.timer = undefined;
    if (timer !== undefined) clearTimeout(timer);
    await this.running;
  }
}
