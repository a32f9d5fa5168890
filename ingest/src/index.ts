export {
  buildUsageRecord,
  type CallFacts,
  callRecord,
  ENVIRONMENTS,
  type Environment,
  type FieldError,
  USAGE_LIMITS,
  type UsageInput,
  type UsageRecord,
} from '@mcp-meter/contracts/usage-record';
export { CrossPartitionBatcher } from './batcher';
export type { UsageBatchHandler, UsagePublisher, UsageSubscription } from './bus';
export { recordTopic } from './bus';
export { type ClickHouseClient, createClickHouse, migrateClickHouse } from './clickhouse/client';
export {
  type BusConfig,
  type ClickHouseConfig,
  readBusConfig,
  readClickHouseConfig,
  readDataDir,
} from './config';
export { BatchingUsageEmitter, type EmitterStats, type UsageEmitter } from './emitter';
export { InProcessUsageBus } from './in-process-bus';
export {
  openUsageBus,
  openUsageStore,
  startIngestConsumer,
  type UsageBus,
  type UsageStoreHandle,
} from './service';
export type { UsageReader, UsageTotal, UsageTotalQuery } from './usage-store';
export {
  AGGREGATIONS,
  type Aggregation,
  bucketStarts,
  ClickHouseUsageStore,
  type CustomerUsage,
  countBuckets,
  type DailyStats,
  GRANULARITIES,
  type Granularity,
  type MeterAggregation,
  type UsageBucket,
  usageSince,
} from './usage-store';
