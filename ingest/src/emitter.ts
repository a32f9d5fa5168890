import { mkdirSync, renameSync, unlinkSync } from 'node:fs';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { LeaseCharge } from '@mcp-meter/contracts/limits';
import type { UsageRecorder } from '@mcp-meter/contracts/usage';
import { recordJson, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { UsagePublisher } from './bus';
import { appendDurably, appendDurablySync, newSpillFile, spilledBatches, spillFilesIn } from './spill-file';
import { adoptOrphanedSpools, recoverClaimedSpills, Spool, spooledCharges } from './spool';

export interface EmitterStats {
  emitted: number;
  published: number;
  retried: number;
  spilled: number;
  /** Of those, records written on the event loop because the spill writes off it fell behind. */
  spilledOnLoop: number;
  replayed: number;
  dropped: number;
  queued: number;
  /** Characters of spill text in writes begun and not yet on disk (bounded: `maxSpillingChars`). */
  spilling: number;
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
  /**
   * Memory bound: past it, the oldest records go to the spill file (one batch in flight comes on
   * top), a batch at a time, written off the event loop.
   */
  maxQueued: number;
  retryDelayMs: number;
  /**
   * The spill's second memory bound: the text of spill writes begun and not yet on disk, in
   * characters (default 64 Mi). Past it the disk is behind and a spill is written on the event
   * loop, so calls wait for the disk instead of memory growing without end.
   */
  maxSpillingChars?: number | undefined;
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

/** The spill text in writes under way past which a spill is written on the event loop. */
const DEFAULT_MAX_SPILLING_CHARS = 64 * 1024 * 1024;

/** A spill write not yet begun: the spills that joined it and their text. */
interface NextSpill {
  file: string;
  parts: UsageRecord[][];
  text: string;
}

/**
 * Batches records to the bus off the request path. When the bus is down, records wait in
 * memory up to `maxQueued`; past that, and at shutdown, they are appended (fsync'd) to a spill
 * file, off the event loop and one write at a time, so a long outage costs the calls being
 * served no disk wait. Spill files, including those left by an earlier run, are replayed once
 * the bus accepts records again; a replay that fails midway is retried whole, which is safe
 * because the store counts a record id once.
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
    spilledOnLoop: 0,
    replayed: 0,
    dropped: 0,
  };
  /** Where spills off the loop go now: a replay moves them to a fresh file as it starts. */
  private spillFile: string | undefined;
  /** The spill write not yet begun: spills made meanwhile join it. */
  private nextSpill: NextSpill | undefined;
  /**
   * Where spills written on the event loop go: a file of their own, since a write off the loop
   * to `spillFile` may be under way in pieces, and a line must not be cut by another write.
   */
  private readonly loopSpillFile: string | undefined;
  /** Characters of spill text in writes begun and not yet done. */
  private spillingChars = 0;
  private readonly maxSpillingChars: number;
  /** Spills are being written on the event loop until the writes off it catch up. */
  private diskBehind = false;
  private spillPending: boolean;
  /**
   * The spill writes begun and not yet done, chained so they land in order: settles once the
   * last is on disk (or failed); undefined when none is under way.
   */
  private spillWrites: Promise<void> | undefined;
  /** Set by `close`: from then on only `close` itself publishes, nothing is scheduled. */
  private closing = false;
  /** The write-ahead spool (spool.ts), when on. */
  private readonly spool: Spool | undefined;
  /**
   * What the records a dead process left in its spool spent of each lease: the start settles
   * those leases at it (the dead process never did).
   */
  readonly inheritedCharges: LeaseCharge[] = [];
  /** Settles once the files found at start (a previous run's spill and spool) are replayed. */
  private readonly recovery: Promise<void>;
  private markRecovered: () => void = () => {};

  /** Records a publish carries at most: `maxBatch`, or the bus's whole batch if larger. */
  private readonly maxBatch: number;

  constructor(
    private readonly publisher: UsagePublisher,
    private readonly options: BatchingEmitterOptions,
  ) {
    this.maxBatch = Math.max(options.maxBatch, publisher.wholeBatch ?? 0);
    this.maxSpillingChars = options.maxSpillingChars ?? DEFAULT_MAX_SPILLING_CHARS;
    if (options.spillDir !== undefined) {
      mkdirSync(options.spillDir, { recursive: true });
      recoverClaimedSpills(options.spillDir);
      adoptOrphanedSpools(options.spillDir);
      this.inheritedCharges = spooledCharges(options.spillDir);
      this.spillFile = newSpillFile(options.spillDir);
      this.loopSpillFile = newSpillFile(options.spillDir);
      if (options.writeAhead === true)
        this.spool = new Spool(options.spillDir, {
          fsyncMs: options.fsyncMs ?? 1_000,
          keepRecordJson: publisher.sendsRecordJson === true,
          logger: options.logger,
        });
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
    this.spool?.add(record, charges);
    if (this.queue.length === 0) this.queuedSince = performance.now();
    this.queue.push(record);
    this.enforceMemoryBound();
    if (this.queue.length >= this.maxBatch) void this.send();
    else this.schedule(this.options.lingerMs);
  }

  /**
   * The oldest records beyond the bound go to disk; the batch being published is not in the
   * queue. Once over the bound, a batch goes at once (at most a tenth of the bound, at least
   * what is over): a long outage then costs one disk write per batch, not one per call emitted,
   * and a write's text is put together on the loop in a batch's time, not in a stall.
   */
  private enforceMemoryBound(): void {
    const excess = this.queue.length - this.options.maxQueued;
    if (excess <= 0) return;
    const step = Math.min(this.maxBatch, Math.ceil(this.options.maxQueued / 10));
    const chunk = Math.min(this.queue.length, Math.max(excess, step));
    this.spill(this.queue.splice(0, chunk));
  }

  /**
   * Appends `records` to the spill file, off the event loop and after any spill write still
   * under way: spills made while one is under way join the next write, so a long outage costs
   * one fsync per write the disk can take, not one per batch. Once the file has them (fsync'd)
   * the spool may let them go. Until then they are in the spool (when on) and in the write's
   * memory: a process crash meanwhile leaves them to the next start's spool replay, as before
   * the spill. When the writes under way already hold `maxSpillingChars` (the disk is behind),
   * this one is written on the event loop instead.
   */
  private spill(records: UsageRecord[]): void {
    if (records.length === 0) return;
    const file = this.spillFile;
    if (file === undefined) {
      this.counters.dropped += records.length;
      this.settle(records);
      this.options.logger.error(
        { records: records.length },
        'usage emitter over its memory bound with no spill directory; records dropped',
      );
      return;
    }
    let text = '';
    for (const r of records) text += `${recordJson(r, false)}\n`;
    if (this.spillWrites !== undefined && this.spillingChars + text.length > this.maxSpillingChars) {
      this.spillOnLoop(records, text);
      return;
    }
    this.spillingChars += text.length;
    const joining = this.nextSpill;
    if (joining !== undefined) {
      joining.parts.push(records);
      joining.text += text;
      return;
    }
    const next: NextSpill = { file, parts: [records], text };
    this.nextSpill = next;
    const write = (this.spillWrites ?? Promise.resolve())
      .then(() => {
        // From here on, spills join a later write.
        if (this.nextSpill === next) this.nextSpill = undefined;
        return appendDurably(next.file, next.text);
      })
      .then(
        () => {
          for (const part of next.parts) this.spilled(part);
        },
        (error: unknown) => {
          for (const part of next.parts) this.spillFailed(part, error);
        },
      )
      .finally(() => {
        this.spillingChars -= next.text.length;
      });
    this.spillWrites = write;
    void write.then(() => {
      if (this.spillWrites !== write) return;
      this.spillWrites = undefined;
      this.diskBehind = false;
    });
  }

  /**
   * The disk is behind the spill writes: this one is appended and fsync'd before the event loop
   * goes on, to a file no write off the loop touches. A replay never claims a file during it (a
   * claim is made within one turn too).
   */
  private spillOnLoop(records: UsageRecord[], text: string): void {
    if (!this.diskBehind)
      this.options.logger.warn(
        { spilling: this.spillingChars },
        'usage spill writes behind the disk; spilling on the event loop until they catch up',
      );
    this.diskBehind = true;
    try {
      appendDurablySync(this.loopSpillFile as string, text);
    } catch (error) {
      this.spillFailed(records, error);
      return;
    }
    this.counters.spilledOnLoop += records.length;
    this.spilled(records);
  }

  /** The spill file has `records`: the spool lets them go, and a replay follows the bus's return. */
  private spilled(records: UsageRecord[]): void {
    this.counters.spilled += records.length;
    this.spillPending = true;
    this.settle(records);
    // Replayed once the bus takes records, also when nothing more is emitted meanwhile.
    this.schedule(this.options.lingerMs);
  }

  private spillFailed(records: UsageRecord[], error: unknown): void {
    // Still in the spool, if it is on: replayed from there by the next start.
    this.counters.dropped += records.length;
    this.options.logger.error(
      { err: error, records: records.length },
      'could not spill usage records to disk; records dropped',
    );
  }

  /** Settles once every spill write begun so far is done. */
  private async spillsWritten(): Promise<void> {
    while (this.spillWrites !== undefined) await this.spillWrites;
  }

  spooled(): Promise<void> | undefined {
    return this.spool?.written();
  }

  /** A limit lease opened: named in the spool at once (spool.ts). */
  opened(key: string, lease: string): void {
    this.spool?.opened(key, lease);
  }

  /** The store counts what the lease spent: the spool no longer needs its records for it. */
  closed(lease: string): void {
    this.spool?.closed(lease);
  }

  /** The bus (or the spill file) has these records: their spool files may go. */
  private settle(records: readonly UsageRecord[]): void {
    this.spool?.settle(records);
  }

  private spillFiles(): string[] {
    return this.options.spillDir === undefined ? [] : spillFilesIn(this.options.spillDir);
  }

  private schedule(delayMs: number): void {
    if (this.timer !== undefined || this.closing) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.send();
    }, delayMs);
    this.timer.unref();
  }

  private send(): Promise<void> {
    this.sending ??= this.sendAll().finally(() => {
      this.sending = undefined;
      // Records emitted while a replay ran: their timer fired into this send and found it busy.
      if (this.queue.length > 0) this.schedule(0);
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
      // The bus takes records: the spilled ones go next, also while the queue never empties
      // (records arriving faster than the bus takes them); `send` comes back for the queue.
      if (this.spillPending) break;
    }
    if (this.spillPending) await this.replaySpill();
  }

  /**
   * Publishes spilled records; runs only after a publish succeeded, i.e. the bus is back. New
   * spills go to a fresh file from its start, and it claims only the files written before, once
   * the writes begun by then have landed: spills going on meanwhile never hold it back.
   */
  private async replaySpill(): Promise<void> {
    const dir = this.options.spillDir;
    if (dir !== undefined) {
      this.spillFile = newSpillFile(dir);
      this.nextSpill = undefined;
    }
    // The chain lands in order: its last write begun so far is the last of them to land.
    const landing = this.spillWrites;
    if (landing !== undefined) await landing;
    for (const file of this.spillFiles()) {
      // Claim the file first (rename is atomic): a file is replayed by one emitter only. The
      // file spills go to now is left to the next replay; no write off the loop touches the
      // others any more, and a spill on the loop is written within one turn.
      if (file === this.spillFile) continue;
      const claimed = `${file}.replaying`;
      try {
        renameSync(file, claimed);
      } catch {
        continue;
      }
      let count = 0;
      try {
        for await (const records of spilledBatches(claimed, this.maxBatch)) {
          await this.publisher.publish(records);
          count += records.length;
        }
      } catch (error) {
        try {
          renameSync(claimed, file);
        } catch {} // gone meanwhile: nothing left to retry from it
        this.options.logger.warn({ err: error, file }, 'spill replay failed; will retry');
        this.schedule(this.options.retryDelayMs);
        return;
      }
      unlinkSync(claimed);
      this.counters.replayed += count;
      this.options.logger.info({ records: count }, 'spilled usage records replayed');
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
    this.closing = true;
    const deadline = Date.now() + 10_000;
    while (this.queue.length > 0 && Date.now() < deadline && this.publisher.unreachable !== true) {
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
    await this.spillsWritten();
    await this.spool?.close();
  }

  stats(): EmitterStats {
    return {
      ...this.counters,
      queued: this.queue.length,
      spilling: this.spillingChars,
      spooled: this.spool?.spooled ?? 0,
      spoolFailures: this.spool?.failures ?? 0,
    };
  }
}
