import type { Logger } from '@mcp-meter/contracts/kit';
import type { UsageSettlement } from '@mcp-meter/contracts/usage';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import type { UsageBatchHandler, UsagePublisher, UsageSubscription } from './bus';

export interface InProcessBusOptions {
  batchSize: number;
  flushIntervalMs: number;
  retryDelayMs: number;
  logger: Logger;
}

/** A publish waits at most this long for its records to be written before it fails. */
const PUBLISH_TIMEOUT_MS = 10_000;
/**
 * How long a publish lingers for others to share its write, and the least time between writes
 * while records keep coming (at most the flush interval). Each write is a chdb part, and a part
 * costs its insert and the merges after it about the same whatever its size up to some thousands
 * of records: at 22,000 records a second, writes of about 2,200 records (every 100 ms) cost chdb
 * about 10 µs a record in all, writes of 5,000 about 8 (measured in a process doing nothing
 * else). So under load writes go about this often, carrying everything since. A full batch
 * (`batchSize` records) never lingers: a publisher that waits for each publish before the next
 * (the emitter does) would otherwise be held to a batch per linger, whatever its load.
 */
export const PUBLISH_LINGER_MS = 250;

/**
 * The all-in-one stand-in for Kafka: an in-memory queue drained into the handler on batch size
 * or max wait. A batch leaves the queue only after the handler has written it, so a failing
 * store delays records instead of losing them. Like a Kafka acknowledgement, a publish resolves
 * only once its records are written (stored), so a publisher that keeps records until then
 * (the proxy's spool) loses none in a crash; publishes close together share one write.
 */
export class InProcessUsageBus implements UsagePublisher, UsageSubscription, UsageSettlement {
  private readonly queue: UsageRecord[] = [];
  /** Records ever accepted and ever written: the queue is FIFO, so `written` passing a count taken earlier means all of those are stored. */
  private accepted = 0;
  private written = 0;
  private handler: UsageBatchHandler | undefined;
  private timer: NodeJS.Timeout | undefined;
  private draining: Promise<void> | undefined;
  /** Publishes waiting for their records to be written: resolved once `written` reaches `upTo`. */
  private waiters: Array<{ upTo: number; resolve: () => void; reject: (error: Error) => void }> = [];
  private soon: NodeJS.Timeout | undefined;

  constructor(private readonly options: InProcessBusOptions) {}

  get wholeBatch(): number {
    return this.options.batchSize;
  }

  publish(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    this.queue.push(...records);
    this.accepted += records.length;
    const upTo = this.accepted;
    const written = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.resolve !== done);
        reject(new Error('usage records not written in time; they stay queued'));
      }, PUBLISH_TIMEOUT_MS);
      timer.unref();
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.waiters.push({
        upTo,
        resolve: done,
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
    });
    if (this.queue.length >= this.options.batchSize) void this.drain();
    else this.drainSoon();
    return written;
  }

  private drainSoon(): void {
    this.soon ??= setTimeout(
      () => {
        this.soon = undefined;
        void this.drain();
      },
      Math.min(PUBLISH_LINGER_MS, this.options.flushIntervalMs),
    );
  }

  private wake(): void {
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const waiter of this.waiters) {
      if (waiter.upTo <= this.written) waiter.resolve();
      else still.push(waiter);
    }
    this.waiters = still;
  }

  get pending(): number {
    return this.queue.length;
  }

  async start(handler: UsageBatchHandler): Promise<void> {
    this.handler = handler;
    this.timer = setInterval(() => void this.drain(), this.options.flushIntervalMs);
    this.timer.unref();
  }

  /** Drains one pass; concurrent callers share the pass in progress. */
  drain(): Promise<void> {
    this.draining ??= this.drainOnce()
      .catch(() => false)
      .then((wrote) => {
        this.draining = undefined;
        // A full batch that came during a pass that wrote goes now; fewer records, or a store that
        // just failed, wait a linger, so small writes (and retries) do not go back to back.
        if (wrote && this.queue.length >= this.options.batchSize && this.waiters.length > 0)
          void this.drain();
        else if (this.queue.length > 0 && this.waiters.length > 0) this.drainSoon();
      });
    return this.draining;
  }

  /**
   * Writes what was queued when the pass began, in batches; later records go in the next pass.
   * False when a write failed (the rest stays queued).
   */
  private async drainOnce(): Promise<boolean> {
    const handler = this.handler;
    if (handler === undefined) return false;
    let left = this.queue.length;
    while (left > 0 && this.queue.length > 0) {
      const batch = this.queue.slice(0, Math.min(this.options.batchSize, left));
      left -= batch.length;
      try {
        await handler(batch);
        this.queue.splice(0, batch.length);
        this.written += batch.length;
        this.wake();
      } catch (error) {
        this.options.logger.error(
          { err: error, records: batch.length },
          'usage batch write failed; will retry',
        );
        return false;
      }
    }
    return true;
  }

  async settled(timeoutMs: number): Promise<boolean> {
    const target = this.accepted;
    const deadline = Date.now() + timeoutMs;
    while (this.written < target) {
      if (this.handler === undefined || Date.now() >= deadline) return false;
      await this.drain();
      if (this.written < target)
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.options.retryDelayMs, 50)));
    }
    return true;
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    // Bounded: a store that stays down for the whole window leaves records unwritten, and says so.
    const deadline = Date.now() + 30_000;
    while (this.queue.length > 0 && Date.now() < deadline) {
      await this.drain();
      if (this.queue.length > 0)
        await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs));
    }
    if (this.queue.length > 0) {
      this.options.logger.error({ records: this.queue.length }, 'usage records not written at shutdown');
    }
    for (const waiter of this.waiters.splice(0)) waiter.reject(new Error('usage bus stopped'));
    if (this.soon !== undefined) clearTimeout(this.soon);
    this.handler = undefined;
  }

  async close(): Promise<void> {}
}
