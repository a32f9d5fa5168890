import { type Consumer, Kafka, type logCreator, logLevel, Partitioners, type Producer } from 'kafkajs';
import { CrossPartitionBatcher } from './batcher';
import './kafkajs-crc32c';
import './kafkajs-idle-fix';
import type { Logger } from '@mcp-meter/contracts/kit';
import {
  ENVIRONMENTS,
  type Environment,
  parseBusMessage,
  partitionKey,
  recordJson,
  type UsageRecord,
} from '@mcp-meter/contracts/usage-record';
import {
  bulkTopic,
  recordTopic,
  type SubscriptionProgress,
  type UsageBatchHandler,
  type UsagePublisher,
  type UsageSubscription,
} from './bus';

export { Kafka } from 'kafkajs';

/** Keeps each bulk message far below Kafka's default 1 MB message limit. */
const MAX_EVENTS_PER_MESSAGE = 500;

/** Where kafkajs's log lines go: `verbose` lets its INFO lines through, at debug. */
export interface KafkaLogSink {
  verbose: boolean;
  write(level: 'warn' | 'debug', extra: Record<string, unknown>, message: string): void;
}

/**
 * kafkajs logs through pino. Its ERROR lines are mostly transient (a coordinator still being
 * elected, a topic another process just created) and it retries them itself, so they land at
 * warn; failures that matter surface as errors from our own calls.
 */
export function kafkaLogging(logger: Logger): { logLevel: logLevel; logCreator: logCreator } {
  const child = logger.child({ component: 'kafkajs' });
  return kafkaLogOptions({
    verbose: logger.isLevelEnabled('debug'),
    write: (level, extra, message) => child[level](extra, message),
  });
}

/** kafkajs's logging options, writing to `sink` (a producer thread's goes to its parent). */
export function kafkaLogOptions(sink: KafkaLogSink): { logLevel: logLevel; logCreator: logCreator } {
  return {
    logLevel: sink.verbose ? logLevel.INFO : logLevel.WARN,
    logCreator:
      () =>
      ({ level, log }) => {
        const { message, ...extra } = log;
        sink.write(level <= logLevel.WARN ? 'warn' : 'debug', extra, message);
      },
  };
}

/** The Kafka client every producer and consumer of usage records uses, in a thread or not. */
export function kafkaClient(
  brokers: string[],
  clientId: string,
  logging: { logLevel: logLevel; logCreator: logCreator },
): Kafka {
  return new Kafka({ clientId, brokers, ...logging, retry: { retries: 5, initialRetryTime: 200 } });
}

export const allTopics = (namespace: string): string[] =>
  ENVIRONMENTS.flatMap((env) => [recordTopic(namespace, env), bulkTopic(namespace, env)]);

/**
 * Creates the record topics if missing; safe to call from every producer and consumer, also at
 * once. A broker that has just created a topic (ours or another process's) can answer metadata
 * for it with UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE for a moment, and kafkajs gives
 * up on the first; such protocol errors are retried here, a few times, with a fresh admin client.
 */
export async function ensureUsageTopics(
  kafka: Kafka,
  namespace: string,
  partitions: number,
  attempts = 8,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await createMissingTopics(kafka, namespace, partitions);
      return;
    } catch (error) {
      if (attempt >= attempts || !isProtocolError(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 2_000)));
    }
  }
}

/** A broker's error answer (kafkajs's KafkaJSProtocolError, not a named export under ESM). */
const isProtocolError = (error: unknown): boolean =>
  error instanceof Error && error.name === 'KafkaJSProtocolError';

async function createMissingTopics(kafka: Kafka, namespace: string, partitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = allTopics(namespace).filter((t) => !existing.has(t));
    if (missing.length > 0) {
      try {
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: -1 })),
        });
      } catch (error) {
        // Another process may have created them between our list and create; that is success.
        const now = new Set(await admin.listTopics());
        if (!missing.every((topic) => now.has(topic))) throw error;
      }
    }
  } finally {
    await admin.disconnect();
  }
}

/**
 * What a Kafka message is made from, per record: its environment (the topic), its partition key
 * and its JSON text. A producer thread (producer-thread.ts) is sent these, not the records.
 */
export interface BusEntry {
  environment: Environment;
  key: string;
  json: string;
}

export const busEntry = (record: UsageRecord): BusEntry => ({
  environment: record.environment,
  key: partitionKey(record),
  json: recordJson(record),
});

/** Groups records into Kafka messages: one record alone, several of one customer as a bulk message. */
export function toMessages(namespace: string, records: readonly UsageRecord[]) {
  return entryMessages(namespace, records.map(busEntry));
}

/** `toMessages` of records already made into entries. */
export function entryMessages(namespace: string, entries: readonly BusEntry[]) {
  const groups = new Map<string, BusEntry[]>();
  for (const entry of entries) {
    const key = `${entry.environment}\u0000${entry.key}`;
    let group = groups.get(key);
    if (group === undefined) {
      group = [];
      groups.set(key, group);
    }
    group.push(entry);
  }
  const byTopic = new Map<string, { key: string; value: string }[]>();
  const push = (topic: string, message: { key: string; value: string }) => {
    const list = byTopic.get(topic) ?? [];
    list.push(message);
    byTopic.set(topic, list);
  };
  for (const group of groups.values()) {
    const first = group[0];
    if (first === undefined) continue;
    const key = first.key;
    if (group.length === 1) {
      push(recordTopic(namespace, first.environment), { key, value: first.json });
      continue;
    }
    for (let i = 0; i < group.length; i += MAX_EVENTS_PER_MESSAGE) {
      // JSON.stringify({ events }), from each record's text made once, in one join: wrapping a
      // joined text in `{"events":[…]}` would copy the whole message once more when it is sent.
      const events = group.slice(i, i + MAX_EVENTS_PER_MESSAGE).map((e) => e.json);
      events[0] = `{"events":[${events[0]}`;
      events[events.length - 1] = `${events[events.length - 1]}]}`;
      push(bulkTopic(namespace, first.environment), { key, value: events.join(',') });
    }
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

/** Records one produce request carries at most when concurrent publishes are sent together. */
const MAX_RECORDS_PER_PRODUCE = 5_000;

interface PendingPublish {
  entries: readonly BusEntry[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Publishes with group commit: while one produce request is in flight, the records of every
 * publish that arrives meanwhile wait and go together in the next one. Each caller still resolves
 * only once its own records are acknowledged, so nothing is acknowledged early; under load a
 * request carries many callers' records instead of each paying a round trip to the broker.
 */
export class KafkaUsagePublisher implements UsagePublisher {
  readonly sendsRecordJson = true;
  private readonly producer: Producer;
  private waiting: PendingPublish[] = [];
  private producing: Promise<void> | undefined;

  constructor(
    kafka: Kafka,
    private readonly namespace: string,
  ) {
    this.producer = kafka.producer({
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
      retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 2_000 },
    });
  }

  async connect(): Promise<void> {
    await this.producer.connect();
  }

  publish(records: readonly UsageRecord[]): Promise<void> {
    return this.publishEntries(records.map(busEntry));
  }

  /** `publish` of records already made into entries (what a producer thread is sent). */
  publishEntries(entries: readonly BusEntry[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiting.push({ entries, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.producing !== undefined) return;
    this.producing = this.produceWaiting().finally(() => {
      this.producing = undefined;
      // A publish may have come between the loop's last look and this callback.
      if (this.waiting.length > 0) this.kick();
    });
  }

  /** Sends what waits, a request at a time, until nothing does; a failed request fails its callers only. */
  private async produceWaiting(): Promise<void> {
    while (this.waiting.length > 0) {
      let count = 0;
      let take = 0;
      while (take < this.waiting.length) {
        const size = this.waiting[take]?.entries.length ?? 0;
        if (take > 0 && count + size > MAX_RECORDS_PER_PRODUCE) break;
        count += size;
        take++;
      }
      const batch = this.waiting.splice(0, take);
      try {
        // acks from every in-sync replica: an acknowledged record survives the loss of the leader.
        await this.producer.sendBatch({
          acks: -1,
          timeout: 10_000,
          topicMessages: entryMessages(
            this.namespace,
            batch.length === 1 ? (batch[0]?.entries ?? []) : batch.flatMap((p) => p.entries),
          ),
        });
        for (const p of batch) p.resolve();
      } catch (error) {
        for (const p of batch) p.reject(error);
      }
    }
  }

  async close(): Promise<void> {
    while (this.producing !== undefined) await this.producing;
    await this.producer.disconnect();
  }
}

export interface KafkaSubscriptionOptions {
  namespace: string;
  groupId: string;
  batchSize: number;
  flushIntervalMs: number;
  retryDelayMs: number;
  partitionsConsumedConcurrently: number;
  sessionTimeoutMs: number;
  /** A fetch returns once this much is waiting, or after `fetchMaxWaitMs` with whatever there is. */
  fetchMinBytes?: number;
  fetchMaxWaitMs?: number;
  logger: Logger;
}

/**
 * Consumer-group member. Batches from all its partitions are written together; each
 * partition's offsets are committed only after the write that holds its records. A crash
 * between the write and the commit replays the batch, which the store then counts once.
 * Fetching runs ahead of writing by at most four batches.
 */
export class KafkaUsageSubscription implements UsageSubscription {
  private readonly consumer: Consumer;
  private batcher: CrossPartitionBatcher | undefined;
  private running = false;
  readonly stats = { malformed: 0, read: 0 };
  /** Each held partition's messages past its latest fetch, by topic and partition. */
  private readonly behind = new Map<string, number>();

  constructor(
    kafka: Kafka,
    private readonly options: KafkaSubscriptionOptions,
  ) {
    this.consumer = kafka.consumer({
      groupId: options.groupId,
      allowAutoTopicCreation: false,
      sessionTimeout: options.sessionTimeoutMs,
      // Large fetches: a partition's backlog arrives in few round trips (kafkajs defaults to 1 MB).
      maxBytesPerPartition: 8 * 1024 * 1024,
      maxBytes: 64 * 1024 * 1024,
      // A fetch returns once minBytes are waiting or after maxWait. Waiting for data (512 KiB by
      // default) costs freshness at most maxWait, and saves the broker and this consumer a fetch
      // across every partition per produce request (most of their CPU per record at moderate
      // rates). Stopping waits for the fetch in flight, so the kafkajs default of 5 s would delay
      // every shutdown and rebalance.
      minBytes: options.fetchMinBytes ?? 1,
      maxWaitTimeInMs: options.fetchMaxWaitMs ?? 500,
      heartbeatInterval: Math.floor(options.sessionTimeoutMs / 10),
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 300, maxRetryTime: 10_000 },
    });
  }

  get writeStats() {
    return this.batcher?.stats;
  }

  progress(): SubscriptionProgress {
    let behind = 0;
    for (const lag of this.behind.values()) behind += lag;
    return {
      malformed: this.stats.malformed,
      read: this.stats.read,
      behind,
      unwritten: this.batcher?.unwrittenRecords ?? 0,
    };
  }

  async start(handler: UsageBatchHandler): Promise<void> {
    const { logger } = this.options;
    const batcher = new CrossPartitionBatcher(handler, {
      ...this.options,
      acknowledge: (ranges) =>
        this.consumer.commitOffsets(
          ranges.map((r) => ({
            topic: r.topic,
            partition: r.partition,
            offset: (BigInt(r.last) + 1n).toString(),
          })),
        ),
    });
    this.batcher = batcher;
    // A join may hand this member other partitions: their lag is read from their next fetches.
    this.consumer.on(this.consumer.events.GROUP_JOIN, () => this.behind.clear());
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: allTopics(this.options.namespace), fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.options.partitionsConsumedConcurrently,
      eachBatch: async ({ batch, heartbeat, resolveOffset }) => {
        const first = batch.messages[0];
        const last = batch.messages.at(-1);
        if (first === undefined || last === undefined) return;
        this.behind.set(`${batch.topic}\u0000${batch.partition}`, Math.max(0, Number(batch.offsetLag())));
        this.stats.read += batch.messages.length;
        const records: UsageRecord[] = [];
        for (const message of batch.messages) {
          const parsed = parseBusMessage(message.value?.toString('utf8') ?? '');
          if (parsed === undefined) {
            // Producers validate before publishing, so this is a foreign or corrupt message:
            // counted and logged with its coordinates, never silently absorbed into a total.
            this.stats.malformed++;
            logger.error(
              { topic: batch.topic, partition: batch.partition, offset: message.offset },
              'unreadable usage message skipped',
            );
            continue;
          }
          records.push(...parsed);
        }
        const written = batcher.add(records, {
          topic: batch.topic,
          partition: batch.partition,
          first: first.offset,
          last: last.offset,
        });
        // The fetch position moves on at once, so fetching overlaps the batch's wait and write;
        // the committed position moves only after the write (the batcher's acknowledge).
        resolveOffset(last.offset);
        if (!batcher.full) {
          written.catch(() => undefined);
          return;
        }
        // Backpressure: a slow or failing store stops fetching here, keeping memory bounded and
        // the group membership alive.
        for (let done = false; !done; ) {
          done = await Promise.race([
            written.then(() => true),
            new Promise<boolean>((r) => setTimeout(() => r(false), 3_000)),
          ]);
          if (!done) await heartbeat();
        }
      },
    });
    this.running = true;
  }

  /**
   * Stops fetching, writes and commits what was fetched, then leaves the group. The commits
   * happen while still a member: kafkajs drops commits once stopped, and a commit can wait up
   * to a fetch's maxWait behind the fetch in flight on the same broker connection, so
   * committing after `consumer.stop()` would turn every clean shutdown into a replay.
   */
  async stop(): Promise<void> {
    if (this.running) this.consumer.pause(allTopics(this.options.namespace).map((topic) => ({ topic })));
    await this.batcher?.drain();
    await this.consumer.stop();
    // Anything delivered between the pause and the stop is written; its commit may be lost,
    // which only replays it into the idempotent store.
    await this.batcher?.stop();
    await this.consumer.disconnect();
  }
}
