import { mkdirSync } from 'node:fs';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { BusConfig, ClickHouseConfig, UsageSettlement } from '@mcp-meter/contracts/usage';
import type { UsagePublisher, UsageSubscription } from './bus';
import { type ClickHouseClient, createClickHouse, migrateClickHouse } from './clickhouse/client';
import { InProcessUsageBus } from './in-process-bus';
import {
  ensureUsageTopics,
  Kafka,
  KafkaUsagePublisher,
  KafkaUsageSubscription,
  kafkaLogging,
} from './kafka-bus';
import { KafkaUsageSettlement } from './kafka-settlement';
import { ClickHouseUsageAnalytics } from './usage-analytics';
import { ClickHouseUsageStore } from './usage-store';

export interface UsageBus {
  publisher: UsagePublisher;
  /** A consumer-group member (Kafka) or the shared in-process queue. */
  subscription(): UsageSubscription;
  /** Whether what the bus accepted so far is stored: billing waits for it before closing a period. */
  settlement: UsageSettlement;
  kind: 'kafka' | 'in-process';
  close(): Promise<void>;
}

export async function openUsageBus(config: BusConfig, logger: Logger): Promise<UsageBus> {
  if (config.kafkaBrokers.length === 0) {
    const bus = new InProcessUsageBus({ ...config, logger });
    return {
      publisher: bus,
      subscription: () => bus,
      settlement: bus,
      kind: 'in-process',
      close: async () => {},
    };
  }
  const kafka = new Kafka({
    clientId: config.kafkaClientId,
    brokers: config.kafkaBrokers,
    ...kafkaLogging(logger),
    retry: { retries: 5, initialRetryTime: 200 },
  });
  await ensureUsageTopics(kafka, config.namespace, config.kafkaTopicPartitions);
  const publisher = new KafkaUsagePublisher(kafka, config.namespace);
  await publisher.connect();
  const settlement = new KafkaUsageSettlement(kafka, config.namespace, config.kafkaConsumerGroup);
  return {
    settlement,
    publisher,
    subscription: () =>
      new KafkaUsageSubscription(kafka, {
        namespace: config.namespace,
        groupId: config.kafkaConsumerGroup,
        batchSize: config.batchSize,
        flushIntervalMs: config.flushIntervalMs,
        retryDelayMs: config.retryDelayMs,
        partitionsConsumedConcurrently: config.kafkaTopicPartitions * 4, // record + bulk topics, both environments
        sessionTimeoutMs: config.kafkaSessionTimeoutMs,
        fetchMinBytes: config.fetchMinBytes,
        fetchMaxWaitMs: config.fetchMaxWaitMs,
        logger,
      }),
    kind: 'kafka',
    close: async () => {
      await settlement.close();
      await publisher.close();
    },
  };
}

export interface UsageStoreHandle {
  store: ClickHouseUsageStore;
  /** Analytics read from the same tables (issue 63). */
  analytics: ClickHouseUsageAnalytics;
  client: ClickHouseClient;
  close(): Promise<void>;
}

export async function openUsageStore(config: ClickHouseConfig): Promise<UsageStoreHandle> {
  if (config.url === undefined) mkdirSync(config.chdbPath, { recursive: true });
  const clickhouse = createClickHouse(config);
  const client = clickhouse.client;
  await migrateClickHouse(client, config.database, config.cluster);
  return {
    store: new ClickHouseUsageStore(clickhouse, config.database, config.cluster !== undefined),
    analytics: new ClickHouseUsageAnalytics(clickhouse, config.database),
    client,
    close: () => client.close(),
  };
}

/** The ingest consumer: bus → batches → ClickHouse, acknowledging only written batches. */
export async function startIngestConsumer(options: {
  subscription: UsageSubscription;
  store: ClickHouseUsageStore;
  logger: Logger;
}): Promise<{ close(): Promise<void> }> {
  const { subscription, store, logger } = options;
  await subscription.start(async (records, dedupeToken) => {
    await store.insert(records, dedupeToken);
    logger.debug({ records: records.length }, 'usage batch written');
  });
  return { close: () => subscription.stop() };
}
