import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import type { Environment, UsageRecord } from '@mcp-meter/contracts/usage-record';

export type { UsagePublisher };

/**
 * Writes a batch durably; the bus acknowledges the batch only after this resolves. The token,
 * when given, is the same whenever the same batch is delivered again.
 */
export type UsageBatchHandler = (records: UsageRecord[], dedupeToken?: string) => Promise<void>;

/** How far a consumer is behind, for its metrics page. */
export interface SubscriptionProgress {
  /** Messages no record could be read from, skipped (and logged with their coordinates). */
  malformed: number;
  /**
   * Messages on the bus past this consumer's fetch position, over the partitions it holds, as
   * each partition's latest fetch saw them (Kafka's consumer lag); undefined without Kafka.
   */
  behind: number | undefined;
  /**
   * Messages fetched from the bus so far, unreadable ones included; with `behind`, how long the
   * messages waiting would take at the pace they are read. Undefined without Kafka.
   */
  read: number | undefined;
  /** Records fetched and not yet written to the store. */
  unwritten: number;
}

/** Consumer side of the usage bus. */
export interface UsageSubscription {
  start(handler: UsageBatchHandler): Promise<void>;
  /** Stops after the batch in hand is written and acknowledged. */
  stop(): Promise<void>;
  /** How far behind it is (a consumer that cannot tell has none). */
  progress?(): SubscriptionProgress;
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
