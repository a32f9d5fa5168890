import type { Environment, UsageRecord } from './record';

/** Producer side of the usage bus. */
export interface UsagePublisher {
  /** Resolves only once the bus has durably accepted every record (Kafka: acks from all ISRs). */
  publish(records: readonly UsageRecord[]): Promise<void>;
  close(): Promise<void>;
}

/** Writes a batch durably; the bus acknowledges the batch only after this resolves. */
export type UsageBatchHandler = (records: UsageRecord[]) => Promise<void>;

/** Consumer side of the usage bus. */
export interface UsageSubscription {
  start(handler: UsageBatchHandler): Promise<void>;
  /** Stops after the batch in hand is written and acknowledged. */
  stop(): Promise<void>;
}

/** Topic names follow the spec's subjects, `{bus namespace}.meter.record`, one namespace per environment. */
export function recordTopic(namespace: string, environment: Environment): string {
  return `${namespace}.${environment}.meter.record`;
}
