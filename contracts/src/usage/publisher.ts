import type { UsageRecord } from '../usage-record';

/** Producer side of the usage bus. */
export interface UsagePublisher {
  /** Resolves only once the bus has durably accepted every record (Kafka: acks from all ISRs). */
  publish(records: readonly UsageRecord[]): Promise<void>;
  close(): Promise<void>;
}
