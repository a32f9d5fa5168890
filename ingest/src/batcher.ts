import type { Logger } from '@mcp-meter/contracts/kit';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { UsageBatchHandler } from './bus';
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

export interface BatcherOptions {
  batchSize: number;
  flushIntervalMs: number;
  retryDelayMs: number;
  logger: Logger;
  /** Acknowledges the source positions of a batch, strictly after it was written (Kafka: commit). */
  acknowledge?: (ranges: OffsetRange[]) => Promise<void>;
}

/**
 * Gathers records from every partition a consumer holds into one batch, written when it reaches
 * `batchSize` records or has waited `flushIntervalMs`, whichever comes first. Writes run one at
 * a time, in order; after each successful write its source positions are acknowledged, so a
 * position is never committed before its records are durable. A failed write is retried until
 * it succeeds or the consumer stops: records are delayed, never skipped.
 */
export class CrossPartitionBatcher {
  private pending: Pending = { records: [], ranges: [], waiters: [] };
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Records added but not yet written (pending plus in flight): the backpressure signal. */
  private unwritten = 0;
  readonly stats = { inserts: 0, rows: 0, failedWrites: 0 };

  constructor(
    private readonly handler: UsageBatchHandler,
    private readonly options: BatcherOptions,
  ) {}

  /** Resolves once these records are written and acknowledged. */
  add(records: UsageRecord[], range: OffsetRange): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('batcher stopped'));
    const written = new Promise<void>((resolve, reject) => this.pending.waiters.push({ resolve, reject }));
    this.pending.records.push(...records);
    this.pending.ranges.push(range);
    this.unwritten += records.length;
    if (this.pending.records.length >= this.options.batchSize) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.options.flushIntervalMs);
    return written;
  }

  /** Records added and not yet written. */
  get unwrittenRecords(): number {
    return this.unwritten;
  }

  /** True when the caller should wait for its records before fetching more (bounded memory). */
  get full(): boolean {
    return this.unwritten >= 4 * this.options.batchSize;
  }

  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    if (batch.waiters.length === 0) return;
    this.pending = { records: [], ranges: [], waiters: [] };
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
        break;
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
    this.stats.inserts++;
    this.stats.rows += batch.records.length;
    this.unwritten -= batch.records.length;
    try {
      await this.options.acknowledge?.(batch.ranges);
    } catch (error) {
      // The records are durable; an unacknowledged position only means a replay after a
      // restart or rebalance, which the idempotent store absorbs.
      this.options.logger.warn(
        { err: error },
        'offset commit failed after a successful write; the batch may be replayed',
      );
    }
    for (const w of batch.waiters) w.resolve();
  }

  /** Writes what is pending now and waits for it (graceful shutdown). */
  async drain(): Promise<void> {
    this.flush();
    await this.writing;
  }

  /** Stops retrying; callers still waiting are rejected, so their offsets stay uncommitted. */
  async stop(): Promise<void> {
    this.flush();
    this.stopped = true;
    await this.writing;
  }
}
