/**
 * What a producer of usage records (the proxy) takes from ingest: the batching emitter that
 * spools locally and publishes to the bus, without the consumer, the Kafka client or ClickHouse.
 * The record itself, the publisher interface and the bus settings are in `@mcp-meter/contracts`.
 */

export { BatchingUsageEmitter, type EmitterStats, type UsageEmitter } from './emitter';
export { usageEmitterMetrics } from './emitter-metrics';
