import { type Consumer, type Kafka, type logCreator, logLevel, Partitioners, type Producer } from 'kafkajs';
import { recordTopic, type UsageBatchHandler, type UsagePublisher, type UsageSubscription } from './bus';
import type { Logger } from './kit/logger';
import { ENVIRONMENTS, parseBusRecord, partitionKey, type UsageRecord } from './record';

export { Kafka } from 'kafkajs';

/**
 * kafkajs logs through pino. Its ERROR lines are mostly transient (a coordinator still being
 * elected, a topic another process just created) and it retries them itself, so they land at
 * warn; failures that matter surface as errors from our own calls.
 */
export function kafkaLogging(logger: Logger): { logLevel: logLevel; logCreator: logCreator } {
  const child = logger.child({ component: 'kafkajs' });
  return {
    logLevel: logger.isLevelEnabled('debug') ? logLevel.INFO : logLevel.WARN,
    logCreator:
      () =>
      ({ level, log }) => {
        const { message, ...extra } = log;
        if (level <= logLevel.WARN) child.warn(extra, message);
        else child.debug(extra, message);
      },
  };
}

/** Creates the record topics if missing; safe to call from every producer and consumer. */
export async function ensureUsageTopics(kafka: Kafka, namespace: string, partitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = ENVIRONMENTS.map((env) => recordTopic(namespace, env)).filter((t) => !existing.has(t));
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

export class KafkaUsagePublisher implements UsagePublisher {
  private readonly producer: Producer;

  constructor(
    kafka: Kafka,
    private readonly namespace: string,
  ) {
    this.producer = kafka.producer({
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
  }

  async connect(): Promise<void> {
    await this.producer.connect();
  }

  async publish(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return;
    const byTopic = new Map<string, { key: string; value: string }[]>();
    for (const record of records) {
      const topic = recordTopic(this.namespace, record.environment);
      let messages = byTopic.get(topic);
      if (messages === undefined) {
        messages = [];
        byTopic.set(topic, messages);
      }
      messages.push({ key: partitionKey(record), value: JSON.stringify(record) });
    }
    await this.producer.sendBatch({
      acks: -1,
      topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
    });
  }

  async close(): Promise<void> {
    await this.producer.disconnect();
  }
}

/**
 * Consumer-group member. Offsets are committed only after the handler has written the batch,
 * so a crash between the write and the commit replays the batch; the idempotent store then
 * counts it once. A failing write is retried in place (with heartbeats), never skipped.
 */
export class KafkaUsageSubscription implements UsageSubscription {
  private readonly consumer: Consumer;

  constructor(
    kafka: Kafka,
    private readonly options: { namespace: string; groupId: string; retryDelayMs: number; logger: Logger },
  ) {
    this.consumer = kafka.consumer({ groupId: options.groupId, allowAutoTopicCreation: false });
  }

  async start(handler: UsageBatchHandler): Promise<void> {
    const { logger } = this.options;
    await this.consumer.connect();
    await this.consumer.subscribe({
      topics: ENVIRONMENTS.map((env) => recordTopic(this.options.namespace, env)),
      fromBeginning: true,
    });
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, heartbeat, isRunning, isStale }) => {
        const last = batch.messages.at(-1);
        if (last === undefined) return;
        const records: UsageRecord[] = [];
        for (const message of batch.messages) {
          const record = parseBusRecord(message.value?.toString('utf8') ?? '');
          if (record === undefined) {
            // Producers validate before publishing, so this is a foreign or corrupt message:
            // kept visible in the log with its coordinates rather than silently counted.
            logger.error(
              { topic: batch.topic, partition: batch.partition, offset: message.offset },
              'unreadable usage message skipped',
            );
            continue;
          }
          records.push(record);
        }
        for (let attempt = 1; ; attempt++) {
          if (!isRunning() || isStale()) throw new Error('consumer stopped before the batch was written');
          try {
            if (records.length > 0) await handler(records);
            break;
          } catch (error) {
            logger.error(
              { err: error, attempt, records: records.length },
              'usage batch write failed; retrying',
            );
            await heartbeat();
            await new Promise((resolve) =>
              setTimeout(resolve, Math.min(this.options.retryDelayMs * attempt, 10_000)),
            );
          }
        }
        await this.consumer.commitOffsets([
          { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() },
        ]);
      },
    });
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}
