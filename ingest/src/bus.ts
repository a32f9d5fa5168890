import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import type { Environment, UsageRecord } from '@mcp-meter/contracts/usage-record';

export type { UsagePublisher };

/**
 * Writes a batch durably; the bus acknowledges the batch only after this resolves. The token,
 * when given, is the same whenever the same batch is delivered again.
 */
export type UsageBatchHandler = (records: UsageRecord[], dedupeToken?: string) => Promise<void>;

/** Consumer side of the usage bus. */
export interface UsageSubscription {
  start(handler: UsageBatchHandler): Promise<void>;
  /** Stops after the batch in hand is written and acknowledged. */
  stop(): Promise<void>;
}

/**
 * Topic names follow the spec's subjects, one bus namespace per environment:
 * `{ns}.{env}.meter.record` carries one record per message, `{ns}.{env}.meter.recordBulk` a
 * message `{ events: [...] }` of one customer's records.
 */
export function recordTopic(namespace: string, environment: Environment): string {
  return `${namespace}.${environment}.meter.record`;
}

export function bulkTopic(namespace: string, environment: Environment): string {
  return `${namespace}.${environment}.meter.recordBulk`;
}
