import {
  closeSync,
  fsync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  unlink,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type Logger, processAlive } from '@mcp-meter/contracts/kit';
import type { LeaseCharge } from '@mcp-meter/contracts/limits';
import { recordJson, type UsageRecord } from '@mcp-meter/contracts/usage-record';

/**
 * The write-ahead spool of a usage emitter: every record emitted is appended to a spool file
 * (one write per event-loop turn) before `written()` resolves, and the file is kept until the
 * bus has all its records and the store has settled the leases they charged. Spool files of a
 * process that died are turned into spill files at the next start and replayed (the emitter's
 * work), and the lease charges they hold settle that process's leases.
 */

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
let sequence = 0;
/** A number for a new spool or spill file's name, unique in this process. */
export const nextSequence = () => ++sequence;

/**
 * One emitter's spool: the segment being written, the sealed ones waiting for the bus or the
 * store, the turn's records not yet written, and the periodic fsync.
 */
export class Spool {
  /** Records written to the spool, and spool writes that failed. */
  spooled = 0;
  failures = 0;
  /** Records emitted this turn, not yet in the spool, and their charges. */
  private unspooled: UsageRecord[] = [];
  private unspooledCharges: Array<readonly LeaseCharge[] | undefined> = [];
  /** This process's limit leases not yet settled in the store. */
  private readonly openLeases = new Set<string>();
  private spoolWrite: { promise: Promise<void>; resolve: () => void } | undefined;
  private segment: SpoolSegment | undefined;
  private readonly sealedSegments = new Set<SpoolSegment>();
  /** Spent spool files being removed off the event loop: `close` waits for them. */
  private readonly removals = new Set<Promise<void>>();
  /** Where a turn's spool lines are put together before their one write. */
  private readonly lines = new LineBuffer();
  private readonly fsyncTimer: NodeJS.Timeout;

  constructor(
    private readonly dir: string,
    private readonly options: {
      /** How often the spool is fsync'd: what a machine crash (not a process crash) may lose. */
      fsyncMs: number;
      /** Whether the spool's text of a record is kept on it for the bus (see `sendsRecordJson`). */
      keepRecordJson: boolean;
      logger: Logger;
    },
  ) {
    this.fsyncTimer = setInterval(() => this.fsync(), options.fsyncMs);
    this.fsyncTimer.unref();
  }

  /** Takes `record` into this turn's write. */
  add(record: UsageRecord, charges: readonly LeaseCharge[] | undefined): void {
    this.unspooled.push(record);
    this.unspooledCharges.push(charges);
    if (this.spoolWrite === undefined) {
      let resolve = () => {};
      const promise = new Promise<void>((done) => {
        resolve = done;
      });
      this.spoolWrite = { promise, resolve };
      // After the turn's I/O callbacks: every record they emitted goes in one write.
      setImmediate(() => this.write());
    }
  }

  /** Settles once every record added so far is written; undefined when none waits. */
  written(): Promise<void> | undefined {
    return this.spoolWrite?.promise;
  }

  /** Appends the turn's records to the spool in one write, then lets waiting answers go. */
  private write(): void {
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
        const line = recordJson(records[i] as UsageRecord, this.options.keepRecordJson);
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
      this.spooled += records.length;
    } catch (error) {
      this.failures++;
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
    const path = join(this.dir, `spool-${Date.now()}-${process.pid}-${nextSequence()}.jsonl`);
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
    this.openLeases.add(lease);
    try {
      const segment = this.currentSegment();
      // The turn's lines are written within writeSpool's call: the buffer is free between turns.
      this.lines.clear();
      this.lines.add(`{"${CHARGES_FIELD}":${JSON.stringify([[key, lease, 0]])}}`, '\n');
      this.lines.writeTo(segment);
      segment.leases.add(lease);
    } catch (error) {
      this.failures++;
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
  settle(records: readonly UsageRecord[]): void {
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
  private fsync(): void {
    for (const segment of [this.segment, ...this.sealedSegments]) {
      if (segment === undefined || !segment.dirty) continue;
      segment.dirty = false;
      fsync(segment.fd, () => undefined);
    }
  }

  /**
   * Writes what waits and stops. Everything was published or spilled by now: the spool keeps
   * only what names a lease the store has not settled (it was away); the next start settles
   * those leases from it.
   */
  async close(): Promise<void> {
    if (this.unspooled.length > 0) this.write();
    clearInterval(this.fsyncTimer);
    if (this.segment !== undefined) this.seal(this.segment);
    for (const segment of [...this.sealedSegments]) {
      if (done(segment)) this.removeSegment(segment);
      else {
        this.sealedSegments.delete(segment);
        openSpools.delete(segment.path);
        closeSync(segment.fd);
      }
    }
    await Promise.all(this.removals);
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
