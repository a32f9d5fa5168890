import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLogger } from '@mcp-meter/contracts/kit';
import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { describe, expect, it } from 'vitest';
import { root } from '../../test/helpers/processes';
import { tempDirs } from '../../test/helpers/temp-dirs';
import { usageRecord } from '../../test/helpers/usage-records';
import { BatchingUsageEmitter } from '../src/emitter';

/**
 * The emitter's write-ahead spool (issue 32): a record is in a file (the page cache) once
 * `spooled()` resolves, stays there until the bus has it, and a process killed with records
 * still unpublished has them replayed by the next emitter on the same directory.
 */
const logger = createLogger({ level: 'silent', name: 'spool-test' });
const tempDir = tempDirs('spool');

const record = (id: string): UsageRecord => usageRecord({ id });

/** A publisher that holds every publish until `release()`, and records what it was given. */
function gatedPublisher() {
  const published: string[] = [];
  let open: () => void = () => {};
  let gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const publisher: UsagePublisher = {
    async publish(records) {
      await gate;
      published.push(...records.map((r) => r.id));
    },
    async close() {},
  };
  return {
    publisher,
    published,
    release() {
      open();
      gate = Promise.resolve();
    },
  };
}

/** An emitter with the write-ahead spool on `dir`, publishing through `publisher`. */
const spooling = (dir: string, publisher: UsagePublisher, fsyncMs?: number) =>
  new BatchingUsageEmitter(publisher, {
    maxBatch: 100,
    lingerMs: 1,
    maxQueued: 10_000,
    retryDelayMs: 10,
    spillDir: dir,
    writeAhead: true,
    fsyncMs,
    logger,
  });

/** A publisher that records the ids it was given. */
const recordingInto = (into: string[]): UsagePublisher => ({
  async publish(records) {
    into.push(...records.map((r) => r.id));
  },
  async close() {},
});

/**
 * Runs the spooling fixture on `dir` (1,000 records, the bus never answering), waits until they
 * are spooled, and SIGKILLs it.
 */
async function spoolAndKill(dir: string, ...extra: string[]): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--import', './deploy/loader.mjs', 'ingest/test/fixtures/spooling-process.ts', dir, '1000', ...extra],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('spooled')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`spooling process exited early (${code})`)));
  });
  child.kill('SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
}

const files = (dir: string, prefix: string) => readdirSync(dir).filter((f) => f.startsWith(prefix));
const lines = (dir: string, prefix: string) =>
  files(dir, prefix).flatMap((f) =>
    readFileSync(join(dir, f), 'utf8')
      .split('\n')
      .filter((l) => l !== ''),
  );

describe('the write-ahead usage spool', () => {
  it('has every record on disk once spooled() resolves, and removes the file once the bus has them', async () => {
    const dir = tempDir();
    const bus = gatedPublisher();
    const emitter = spooling(dir, bus.publisher, 50);
    expect(emitter.spooled()).toBeUndefined();
    for (let i = 0; i < 3; i++) emitter.emit(record(`r-${i}`));
    const spooled = emitter.spooled();
    expect(spooled).toBeDefined();
    // Not written yet within the turn that emitted them: one write takes the turn's records.
    expect(lines(dir, 'spool-')).toHaveLength(0);
    await spooled;
    expect(lines(dir, 'spool-').map((l) => JSON.parse(l).id)).toEqual(['r-0', 'r-1', 'r-2']);
    expect(files(dir, 'spool-')).toHaveLength(1);
    expect(emitter.stats()).toMatchObject({ spooled: 3, spoolFailures: 0 });
    bus.release();
    await emitter.flush();
    expect(bus.published).toEqual(['r-0', 'r-1', 'r-2']);
    await emitter.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("keeps a record's spool text on it only for a bus that sends the text", async () => {
    /** The record's own symbol-keyed properties holding a string: where its JSON is kept. */
    const keptText = (r: UsageRecord) =>
      Object.getOwnPropertySymbols(r)
        .map((key) => (r as unknown as Record<symbol, unknown>)[key])
        .filter((value) => typeof value === 'string');
    for (const sendsRecordJson of [true, false]) {
      const dir = tempDir();
      const emitted = [record('r-0'), record('r-1')];
      // Held until the check: a record the bus has is marked settled (a string too).
      const bus = gatedPublisher();
      const emitter = spooling(dir, { ...bus.publisher, sendsRecordJson });
      for (const r of emitted) emitter.emit(r);
      await emitter.spooled();
      // The spool's lines are the records' JSON either way.
      expect(lines(dir, 'spool-')).toEqual(emitted.map((r) => JSON.stringify(r)));
      expect(emitted.map(keptText)).toEqual(
        sendsRecordJson ? emitted.map((r) => [JSON.stringify(r)]) : [[], []],
      );
      bus.release();
      await emitter.close();
      expect(bus.published).toEqual(['r-0', 'r-1']);
    }
  });

  it('lets a spool file go whose records the bus had before their spool write, frozen ones too', async () => {
    const dir = tempDir();
    const published: string[] = [];
    const onDiskAtPublish: number[] = [];
    // A batch per record and a bus that answers at once, as an in-process bus can: each publish
    // ends within the turn, before the turn's one spool write.
    const emitter = new BatchingUsageEmitter(
      {
        async publish(records) {
          onDiskAtPublish.push(lines(dir, 'spool-').length);
          published.push(...records.map((r) => r.id));
        },
        async close() {},
      },
      {
        maxBatch: 1,
        lingerMs: 1,
        maxQueued: 10_000,
        retryDelayMs: 10,
        spillDir: dir,
        writeAhead: true,
        logger,
      },
    );
    const plain = record('early-0');
    emitter.emit(plain);
    emitter.emit(Object.freeze(record('early-1')));
    await emitter.spooled();
    expect(published).toEqual(['early-0', 'early-1']);
    expect(onDiskAtPublish).toEqual([0, 0]);
    expect(lines(dir, 'spool-').map((l) => JSON.parse(l).id)).toEqual(['early-0', 'early-1']);
    // What the emitter keeps on a waiting record is hidden: its keys and a copy are as emitted.
    expect(Object.keys(plain)).toEqual(Object.keys(record('other')));
    expect(Object.getOwnPropertySymbols({ ...plain })).toEqual([]);
    await emitter.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('writes a turn of thousands of records, charged or not, each line whole and exact', async () => {
    const dir = tempDir();
    const bus = gatedPublisher();
    const emitter = spooling(dir, bus.publisher);
    // First, one record of three bytes a character (a long tool name in CJK): more than the line
    // buffer holds at the start.
    const wide = { ...record('wide'), properties: { tool: '中'.repeat(30_000) } };
    emitter.emit(wide, [{ key: 'k', lease: 'l', units: 1 }]);
    await emitter.spooled();
    // Customer refs and lease keys with emoji and quotes (multi-byte UTF-8, escapes), a NUL in
    // the keys: 3,000 lines of about 300 bytes in one turn outgrow the line buffer many times.
    const emitted = Array.from({ length: 3000 }, (_, i) =>
      usageRecord({ id: `big-${i}`, customerRef: `cus_😀"${i}` }),
    );
    for (const [i, r] of emitted.entries()) {
      const charged = [{ key: `limit:"😀"\u0000${i}`, lease: `lease-${i % 3}`, units: 1 }];
      emitter.emit(r, i % 2 === 0 ? charged : undefined);
    }
    await emitter.spooled();
    // The next turn's write starts on an emptied buffer.
    emitter.emit(record('after'));
    await emitter.spooled();
    const written = lines(dir, 'spool-').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(written).toHaveLength(3002);
    expect(written[0]).toEqual({ ...JSON.parse(JSON.stringify(wide)), '~charges': [['k', 'l', 1]] });
    written.slice(1, 3001).forEach((line, i) => {
      const { '~charges': charged, ...rest } = line;
      expect(rest).toEqual(JSON.parse(JSON.stringify(emitted[i])));
      expect(charged).toEqual(i % 2 === 0 ? [[`limit:"😀"\u0000${i}`, `lease-${i % 3}`, 1]] : undefined);
    });
    expect(written[3001]?.id).toBe('after');
    bus.release();
    await emitter.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('keeps a record in the spool while the bus is down, and then only until the bus has it', async () => {
    const dir = tempDir();
    const bus = gatedPublisher();
    const emitter = spooling(dir, bus.publisher, 50);
    emitter.emit(record('early'));
    await emitter.spooled();
    // A spool file is sealed after two seconds: records of the next turns go to a new one.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    emitter.emit(record('late'));
    await emitter.spooled();
    expect(files(dir, 'spool-')).toHaveLength(2);
    bus.release();
    await emitter.flush();
    // The sealed file's records are all published: it is gone; the open one stays until sealed.
    expect(lines(dir, 'spool-').map((l) => JSON.parse(l).id)).toEqual(['late']);
    await emitter.close();
    expect(readdirSync(dir)).toEqual([]);
  }, 10_000);

  it('replays, exactly and once, the spool of a process killed before its bus had the records', async () => {
    const dir = tempDir();
    await spoolAndKill(dir);
    expect(lines(dir, 'spool-')).toHaveLength(1000);

    const replayed: string[] = [];
    const emitter = spooling(dir, recordingInto(replayed));
    for (let i = 0; i < 100 && replayed.length < 1000; i++) await new Promise((r) => setTimeout(r, 20));
    expect(new Set(replayed).size).toBe(1000);
    expect(replayed).toHaveLength(1000);
    expect([...replayed].sort()).toEqual(Array.from({ length: 1000 }, (_, i) => `crash-${i}`).sort());
    await emitter.close();
    expect(readdirSync(dir)).toEqual([]);
  }, 30_000);

  it('hands the next start what a killed process recorded against each of its open leases', async () => {
    const dir = tempDir();
    await spoolAndKill(dir, 'charged');

    const replayed: string[] = [];
    const emitter = spooling(dir, recordingInto(replayed));
    // 500 even records of 1 unit each; 334 records (0, 3, … 999) of 7 credits each.
    expect([...emitter.inheritedCharges].sort((a, b) => a.lease.localeCompare(b.lease))).toEqual([
      { key: 'limit:a', lease: 'lease-a', units: 500 },
      { key: 'credit:c', lease: 'lease-c', units: 334 * 7 },
    ]);
    for (let i = 0; i < 100 && replayed.length < 1000; i++) await new Promise((r) => setTimeout(r, 20));
    // The charges travel in the spool only: what reaches the bus is the record itself.
    expect(replayed).toHaveLength(1000);
    await emitter.close();
    expect(readdirSync(dir)).toEqual([]);
  }, 30_000);

  it('keeps a spool file while a lease its records spent from is open, and lets it go once settled', async () => {
    const dir = tempDir();
    const published: string[] = [];
    const first = spooling(dir, recordingInto(published));
    first.opened('k', 'open-lease');
    first.opened('k', 'settled-lease');
    first.emit(record('a'), [{ key: 'k', lease: 'open-lease', units: 1 }]);
    first.emit(record('b'), [{ key: 'k', lease: 'settled-lease', units: 1 }]);
    first.emit(record('c'), [{ key: 'k', lease: 'closed-before', units: 1 }]);
    await first.spooled();
    first.closed('settled-lease');
    await first.flush();
    expect(published).toEqual(['a', 'b', 'c']);
    // Stopped with a lease the store never settled (it was away): the file stays for the next start.
    await first.close();
    expect(files(dir, 'spool-')).toHaveLength(1);

    const second = spooling(dir, recordingInto(published));
    expect(second.inheritedCharges).toEqual([
      { key: 'k', lease: 'open-lease', units: 1 },
      { key: 'k', lease: 'settled-lease', units: 1 },
      { key: 'k', lease: 'closed-before', units: 1 },
    ]);
    await second.flush();
    await second.close();
    expect(readdirSync(dir)).toEqual([]);

    // The same stop with every lease settled leaves nothing behind.
    const third = spooling(dir, recordingInto(published));
    third.opened('k', 'l');
    third.emit(record('d'), [{ key: 'k', lease: 'l', units: 1 }]);
    await third.spooled();
    third.closed('l');
    await third.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('names a lease in the spool as it opens, so one that admitted no recorded call returns whole', async () => {
    const dir = tempDir();
    const published: string[] = [];
    const first = spooling(dir, recordingInto(published));
    // Opened for a call still in flight when the process stopped: no record spent from it.
    first.opened('limit:k', 'idle-lease');
    first.emit(record('a'));
    await first.flush();
    await first.close();

    const second = spooling(dir, recordingInto(published));
    expect(second.inheritedCharges).toEqual([{ key: 'limit:k', lease: 'idle-lease', units: 0 }]);
    await second.flush();
    await second.close();
    // The marker is no record: only 'a' reached the bus (again from the kept file: the store
    // counts a record id once).
    expect(new Set(published)).toEqual(new Set(['a']));
    expect(readdirSync(dir)).toEqual([]);
  });

  // Another live process's spool (its parent is alive and is not this test process), and a spent
  // file a dead process left: renamed so once the bus had all of it, the removal never finished.
  it.each([
    ['leaves the spool of another live process alone', `spool-${Date.now()}-${process.ppid}-1.jsonl`, true],
    [
      'removes a spent spool file a dead process left, without replaying it',
      `spent-spool-${Date.now()}-999999-1.jsonl`,
      false,
    ],
  ])('%s', async (_, file, kept) => {
    const dir = tempDir();
    writeFileSync(join(dir, file), `${JSON.stringify(record('theirs'))}\n`);
    const replayed: string[] = [];
    const emitter = spooling(dir, recordingInto(replayed));
    emitter.emit(record('mine'));
    await emitter.flush();
    await emitter.close();
    expect(replayed).toEqual(['mine']);
    expect(readdirSync(dir)).toEqual(kept ? [file] : []);
  });

  it('spills at once on close when the bus is unreachable for good, and the next emitter sends it', async () => {
    // A proxy worker whose supervisor (which held the bus) is gone: each publish fails, and the
    // publisher says none will ever succeed. Close tries none and leaves the records on disk.
    const dir = tempDir();
    let attempts = 0;
    const gone: UsagePublisher = {
      async publish() {
        attempts++;
        throw new Error('the supervisor is gone');
      },
      async close() {},
      unreachable: true,
    };
    const emitter = spooling(dir, gone);
    emitter.emit(record('kept-1'));
    emitter.emit(record('kept-2'));
    await emitter.spooled();
    const before = attempts;
    await emitter.close();
    expect(attempts).toBe(before);
    expect(emitter.stats().spilled).toBe(2);
    const replayed: string[] = [];
    const next = spooling(dir, recordingInto(replayed));
    expect(await next.recovered(5_000)).toBe(true);
    await next.close();
    expect(replayed.sort()).toEqual(['kept-1', 'kept-2']);
  });
});
