import type { UsageBatchHandler } from './bus';
import type { Logger } from './kit/logger';
import type { UsageRecord } from './record';
import { dedupeTokenFor } from './usage-store';

export interface OffsetRange {
  topic: string;
  partition: number;
  first: string;
  last: string;
}

interface Pending {
  records: UsageRecord[];
  ranges: OffsetRange[];
  waiters: { resolve: () => void; reject: (error: Error) => void }[];
}

/**
 * Gathers records from every partition a consumer holds into one batch, written when it reaches
 * `batchSize` records or has waited `flushIntervalMs`, whichever comes first. Each caller gets
 * a promise that settles only once its records are durably written, so it commits its offsets
 * strictly after the write. A failed write is retried until it succeeds or the consumer stops:
 * records are delayed, never skipped.
 */
export class CrossPartitionBatcher {
  private pending: Pending = { records: [], ranges: [], waiters: [] };
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private stopped = false;
  readonly stats = { inserts: 0, rows: 0, failedWrites: 0 };

  constructor(
    private readonly handler: UsageBatchHandler,
    private readonly options: {
      batchSize: number;
      flushIntervalMs: number;
      retryDelayMs: number;
      logger: Logger;
    },
  ) {}

  add(records: UsageRecord[], range: OffsetRange): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('batcher stopped'));
    const written = new Promise<void>((resolve, reject) => this.pending.waiters.push({ resolve, reject }));
    this.pending.records.push(...records);
    this.pending.ranges.push(range);
    if (this.pending.records.length >= this.options.batchSize) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.options.flushIntervalMs);
    return written;
  }

  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    if (batch.waiters.length === 0) return;
    this.pending = { records: [], ranges: [], waiters: [] };
    // Writes run one after another: ClickHouse sees ordered, whole batches.
    this.writing = this.writing.then(() => this.write(batch));
  }

  private async write(batch: Pending): Promise<void> {
    const token = dedupeTokenFor(batch.ranges);
    for (let attempt = 1; ; attempt++) {
      if (this.stopped) {
        for (const w of batch.waiters) w.reject(new Error('consumer stopped before the batch was written'));
        return;
      }
      try {
        if (batch.records.length > 0) await this.handler(batch.records, token);
        this.stats.inserts++;
        this.stats.rows += batch.records.length;
        for (const w of batch.waiters) w.resolve();
        return;
      } catch (error) {
        this.stats.failedWrites++;
        this.options.logger.error(
          { err: error, attempt, records: batch.records.length },
          'usage batch write failed; retrying',
        );
        await new Promise((resolve) =>
          setTimeout(resolve, Math.min(this.options.retryDelayMs * attempt, 10_000)),
        );
      }
    }
  }

  /** Stops retrying; callers still waiting are rejected, so their offsets stay uncommitted. */
  async stop(): Promise<void> {
    this.flush();
    this.stopped = true;
    await this.writing;
  }

  /** Writes what is pending now and waits for it (graceful shutdown). */
  async drain(): Promise<void> {
    this.flush();
    await this.writing;
  }
}
