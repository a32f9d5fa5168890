/**
 * What a producer of usage records needs (the proxy): the record contract, the bus settings and
 * the batching emitter, without the consumer, the Kafka client or ClickHouse.
 */

export {
  type CallFacts,
  callRecord,
  type Environment,
  type UsageRecord,
} from '@mcp-meter/contracts/usage-record';
export type { UsagePublisher } from './bus';
export { type BusConfig, readBusConfig, readDataDir } from './config';
export { BatchingUsageEmitter, type EmitterStats, type UsageEmitter } from './emitter';
