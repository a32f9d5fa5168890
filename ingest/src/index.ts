/**
 * The ingest service: the usage bus (Kafka or in-process), the consumer that batches records into
 * ClickHouse, and the ClickHouse usage store. What other services share of usage (the record, the
 * reader and publisher interfaces, the settings) lives in `@mcp-meter/contracts`.
 */

export { UsageRollups } from './analytics/rollups';
export { CrossPartitionBatcher } from './batcher';
export type { UsageBatchHandler, UsageSubscription } from './bus';
export { recordTopic } from './bus';
export {
  type ClickHouse,
  type ClickHouseClient,
  createClickHouse,
  migrateClickHouse,
} from './clickhouse/client';
export { BatchingUsageEmitter, type EmitterStats, type UsageEmitter } from './emitter';
export { InProcessUsageBus } from './in-process-bus';
export { IngestMetrics } from './ingest-metrics';
export { KafkaUsageSettlement } from './kafka-settlement';
export {
  openUsageBus,
  openUsageStore,
  startIngestConsumer,
  type UsageBus,
  type UsageStoreHandle,
} from './service';
export { ClickHouseUsageStore } from './usage-store';
