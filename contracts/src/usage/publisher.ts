import type { LeaseCharge, LeaseWatcher } from '../limits';
import type { UsageRecord } from '../usage-record';

/** Producer side of the usage bus. */
export interface UsagePublisher {
  /** Resolves only once the bus has durably accepted every record (Kafka: acks from all ISRs). */
  publish(records: readonly UsageRecord[]): Promise<void>;
  close(): Promise<void>;
  /**
   * A bus that writes a publish of this many records at once and a smaller one only after a
   * linger (the in-process bus): a publisher that waits for each publish before the next keeps
   * up only by publishing batches at least this large, so the emitter does. Absent for Kafka.
   */
  readonly wholeBatch?: number;
  /**
   * The bus sends each record as its JSON text (Kafka): the emitter keeps the text it made for
   * its spool on the record, so the text is made once. A bus that does not (the in-process one
   * writes rows from the record's fields) leaves it out, and the text is garbage once spooled
   * instead of living on, through every young-generation collection, until the record is stored.
   */
  readonly sendsRecordJson?: boolean;
  /**
   * True once this process can never reach the bus again (a proxy worker whose supervisor, which
   * held the bus, is gone): what is left goes to disk for the next run at once, without retrying.
   */
  readonly unreachable?: boolean;
}

/**
 * Records written ahead to a local spool and published in batches off the request path (the
 * emitter the proxy meters with). A caller that must not answer before its record is safe awaits
 * `spooled()`; the bus gets the record shortly after, and a crash in between loses nothing: the
 * next start replays the spool. As a lease watcher it names each limit lease in the spool as it
 * opens, so a crash never strands a leased unit.
 */
export interface UsageRecorder extends LeaseWatcher {
  /** `charges`: what the call spent of which of this process's limit leases. */
  emit(record: UsageRecord, charges?: readonly LeaseCharge[]): void;
  /** Resolves once every record emitted so far is in the spool; undefined when nothing waits. */
  spooled(): Promise<void> | undefined;
  /** What the records a dead predecessor left in the spool spent of its leases (settled at start). */
  readonly inheritedCharges: readonly LeaseCharge[];
}
