import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { createLogger } from '@mcp-meter/contracts/kit';
import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { describe, expect, it } from 'vitest';
import { pollUntil } from '../../test/helpers/poll';
import { tempDirs } from '../../test/helpers/temp-dirs';
import { usageRecord } from '../../test/helpers/usage-records';
import { BatchingUsageEmitter } from '../src/emitter';

/**
 * The emitter past its memory bound (the bus down or slow): the oldest records go to the spill
 * file off the event loop, and every record reaches the bus exactly once when it takes records
 * again, also while spills and their replay overlap.
 */
const logger = createLogger({ level: 'silent', name: 'spill-test' });
const tempDir = tempDirs('spill');

/** A bus that refuses every publish while `down`, and else takes it after `publishMs`. */
function switchablePublisher(publishMs: number) {
  const state = { down: true, published: [] as string[], publishes: 0 };
  const publisher: UsagePublisher = {
    async publish(records) {
      state.publishes++;
      await new Promise((resolve) => setTimeout(resolve, publishMs));
      if (state.down) throw new Error('the bus is down');
      state.published.push(...records.map((r) => r.id));
    },
    async close() {},
  };
  return { publisher, state };
}

/** A bus that takes every publish, keeping the records in `into`. */
const recordingPublisherInto = (into: UsageRecord[]): UsagePublisher => ({
  async publish(records) {
    into.push(...records);
  },
  async close() {},
});

const emitterOn = (dir: string, publisher: UsagePublisher, maxQueued: number) =>
  new BatchingUsageEmitter(publisher, {
    maxBatch: 50,
    lingerMs: 1,
    maxQueued,
    retryDelayMs: 5,
    spillDir: dir,
    writeAhead: true,
    logger,
  });

const spillLines = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith('spill-'))
    .flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
    );

/** Each id once, in order of first appearance, and the ids seen more than once. */
function tally(ids: readonly string[]) {
  const seen = new Set<string>();
  const twice: string[] = [];
  for (const id of ids) {
    if (seen.has(id)) twice.push(id);
    seen.add(id);
  }
  return { unique: seen.size, twice };
}

/**
 * Brings the bus back and waits for every record on it, then closes the emitter: each of `ids`
 * arrived once, and no spill or spool file is left.
 */
async function deliversEachOnce(
  dir: string,
  bus: ReturnType<typeof switchablePublisher>,
  emitter: BatchingUsageEmitter,
  ids: readonly string[],
) {
  bus.state.down = false;
  await pollUntil(
    async () => tally(bus.state.published).unique,
    (unique) => unique === ids.length,
    { what: 'every record on the bus', timeoutMs: 10_000 },
  );
  await emitter.close();
  expect(tally(bus.state.published)).toEqual({ unique: ids.length, twice: [] });
  expect(new Set(bus.state.published)).toEqual(new Set(ids));
  // The spool let every record go once the bus (or the spill file) had it; the spill file is replayed.
  expect(readdirSync(dir).filter((f) => f.endsWith('.jsonl'))).toEqual([]);
}

/** Emits `turns` × `perTurn` records, a millisecond apart, calling `afterTurn` after each; their ids. */
async function emitInTurns(
  emitter: BatchingUsageEmitter,
  prefix: string,
  turns: number,
  perTurn: number,
  afterTurn = () => {},
) {
  const ids: string[] = [];
  for (let turn = 0; turn < turns; turn++) {
    for (let i = 0; i < perTurn; i++) {
      const id = `${prefix}-${turn}-${i}`;
      ids.push(id);
      emitter.emit(usageRecord({ id }));
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
    afterTurn();
  }
  return ids;
}

/**
 * Waits (the bus up) until the queue and every spill file are on the bus, then closes the
 * emitter: each of `ids` arrived once.
 */
async function everyRecordOnTheBus(
  dir: string,
  emitter: BatchingUsageEmitter,
  bus: ReturnType<typeof switchablePublisher>,
  ids: readonly string[],
) {
  await pollUntil(
    async () => ({ stats: emitter.stats(), files: readdirSync(dir).filter((f) => f.startsWith('spill-')) }),
    (s) =>
      s.stats.queued === 0 && s.stats.published + s.stats.replayed === ids.length && s.files.length === 0,
    { what: 'the queue and every spill file on the bus', timeoutMs: 30_000 },
  );
  await emitter.close();
  expect(tally(bus.state.published)).toEqual({ unique: ids.length, twice: [] });
  expect(new Set(bus.state.published)).toEqual(new Set(ids));
}

describe('the usage emitter past its memory bound', () => {
  it('spills off the event loop, keeps memory bounded, and delivers every record once the bus is back', async () => {
    const dir = tempDir();
    const bus = switchablePublisher(2);
    const emitter = emitterOn(dir, bus.publisher, 100);
    const ids = Array.from({ length: 1_000 }, (_, i) => `over-${i}`);
    for (const id of ids) emitter.emit(usageRecord({ id }));

    // All 1,000 emitted in one turn: the spill writes have begun, none has touched the disk.
    expect(emitter.stats()).toMatchObject({ emitted: 1_000, spilled: 0, dropped: 0 });
    expect(emitter.stats().queued).toBeLessThanOrEqual(100);
    expect(spillLines(dir)).toEqual([]);

    // The bus down: what is over the bound ends up in the spill file, each record once.
    const spilled = await pollUntil(
      async () => emitter.stats(),
      (s) => s.spilled + s.queued === 1_000 && s.spilled === spillLines(dir).length,
      { what: 'the records over the bound to be spilled', timeoutMs: 10_000 },
    );
    expect(spilled.spilled).toBeGreaterThanOrEqual(900);
    expect(tally(spillLines(dir).map((l) => (JSON.parse(l) as { id: string }).id)).twice).toEqual([]);

    await deliversEachOnce(dir, bus, emitter, ids);
    expect(emitter.stats()).toMatchObject({ published: 1_000 - spilled.spilled, replayed: spilled.spilled });
  });

  it('writes spills on the event loop once the writes off it hold their bound, and loses nothing', async () => {
    const dir = tempDir();
    // Every thread of libuv's pool waits in the open of a FIFO nobody writes: no write off the
    // event loop can make progress, as when the disk stops answering.
    const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const fifos = Array.from({ length: threads }, (_, i) => join(dir, `stuck-${i}`));
    for (const fifo of fifos) execFileSync('mkfifo', [fifo]);
    const stuck = fifos.map((fifo) => open(fifo, 'r'));
    const bus = switchablePublisher(2);
    const maxSpillingChars = 20_000;
    const emitter = new BatchingUsageEmitter(bus.publisher, {
      maxBatch: 50,
      lingerMs: 1,
      maxQueued: 100,
      retryDelayMs: 5,
      maxSpillingChars,
      spillDir: dir,
      writeAhead: true,
      logger,
    });
    const ids = Array.from({ length: 2_000 }, (_, i) => `held-${i}`);
    try {
      for (const id of ids) emitter.emit(usageRecord({ id }));
      await new Promise((resolve) => setTimeout(resolve, 50));

      // What waits in writes off the loop stays within the bound; the rest went to disk on the
      // loop, each record once.
      const held = emitter.stats();
      expect(held.spilling).toBeGreaterThan(0);
      expect(held.spilling).toBeLessThanOrEqual(maxSpillingChars);
      expect(held.spilledOnLoop).toBeGreaterThan(1_500);
      expect(held.spilled).toBe(held.spilledOnLoop);
      expect(tally(spillLines(dir).map((l) => (JSON.parse(l) as { id: string }).id))).toEqual({
        unique: held.spilledOnLoop,
        twice: [],
      });
    } finally {
      // The disk answers again (also when an assertion failed: the pool is the whole process's).
      for (const fifo of fifos) closeSync(openSync(fifo, 'w'));
      for (const handle of await Promise.all(stuck)) await handle.close();
    }
    // The writes off the loop land, and the bus takes every record once.
    await pollUntil(
      async () => emitter.stats(),
      (s) => s.spilled + s.queued === 2_000 && s.spilling === 0,
      { what: 'the writes off the loop to land', timeoutMs: 10_000 },
    );
    await deliversEachOnce(dir, bus, emitter, ids);
    expect(emitter.stats()).toMatchObject({ dropped: 0, replayed: emitter.stats().spilled });
  });

  it('loses nothing when spills and their replay overlap under a slow bus', async () => {
    const dir = tempDir();
    const bus = switchablePublisher(3);
    bus.state.down = false;
    const emitter = emitterOn(dir, bus.publisher, 20);
    // 5,000 records in turns of 50: over the bound every few turns, while replays run.
    const ids = await emitInTurns(emitter, 'race', 100, 50);
    await everyRecordOnTheBus(dir, emitter, bus, ids);
    expect(emitter.stats().spilled).toBeGreaterThan(0);
    expect(emitter.stats().replayed).toBe(emitter.stats().spilled);
  });

  // Records arriving faster than the bus takes them: the queue stays over its bound and spills
  // every turn. With 50 a turn the queue never empties; with 500 a spill write is always under
  // way or about to begin. Spilled records must reach the bus meanwhile, not only afterwards.
  it.each([
    { while: 'the queue never empties', publishMs: 5, turns: 300, perTurn: 50 },
    { while: 'spill writes follow each other without a pause', publishMs: 2, turns: 100, perTurn: 500 },
  ])('replays spilled records while $while', async ({ publishMs, turns, perTurn }) => {
    const dir = tempDir();
    const bus = switchablePublisher(publishMs);
    bus.state.down = false;
    const emitter = emitterOn(dir, bus.publisher, 20);
    let replayedDuring = 0;
    const ids = await emitInTurns(emitter, 'busy', turns, perTurn, () => {
      // What the bus has beyond the queue's publishes came from the spill file.
      replayedDuring = bus.state.published.length - emitter.stats().published;
    });
    expect(emitter.stats().spilled).toBeGreaterThan(ids.length / 3);
    expect(replayedDuring).toBeGreaterThan(0);
    await everyRecordOnTheBus(dir, emitter, bus, ids);
  });
});

describe("a spill file's replay", () => {
  it('reads a file of many pieces whole: lines across reads, multi-byte text, a cut last line', async () => {
    const dir = tempDir();
    // Long multi-byte customer refs, so lines and characters straddle the replay's 256 KiB reads.
    const written = Array.from({ length: 3_000 }, (_, i) =>
      usageRecord({ id: `file-${i}`, customerRef: `cus_${'ü€😀'.repeat(40 + (i % 7))}_${i}` }),
    );
    const text = `${written.map((r) => JSON.stringify(r)).join('\n')}\n\n${JSON.stringify(usageRecord({ id: 'cut' })).slice(0, 40)}`;
    expect(Buffer.byteLength(text)).toBeGreaterThan(4 * 256 * 1024);
    writeFileSync(join(dir, `spill-${Date.now()}-999999-1.jsonl`), text);
    const got: UsageRecord[] = [];
    const emitter = emitterOn(dir, recordingPublisherInto(got), 100);
    expect(await emitter.recovered(10_000)).toBe(true);
    await emitter.close();
    expect(got.map((r) => r.id)).toEqual(written.map((r) => r.id));
    expect(got.map((r) => r.customerRef)).toEqual(written.map((r) => r.customerRef));
    expect(emitter.stats().replayed).toBe(3_000);
    expect(readdirSync(dir).filter((f) => f.startsWith('spill-'))).toEqual([]);
  });
});
