import {
  appendFileSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '@mcp-meter/contracts/kit';
import { parseBusRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { UsagePublisher } from './bus';

export interface EmitterStats {
  emitted: number;
  published: number;
  retried: number;
  spilled: number;
  replayed: number;
  dropped: number;
  queued: number;
}

/** Fire-and-forget usage emission for hot paths: `emit` never waits and never throws. */
export interface UsageEmitter {
  emit(record: UsageRecord): void;
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
  logger: Logger;
}

/**
 * Batches records to the bus off the request path. When the bus is down, records wait in
 * memory up to `maxQueued`; past that, and at shutdown, they are appended (fsync'd) to a spill
 * file. Spill files, including those left by an earlier run, are replayed once the bus accepts
 * records again; a replay that fails midway is retried whole, which is safe because the store
 * counts a record id once.
 */
export class BatchingUsageEmitter implements UsageEmitter {
  private queue: UsageRecord[] = [];
  /** When the oldest record in the queue arrived (ms, monotonic). */
  private queuedSince = 0;
  /** Flushes waiting: while any is, the queue is published whole, without lingering. */
  private flushing = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private readonly counters = { emitted: 0, published: 0, retried: 0, spilled: 0, replayed: 0, dropped: 0 };
  private readonly spillFile: string | undefined;
  private spillPending: boolean;

  constructor(
    private readonly publisher: UsagePublisher,
    private readonly options: BatchingEmitterOptions,
  ) {
    if (options.spillDir !== undefined) {
      mkdirSync(options.spillDir, { recursive: true });
      recoverClaimedSpills(options.spillDir);
      this.spillFile = join(options.spillDir, `spill-${Date.now()}-${process.pid}.jsonl`);
    }
    this.spillPending = this.spillFiles().length > 0;
    if (this.spillPending) this.schedule(0);
  }

  emit(record: UsageRecord): void {
    this.counters.emitted++;
    if (this.queue.length === 0) this.queuedSince = performance.now();
    this.queue.push(record);
    this.enforceMemoryBound();
    if (this.queue.length >= this.options.maxBatch) void this.send();
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
    } catch (error) {
      this.counters.dropped += records.length;
      this.options.logger.error(
        { err: error, records: records.length },
        'could not spill usage records to disk; records dropped',
      );
    }
  }

  private spillFiles(): string[] {
    if (this.options.spillDir === undefined) return [];
    return readdirSync(this.options.spillDir)
      .filter((f) => f.endsWith('.jsonl'))
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
      if (this.flushing === 0 && this.queue.length < this.options.maxBatch) {
        const wait = this.options.lingerMs - (performance.now() - this.queuedSince);
        if (wait > 0) {
          this.schedule(wait);
          break;
        }
      }
      // The batch leaves the queue before the publish: while it is in flight, emit() may spill
      // the queue's oldest records, so nothing else may later be removed in the batch's name.
      const batch = this.queue.splice(0, this.options.maxBatch);
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
        for (let i = 0; i < records.length; i += this.options.maxBatch) {
          await this.publisher.publish(records.slice(i, i + this.options.maxBatch));
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
  }

  stats(): EmitterStats {
    return { ...this.counters, queued: this.queue.length };
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
