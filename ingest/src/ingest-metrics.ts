import { Counter, counter, gauge, Histogram } from '@mcp-meter/contracts/metrics';
import type { SubscriptionProgress } from './bus';

/** How often the group's lag is read from Kafka, at most, and how long a reading may take. */
export const GROUP_LAG_EVERY_MS = 10_000;
const GROUP_LAG_TIMEOUT_MS = 5_000;

/**
 * What the ingest consumer of a process has stored, for its Prometheus page (the control plane's
 * `/metrics` when ingest runs in its process): batches and records written to ClickHouse, failed
 * writes (each is retried; a record is delayed, never skipped) and how long each write took.
 */
export class IngestMetrics {
  private readonly batches = new Counter(
    'mcpmeter_ingest_batches_stored_total',
    'Usage batches written to ClickHouse and acknowledged to the bus',
  );
  private readonly records = new Counter(
    'mcpmeter_ingest_records_stored_total',
    'Usage records in the batches written to ClickHouse (a record the bus delivers twice is stored once, counted twice)',
  );
  private readonly failures = new Counter(
    'mcpmeter_ingest_batch_failures_total',
    'Usage batch writes that failed and were tried again',
  );
  private readonly seconds = new Histogram(
    'mcpmeter_ingest_batch_seconds',
    'Time to write one usage batch to ClickHouse (its rollup marks included)',
  );
  /** When a batch was last written, in seconds since the epoch; 0 before the first. */
  private lastStored = 0;
  /** The group's lag from Kafka, read in the background of scrapes (see `followGroup`). */
  private group:
    | { read: () => Promise<number>; lag: number | undefined; readAt: number; reading: boolean }
    | undefined;
  /** The consumer running now (a start that failed is tried again with a new one). */
  private progress: () => SubscriptionProgress | undefined = () => undefined;

  /** Reads how far behind the consumer is from `progress` at each render. */
  follow(progress: () => SubscriptionProgress | undefined): void {
    this.progress = progress;
  }

  /**
   * Shows the consumer group's lag as Kafka's committed offsets give it, from `read`. A scrape
   * never waits for Kafka: it shows the last reading and, once that is GROUP_LAG_EVERY_MS old,
   * starts the next (given up after GROUP_LAG_TIMEOUT_MS). A failed reading leaves the gauge off
   * the page until one succeeds, so a stale figure never stands for Kafka's.
   */
  followGroup(read: () => Promise<number>): void {
    this.group = { read, lag: undefined, readAt: 0, reading: false };
  }

  private groupLag(): string {
    const group = this.group;
    if (group === undefined) return '';
    if (!group.reading && Date.now() - group.readAt >= GROUP_LAG_EVERY_MS) {
      group.reading = true;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('Kafka did not answer')), GROUP_LAG_TIMEOUT_MS);
        timer.unref();
      });
      Promise.race([group.read(), timeout])
        .then(
          (lag) => {
            group.lag = lag;
          },
          () => {
            group.lag = undefined;
          },
        )
        .finally(() => {
          clearTimeout(timer);
          group.readAt = Date.now();
          group.reading = false;
        });
    }
    return group.lag === undefined
      ? ''
      : gauge(
          'mcpmeter_ingest_kafka_group_lag_messages',
          "Messages in Kafka the ingest consumer group has not committed, every usage partition, from Kafka's committed offsets (the whole group's: every process reports the same figure)",
          group.lag,
        );
  }

  /** Runs `write` for a batch of `records` records, counting it as written or failed. */
  async measure(records: number, write: () => Promise<void>): Promise<void> {
    const started = performance.now();
    try {
      await write();
    } catch (error) {
      this.failures.inc();
      throw error;
    }
    this.seconds.observe((performance.now() - started) / 1000);
    this.batches.inc();
    this.records.inc({}, records);
    this.lastStored = Date.now() / 1000;
  }

  render(): string {
    const progress = this.progress();
    let behind = '';
    if (progress !== undefined) {
      behind =
        counter(
          'mcpmeter_ingest_malformed_messages_total',
          'Bus messages no usage record could be read from, skipped and logged with their coordinates',
          progress.malformed,
        ) +
        gauge(
          'mcpmeter_ingest_records_unwritten',
          'Records fetched from the bus and not yet written to ClickHouse',
          progress.unwritten,
        );
      if (progress.behind !== undefined)
        behind += gauge(
          'mcpmeter_ingest_kafka_lag_messages',
          "Messages in Kafka past this consumer's fetch position, over the partitions it holds, as each partition's latest fetch saw them",
          progress.behind,
        );
      if (progress.read !== undefined)
        behind += counter(
          'mcpmeter_ingest_kafka_messages_read_total',
          'Messages this consumer fetched from Kafka, unreadable ones included (with the lag: how long those waiting would take to read)',
          progress.read,
        );
    }
    return (
      behind +
      this.groupLag() +
      this.batches.render() +
      this.records.render() +
      this.failures.render() +
      this.seconds.render() +
      gauge(
        'mcpmeter_ingest_last_stored_timestamp_seconds',
        'When a usage batch was last written to ClickHouse (seconds since the epoch; 0: none yet)',
        this.lastStored,
      )
    );
  }
}
