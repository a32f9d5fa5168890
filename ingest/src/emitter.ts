import {
  appendFileSync,
  closeSync,
  fsync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  unlink,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type Logger, processAlive } from '@mcp-meter/contracts/kit';
import type { LeaseCharge } from '@mcp-meter/contracts/limits';
import type { UsageRecorder } from '@mcp-meter/contracts/usage';
import { parseBusRecord, recordJson, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { UsagePublisher } from './bus';

export interface EmitterStats {
  emitted: number;
  published: number;
  retried: number;
  spilled: number;
  replayed: number;
  dropped: number;
  queued: number;
  /** Records written to the write-ahead spool, and spool writes that failed. */
  spooled: number;
  spoolFailures: number;
}

/** Fire-and-forget usage emission for hot paths: `emit` never waits and never throws. */
export interface UsageEmitter {
  /**
   * `charges`: what the call spent of which of this process's limit leases. The spool keeps them
   * with the record, so that after a crash the next start settles the leases at what was recorded.
   */
  emit(record: UsageRecord, charges?: readonly LeaseCharge[]): void;
  /**
   * Resolves once every record emitted so far is in the write-ahead spool (the page cache: it
   * survives the process); undefined when nothing is waiting to be written. A caller that must
   * not answer before its record is safe awaits it.
   */
  spooled(): Promise<void> | undefined;
  flush(): Promise<void>;
  close(): Promise<void>;
  stats(): EmitterStats;
}

export interface BatchingEmitterOptions {
  maxBatch: number;
  lingerMs: number;
  /** Memory bound: past it, the oldest records go to the spill file (one batch in flight comes on top). */
  maxQueued: number;
  retryDelayMs: number;
  /** Where records wait on disk while the bus is unreachable; unset: drop past maxQueued. */
  spillDir?: string | undefined;
  /**
   * Write-ahead: every record is appended to a spool file in `spillDir` (one write per
   * event-loop turn) before `spooled()` resolves, and kept there until the bus has it. Spool
   * files of a process that died are replayed at start, like spill files.
   */
  writeAhead?: boolean | undefined;
  /** How often the spool is fsync'd: what a machine crash (not a process crash) may lose. */
  fsyncMs?: number | undefined;
  logger: Logger;
}

/** One spool file: records appended until it is sealed, deleted once the bus has them all. */
interface SpoolSegment {
  path: string;
  fd: number;
  openedAt: number;
  bytes: number;
  /** Records written here and not yet published, spilled or dropped. */
  outstanding: number;
  /** Open leases charged by records here: the file is kept until they are settled. */
  leases: Set<string>;
  sealed: boolean;
  dirty: boolean;
}

/**
 * Which spool segment holds a record waiting for the bus, kept on the record itself (a hidden
 * property) rather than in a weak map: records wait about a tenth of a second, and weak-map
 * entries keyed by young objects are work for every minor collection. SETTLED: the bus (or the
 * spill file) has the record, possibly before its spool write (an in-process bus can be that
 * fast), so that write does not count it.
 */
const SPOOLED_IN = Symbol('spool segment');
const SETTLED = 'settled';
type Waiting = UsageRecord & { [SPOOLED_IN]?: SpoolSegment | typeof SETTLED };

function mark(record: Waiting, where: SpoolSegment | typeof SETTLED): void {
  if (Object.hasOwn(record, SPOOLED_IN)) record[SPOOLED_IN] = where;
  // Not enumerable: a copy made with a spread is not taken for the waiting record.
  else Object.defineProperty(record, SPOOLED_IN, { value: where, writable: true });
}

/** A spool file is sealed (a new one started) after this long or this size. */
const SEGMENT_MS = 2_000;
const SEGMENT_BYTES = 16 * 1024 * 1024;
/**
 * The field of a spool line holding the record's lease charges (`[key, lease, units]` each). A
 * line with this field alone names a lease as it opens (units 0); replay skips it (no record).
 */
const CHARGES_FIELD = '~charges';

/** A spool file the bus has entirely, renamed so while its removal finishes off the event loop. */
const SPENT_PREFIX = 'spent-';

/** Spool files open in this process (an emitter never adopts another live one's). */
const openSpools = new Set<string>();
let spoolSequence = 0;

/**
 * Batches records to the bus off the request path. When the bus is down, records wait in
 * memory up to `maxQueued`; past that, and at shutdown, they are appended (fsync'd) to a spill
 * file. Spill files, including those left by an earlier run, are replayed once the bus accepts
 * records again; a replay that fails midway is retried whole, which is safe because the store
 * counts a record id once.
 */
export class BatchingUsageEmitter implements UsageEmitter, UsageRecorder {
  private queue: UsageRecord[] = [];
  /** When the oldest record in the queue arrived (ms, monotonic). */
  private queuedSince = 0;
  /** Flushes waiting: while any is, the queue is published whole, without lingering. */
  private flushing = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private readonly counters = {
    emitted: 0,
    published: 0,
    retried: 0,
    spilled: 0,
    replayed: 0,
    dropped: 0,
    spooled: 0,
    spoolFailures: 0,
  };
  private readonly spillFile: string | undefined;
  private spillPending: boolean;
  /** Write-ahead state: records emitted this turn, not yet in the spool, and their charges. */
  private unspooled: UsageRecord[] = [];
  private unspooledCharges: Array<readonly LeaseCharge[] | undefined> = [];
  /** This process's limit leases not yet settled in the store. */
  private readonly openLeases = new Set<string>();
  /**
   * What the records a dead process left in its spool spent of each lease: the start settles
   * those leases at it (the dead process never did).
   */
  readonly inheritedCharges: LeaseCharge[] = [];
  private spoolWrite: { promise: Promise<void>; resolve: () => void } | undefined;
  private segment: SpoolSegment | undefined;
  private readonly sealedSegments = new Set<SpoolSegment>();
  /** Spent spool files being removed off the event loop: `close` waits for them. */
  private readonly removals = new Set<Promise<void>>();
  /** Where a turn's spool lines are put together before their one write. */
  private readonly lines = new LineBuffer();
  private fsyncTimer: NodeJS.Timeout | undefined;
  /** Settles once the files found at start (a previous run's spill and spool) are replayed. */
  private readonly recovery: Promise<void>;
  private markRecovered: () => void = () => {};

  /** Records a publish carries at most: `maxBatch`, or the bus's whole batch if larger. */
  private readonly maxBatch: number;
  /** Whether the spool's text of a record is kept on it for the bus (see `sendsRecordJson`). */
  private readonly keepRecordJson: boolean;

  constructor(
    private readonly publisher: UsagePublisher,
    private readonly options: BatchingEmitterOptions,
  ) {
    this.maxBatch = Math.max(options.maxBatch, publisher.wholeBatch ?? 0);
    this.keepRecordJson = publisher.sendsRecordJson === true;
    if (options.spillDir !== undefined) {
      mkdirSync(options.spillDir, { recursive: true });
      recoverClaimedSpills(options.spillDir);
      adoptOrphanedSpools(options.spillDir);
      this.inheritedCharges = spooledCharges(options.spillDir);
      this.spillFile = join(options.spillDir, `spill-${Date.now()}-${process.pid}-${++spoolSequence}.jsonl`);
      if (options.writeAhead === true) {
        this.fsyncTimer = setInterval(() => this.fsyncSegments(), options.fsyncMs ?? 1_000);
        this.fsyncTimer.unref();
      }
    }
    this.spillPending = this.spillFiles().length > 0;
    this.recovery = new Promise((resolve) => {
      this.markRecovered = resolve;
    });
    if (this.spillPending) this.schedule(0);
    else this.markRecovered();
  }

  /**
   * Whether what a previous run left on disk (records it served and never handed to the bus)
   * is on the bus now, waiting up to `timeoutMs`. A proxy waits for it before taking calls, so
   * limit counters started from stored usage count those records too.
   */
  async recovered(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const done = await Promise.race([this.recovery.then(() => true), late]);
    clearTimeout(timer);
    return done;
  }

  emit(emitted: UsageRecord, charges?: readonly LeaseCharge[]): void {
    this.counters.emitted++;
    // The record carries its spool segment while it waits: a frozen one waits as a copy.
    const record = Object.isExtensible(emitted) ? emitted : { ...emitted };
    if (this.fsyncTimer !== undefined) {
      this.unspooled.push(record);
      this.unspooledCharges.push(charges);
      if (this.spoolWrite === undefined) {
        let resolve = () => {};
        const promise = new Promise<void>((done) => {
          resolve = done;
        });
        this.spoolWrite = { promise, resolve };
        // After the turn's I/O callbacks: every record they emitted goes in one write.
        setImmediate(() => this.writeSpool());
      }
    }
    if (this.queue.length === 0) this.queuedSince = performance.now();
    this.queue.push(record);
    this.enforceMemoryBound();
    if (this.queue.length >= this.maxBatch) void this.send();
    else this.schedule(this.options.lingerMs);
  }

  /** The oldest records beyond the bound go to disk; the batch being published is not in the queue. */
  private enforceMemoryBound(): void {
    const excess = this.queue.length - this.options.maxQueued;
    if (excess > 0) this.spill(this.queue.splice(0, excess));
  }

  private spill(records: UsageRecord[]): void {
    if (records.length === 0) return;
    if (this.spillFile === undefined) {
      this.counters.dropped += records.length;
      this.settle(records);
      this.options.logger.error(
        { records: records.length },
        'usage emitter over its memory bound with no spill directory; records dropped',
      );
      return;
    }
    try {
      appendFileSync(this.spillFile, records.map((r) => `${JSON.stringify(r)}\n`).join(''));
      const fd = openSync(this.spillFile, 'r');
      fsyncSync(fd);
      closeSync(fd);
      this.counters.spilled += records.length;
      this.spillPending = true;
      this.settle(records);
    } catch (error) {
      // Still in the spool, if it is on: replayed from there by the next start.
      this.counters.dropped += records.length;
      this.options.logger.error(
        { err: error, records: records.length },
        'could not spill usage records to disk; records dropped',
      );
    }
  }

  spooled(): Promise<void> | undefined {
    return this.spoolWrite?.promise;
  }

  /** Appends the turn's records to the spool in one write, then lets waiting answers go. */
  private writeSpool(): void {
    const records = this.unspooled;
    const charges = this.unspooledCharges;
    const waiting = this.spoolWrite;
    this.unspooled = [];
    this.unspooledCharges = [];
    this.spoolWrite = undefined;
    // Written already (close writes what waits): no segment is opened for nothing.
    if (records.length === 0) {
      waiting?.resolve();
      return;
    }
    try {
      const segment = this.currentSegment();
      const lines = this.lines;
      // Empty, also after a turn whose write failed midway.
      lines.clear();
      for (let i = 0; i < records.length; i++) {
        const line = recordJson(records[i] as UsageRecord, this.keepRecordJson);
        const spent = charges[i];
        if (spent === undefined || spent.length === 0) {
          lines.add(line, '\n');
          continue;
        }
        const fields: Array<[string, string, number]> = [];
        for (const c of spent) {
          fields.push([c.key, c.lease, c.units]);
          if (this.openLeases.has(c.lease)) segment.leases.add(c.lease);
        }
        // The record's object, its closing brace replaced by the charges field.
        lines.add(line, `,"${CHARGES_FIELD}":${JSON.stringify(fields)}}\n`, 1);
      }
      lines.writeTo(segment);
      for (const record of records) {
        const waiting = record as Waiting;
        if (waiting[SPOOLED_IN] === SETTLED) continue;
        mark(waiting, segment);
        segment.outstanding++;
      }
      this.counters.spooled += records.length;
    } catch (error) {
      this.counters.spoolFailures++;
      this.options.logger.error(
        { err: error, records: records.length },
        'usage spool write failed; the records are only in memory until published',
      );
    }
    waiting?.resolve();
  }

  private currentSegment(): SpoolSegment {
    const now = performance.now();
    const current = this.segment;
    if (current !== undefined && now - current.openedAt < SEGMENT_MS && current.bytes < SEGMENT_BYTES)
      return current;
    if (current !== undefined) this.seal(current);
    const path = join(
      this.options.spillDir ?? '',
      `spool-${Date.now()}-${process.pid}-${++spoolSequence}.jsonl`,
    );
    const segment: SpoolSegment = {
      path,
      fd: openSync(path, 'a'),
      openedAt: now,
      bytes: 0,
      outstanding: 0,
      leases: new Set(),
      sealed: false,
      dirty: false,
    };
    openSpools.add(path);
    this.segment = segment;
    return segment;
  }

  private seal(segment: SpoolSegment): void {
    segment.sealed = true;
    if (this.segment === segment) this.segment = undefined;
    if (done(segment)) this.removeSegment(segment);
    else this.sealedSegments.add(segment);
  }

  /**
   * Written to the spool at once, before the lease can admit a call: a process killed before any
   * call it admitted on the lease is recorded (calls in flight at the kill) still leaves the lease
   * named, and the next start settles it at what was recorded (nothing) instead of leaving its
   * whole budget spent until it expires.
   */
  opened(key: string, lease: string): void {
    if (this.fsyncTimer === undefined) return;
    this.openLeases.add(lease);
    try {
      const segment = this.currentSegment();
      // The turn's lines are written within writeSpool's call: the buffer is free between turns.
      this.lines.clear();
      this.lines.add(`{"${CHARGES_FIELD}":${JSON.stringify([[key, lease, 0]])}}`, '\n');
      this.lines.writeTo(segment);
      segment.leases.add(lease);
    } catch (error) {
      this.counters.spoolFailures++;
      this.options.logger.error({ err: error, lease }, 'usage spool write failed for a lease opened');
    }
  }

  /** The store counts what the lease spent: the spool no longer needs its records for it. */
  closed(lease: string): void {
    if (!this.openLeases.delete(lease)) return;
    this.segment?.leases.delete(lease);
    for (const segment of [...this.sealedSegments]) {
      if (segment.leases.delete(lease) && done(segment)) this.removeSegment(segment);
    }
  }

  private removeSegment(segment: SpoolSegment): void {
    this.sealedSegments.delete(segment);
    openSpools.delete(segment.path);
    try {
      closeSync(segment.fd);
      // Out of the spool at once (a rename), its pages freed off the event loop: unlinking a
      // file of megabytes in the page cache held the loop for milliseconds, every segment.
      const spent = join(dirname(segment.path), `${SPENT_PREFIX}${basename(segment.path)}`);
      renameSync(segment.path, spent);
      const removal = new Promise<void>((resolve) => unlink(spent, () => resolve()));
      this.removals.add(removal);
      void removal.then(() => this.removals.delete(removal));
    } catch (error) {
      this.options.logger.warn({ err: error, file: segment.path }, 'usage spool file not removed');
    }
  }

  /** The bus (or the spill file) has these records: their spool files may go. */
  private settle(records: readonly UsageRecord[]): void {
    if (this.fsyncTimer === undefined) return;
    for (const record of records) {
      const waiting = record as Waiting;
      const segment = waiting[SPOOLED_IN];
      mark(waiting, SETTLED);
      if (segment === undefined || segment === SETTLED) continue;
      segment.outstanding--;
      if (segment.sealed && done(segment)) this.removeSegment(segment);
    }
  }

  /** Flushes spool writes from the page cache to the disk, off the event loop. */
  private fsyncSegments(): void {
    for (const segment of [this.segment, ...this.sealedSegments]) {
      if (segment === undefined || !segment.dirty) continue;
      segment.dirty = false;
      fsync(segment.fd, () => undefined);
    }
  }

  private spillFiles(): string[] {
    if (this.options.spillDir === undefined) return [];
    return readdirSync(this.options.spillDir)
      .filter((f) => f.startsWith('spill-') && f.endsWith('.jsonl'))
      .sort()
      .map((f) => join(this.options.spillDir ?? '', f));
  }

  private schedule(delayMs: number): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.send();
    }, delayMs);
    this.timer.unref();
  }

  private send(): Promise<void> {
    this.sending ??= this.sendAll().finally(() => {
      this.sending = undefined;
    });
    return this.sending;
  }

  /**
   * One publish at a time. A publish waits until its oldest record has lingered `lingerMs` or a
   * full batch is waiting, also right after the previous publish: under load, publishes then go
   * every `lingerMs` with everything since, not back to back with whatever arrived meanwhile
   * (many small produce requests cost the bus and the consumer far more per record).
   */
  private async sendAll(): Promise<void> {
    while (this.queue.length > 0) {
      if (this.flushing === 0 && this.queue.length < this.maxBatch) {
        const wait = this.options.lingerMs - (performance.now() - this.queuedSince);
        if (wait > 0) {
          this.schedule(wait);
          break;
        }
      }
      // The batch leaves the queue before the publish: while it is in flight, emit() may spill
      // the queue's oldest records, so nothing else may later be removed in the batch's name.
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        await this.publisher.publish(batch);
      } catch (error) {
        this.counters.retried += batch.length;
        this.queue.unshift(...batch);
        this.enforceMemoryBound();
        this.options.logger.warn(
          { err: error, records: batch.length, queued: this.queue.length },
          'usage publish failed; will retry',
        );
        this.schedule(this.options.retryDelayMs);
        return;
      }
      this.counters.published += batch.length;
      this.settle(batch);
    }
    if (this.spillPending) await this.replaySpill();
  }

  /** Publishes spilled records; runs only after a publish succeeded, i.e. the bus is back. */
  private async replaySpill(): Promise<void> {
    for (const file of this.spillFiles()) {
      // Claim the file first (rename is atomic): a file is replayed by one emitter only, and the
      // active spill file is sealed so new spills start a fresh one.
      const claimed = `${file}.replaying`;
      try {
        renameSync(file, claimed);
      } catch {
        continue;
      }
      const records = readFileSync(claimed, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map(parseBusRecord)
        .filter((r): r is UsageRecord => r !== undefined);
      try {
        for (let i = 0; i < records.length; i += this.maxBatch) {
          await this.publisher.publish(records.slice(i, i + this.maxBatch));
        }
      } catch (error) {
        renameSync(claimed, file);
        this.options.logger.warn({ err: error, file }, 'spill replay failed; will retry');
        this.schedule(this.options.retryDelayMs);
        return;
      }
      unlinkSync(claimed);
      this.counters.replayed += records.length;
      this.options.logger.info({ records: records.length }, 'spilled usage records replayed');
    }
    this.spillPending = this.spillFiles().length > 0;
    if (!this.spillPending) this.markRecovered();
  }

  /** Publishes everything queued now, without lingering; resolves once that was tried. */
  async flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.flushing++;
    try {
      // A publish in flight may end lingering with records left: this flush sends after it.
      if (this.sending !== undefined) await this.sending;
      await this.send();
    } finally {
      this.flushing--;
    }
  }

  /** Publishes what it can within a bounded time; whatever is left goes to disk for the next run. */
  async close(): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (this.queue.length > 0 && Date.now() < deadline) {
      await this.flush();
      if (this.queue.length > 0)
        await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs));
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.sending;
    if (this.queue.length > 0) {
      this.options.logger.warn(
        { records: this.queue.length },
        'bus unreachable at shutdown; records kept in the spill file',
      );
      this.spill(this.queue.splice(0));
    }
    if (this.fsyncTimer !== undefined) {
      if (this.unspooled.length > 0) this.writeSpool();
      clearInterval(this.fsyncTimer);
      // Everything was published or spilled: the spool keeps only what names a lease the store
      // has not settled (it was away); the next start settles those leases from it.
      if (this.segment !== undefined) this.seal(this.segment);
      for (const segment of [...this.sealedSegments]) {
        if (done(segment)) this.removeSegment(segment);
        else {
          this.sealedSegments.delete(segment);
          openSpools.delete(segment.path);
          closeSync(segment.fd);
        }
      }
    }
    await Promise.all(this.removals);
  }

  stats(): EmitterStats {
    return { ...this.counters, queued: this.queue.length };
  }
}

/**
 * A turn's spool lines, put together in one buffer kept from turn to turn: each line is copied
 * once, into it, where joining them as strings made a chain of parts that the write then copied
 * whole again (hundreds of bytes of garbage a record, under load every record of a turn).
 */
class LineBuffer {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private used = 0;

  clear(): void {
    this.used = 0;
  }

  /** `text` less its last `drop` characters (ASCII), then `tail`. */
  add(text: string, tail: string, drop = 0): void {
    // A UTF-16 code unit is at most three bytes of UTF-8.
    const most = (text.length + tail.length) * 3;
    if (this.used + most > this.buffer.length) {
      let size = this.buffer.length * 2;
      while (this.used + most > size) size *= 2;
      const grown = Buffer.allocUnsafe(size);
      this.buffer.copy(grown, 0, 0, this.used);
      this.buffer = grown;
    }
    this.used += this.buffer.write(text, this.used) - drop;
    this.used += this.buffer.write(tail, this.used);
  }

  /** Appends the lines to the segment's file and empties the buffer. */
  writeTo(segment: SpoolSegment): void {
    const size = this.used;
    this.used = 0;
    let at = 0;
    // One write where the kernel takes it all; after a short write, the bytes not written yet.
    while (at < size) at += writeSync(segment.fd, this.buffer, at, size - at);
    segment.bytes += size;
    segment.dirty = true;
    // A turn far larger than usual (a burst) does not keep its buffer.
    if (this.buffer.length > 1024 * 1024) this.buffer = Buffer.allocUnsafe(64 * 1024);
  }
}

/** A sealed segment may go once the bus has its records and the store its leases. */
const done = (segment: SpoolSegment) => segment.outstanding === 0 && segment.leases.size === 0;

/**
 * What the records in spool files a previous process left (now spill files, waiting for replay)
 * spent of each lease, summed per lease. Settling a lease at it again is harmless: the store
 * settles a lease once and ignores one it no longer knows.
 */
export function spooledCharges(spillDir: string): LeaseCharge[] {
  const spent = new Map<string, LeaseCharge>();
  for (const file of readdirSync(spillDir)) {
    if (!/^spill-spool-.*\.jsonl$/.test(file)) continue;
    let text: string;
    try {
      text = readFileSync(join(spillDir, file), 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      if (!line.includes(CHARGES_FIELD)) continue;
      let fields: unknown;
      try {
        fields = (JSON.parse(line) as Record<string, unknown>)[CHARGES_FIELD];
      } catch {
        continue; // a line cut short by the crash: its record never completed
      }
      if (!Array.isArray(fields)) continue;
      for (const field of fields) {
        if (!Array.isArray(field)) continue;
        const [key, lease, units] = field as unknown[];
        if (typeof key !== 'string' || typeof lease !== 'string' || typeof units !== 'number') continue;
        const charge = spent.get(lease) ?? { key, lease, units: 0 };
        charge.units += units;
        spent.set(lease, charge);
      }
    }
  }
  return [...spent.values()];
}

/**
 * Spool files of a process that is gone (a crash, or a kill) become spill files, replayed like
 * them: what it served may not have reached the bus. A spool file of a live process (another
 * proxy sharing the directory, or another emitter in this one) is left to it; a file with this
 * process's id that it did not open is a previous process's whose id was reused.
 */
export function adoptOrphanedSpools(spillDir: string): void {
  for (const file of readdirSync(spillDir)) {
    // Spent files whose removal a process did not live to finish (another's may be in progress:
    // whichever removes it first, the other's unlink finds nothing).
    if (file.startsWith(SPENT_PREFIX)) {
      rmSync(join(spillDir, file), { force: true });
      continue;
    }
    const match = /^spool-\d+-(\d+)-\d+\.jsonl$/.exec(file);
    if (match === null) continue;
    const path = join(spillDir, file);
    if (openSpools.has(path)) continue;
    const pid = Number(match[1]);
    if (pid !== process.pid && processAlive(pid)) continue;
    renameSync(path, join(spillDir, `spill-${file}`));
  }
}

/**
 * Puts back files a crashed process had claimed for replay. Another live emitter sharing the
 * directory may replay such a file twice; the store counts each record id once, so that is safe.
 */
export function recoverClaimedSpills(spillDir: string): void {
  for (const file of readdirSync(spillDir).filter((f) => f.endsWith('.jsonl.replaying'))) {
    renameSync(join(spillDir, file), join(spillDir, file.replace(/\.replaying$/, '')));
  }
}
