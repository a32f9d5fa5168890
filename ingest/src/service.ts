import { mkdirSync } from 'node:fs';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { BusConfig, ClickHouseConfig, UsageSettlement } from '@mcp-meter/contracts/usage';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { UsageRollups } from './analytics/rollups';
import type { UsagePublisher, UsageSubscription } from './bus';
import {
  type ClickHouse,
  type ClickHouseClient,
  createClickHouse,
  migrateClickHouse,
} from './clickhouse/client';
import { InProcessUsageBus } from './in-process-bus';
import type { IngestMetrics } from './ingest-metrics';
import {
  ensureUsageTopics,
  KafkaUsagePublisher,
  KafkaUsageSubscription,
  kafkaClient,
  kafkaLogging,
} from './kafka-bus';
import { KafkaUsageSettlement } from './kafka-settlement';
import { ThreadedKafkaPublisher } from './producer-thread';
import { ClickHouseUsageAnalytics } from './usage-analytics';
import { ClickHouseUsageStore, type UsageWriter } from './usage-store';

export interface UsageBus {
  publisher: UsagePublisher;
  /** A consumer-group member (Kafka) or the shared in-process queue. */
  subscription(): UsageSubscription;
  /** Whether what the bus accepted so far is stored: billing waits for it before closing a period. */
  settlement: UsageSettlement;
  /** The consumer group's lag from Kafka's committed offsets (Kafka only): see KafkaUsageSettlement. */
  groupLag?: () => Promise<number>;
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
  const kafka = kafkaClient(config.kafkaBrokers, config.kafkaClientId, kafkaLogging(logger));
  await ensureUsageTopics(kafka, config.namespace, config.kafkaTopicPartitions);
  const publisher = config.kafkaProducerThread
    ? new ThreadedKafkaPublisher({
        brokers: config.kafkaBrokers,
        clientId: config.kafkaClientId,
        namespace: config.namespace,
        logger,
      })
    : new KafkaUsagePublisher(kafka, config.namespace);
  await publisher.connect();
  const settlement = new KafkaUsageSettlement(kafka, config.namespace, config.kafkaConsumerGroup);
  return {
    settlement,
    groupLag: () => settlement.groupLag(),
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
  /** The analytics rollups (docs/analytics.md); absent on a cluster, where analytics read raw. */
  rollups: UsageRollups | undefined;
  client: ClickHouseClient;
  /** The store's connection, for another reader or writer of the same tables. */
  clickhouse: ClickHouse;
  close(): Promise<void>;
}

export async function openUsageStore(
  config: Omit<ClickHouseConfig, 'rollupIntervalMs'>,
): Promise<UsageStoreHandle> {
  if (config.url === undefined) mkdirSync(config.chdbPath, { recursive: true });
  const clickhouse = createClickHouse(config);
  const client = clickhouse.client;
  await migrateClickHouse(client, config.database, config.cluster);
  const rollups = config.cluster === undefined ? new UsageRollups(clickhouse, config.database) : undefined;
  return {
    store: new ClickHouseUsageStore(clickhouse, config.database, config.cluster !== undefined),
    analytics: new ClickHouseUsageAnalytics(clickhouse, config.database, rollups),
    rollups,
    client,
    clickhouse,
    close: () => client.close(),
  };
}

/**
 * What the consumer does with one batch: the slots its resent records leave are marked, the
 * records stored, then the slots they fall in marked (docs/analytics.md, rollups).
 */
export async function storeUsageBatch(
  store: UsageWriter,
  rollups: UsageRollups | undefined,
  records: readonly UsageRecord[],
  dedupeToken?: string,
): Promise<void> {
  await rollups?.markMoves(records);
  await store.insert(records, dedupeToken);
  await rollups?.mark(records);
}

/**
 * The ingest consumer: bus → batches → ClickHouse, acknowledging only written batches. With
 * `rollups`, each batch's slots are marked once its records are stored and before it is
 * acknowledged (a crash between the two replays the batch, so no stored record goes unmarked),
 * and before it is stored, the slots its resent records leave (docs/analytics.md).
 */
export async function startIngestConsumer(options: {
  subscription: UsageSubscription;
  store: ClickHouseUsageStore;
  rollups?: UsageRollups | undefined;
  logger: Logger;
  /** Counts what is stored, for the process's metrics page. */
  metrics?: IngestMetrics | undefined;
}): Promise<{ close(): Promise<void> }> {
  const { subscription, store, rollups, logger, metrics } = options;
  await subscription.start(async (records, dedupeToken) => {
    const write = () => storeUsageBatch(store, rollups, records, dedupeToken);
    await (metrics === undefined ? write() : metrics.measure(records.length, write));
    logger.debug({ records: records.length }, 'usage batch written');
  });
  return { close: () => subscription.stop() };
}
