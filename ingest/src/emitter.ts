import type { UsagePublisher } from './bus';
import type { Logger } from './kit/logger';
import type { UsageRecord } from './record';

export interface EmitterStats {
  emitted: number;
  published: number;
  retried: number;
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
  /** Memory bound; past it records are dropped and counted (spill to disk is the next step). */
  maxQueued: number;
  retryDelayMs: number;
  logger: Logger;
}

export class BatchingUsageEmitter implements UsageEmitter {
  private queue: UsageRecord[] = [];
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private counters = { emitted: 0, published: 0, retried: 0, dropped: 0 };

  constructor(
    private readonly publisher: UsagePublisher,
    private readonly options: BatchingEmitterOptions,
  ) {}

  emit(record: UsageRecord): void {
    this.counters.emitted++;
    if (this.queue.length >= this.options.maxQueued) {
      this.counters.dropped++;
      this.options.logger.error({ recordId: record.id }, 'usage emitter queue full; record dropped');
      return;
    }
    this.queue.push(record);
    if (this.queue.length >= this.options.maxBatch) void this.send();
    else this.schedule(this.options.lingerMs);
  }

  private schedule(delayMs: number): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.send();
    }, delayMs);
  }

  private send(): Promise<void> {
    this.sending ??= this.sendAll().finally(() => {
      this.sending = undefined;
    });
    return this.sending;
  }

  private async sendAll(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, this.options.maxBatch);
      try {
        await this.publisher.publish(batch);
        this.queue.splice(0, batch.length);
        this.counters.published += batch.length;
      } catch (error) {
        this.counters.retried += batch.length;
        this.options.logger.warn({ err: error, records: batch.length }, 'usage publish failed; will retry');
        this.schedule(this.options.retryDelayMs);
        return;
      }
    }
  }

  async flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    await this.send();
  }

  async close(): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (this.queue.length > 0 && Date.now() < deadline) {
      await this.flush();
      if (this.queue.length > 0)
        await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs));
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.queue.length > 0) {
      this.options.logger.error({ records: this.queue.length }, 'usage records not published at shutdown');
    }
  }

  stats(): EmitterStats {
    return { ...this.counters, queued: this.queue.length };
  }
}
