import type { UsageSettlement } from '@mcp-meter/contracts/usage';
import type { Admin, Kafka } from 'kafkajs';
import { allTopics } from './kafka-bus';

/**
 * The ingest watermark read from Kafka itself: the end offset of every usage partition, taken
 * now, against the offsets the ingest consumer group has committed. The group commits a
 * partition's offset only after the ClickHouse write that holds its records (see the batcher),
 * so once every committed offset has reached the end offsets taken at the call, every record
 * that was in Kafka at the call is stored, whichever replica wrote it. Idle partitions pass at
 * once; unreadable messages are skipped and committed by the consumer, so they never hold it.
 */
export class KafkaUsageSettlement implements UsageSettlement {
  /** One admin connection, shared by concurrent callers (counter seeds come several at once). */
  private admin: Promise<Admin> | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly namespace: string,
    private readonly groupId: string,
    private readonly pollMs = 200,
  ) {}

  async settled(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    try {
      const admin = await this.connected();
      const topics = allTopics(this.namespace);
      // An empty partition (or one emptied by retention) holds nothing to wait for.
      const ends = (await partitionsOf(admin, topics)).filter((p) => p.high > p.low);
      for (;;) {
        const committed = await this.committedOf(admin, topics);
        const behind = ends.filter((p) => (committed(p) ?? -1n) < p.high);
        if (behind.length === 0) return true;
        if (Date.now() + this.pollMs > deadline) return false;
        await new Promise((resolve) => setTimeout(resolve, this.pollMs));
      }
    } catch {
      // An unreachable broker settles nothing; the caller tries again on its next pass.
      await this.close();
      return false;
    }
  }

  /**
   * Messages in Kafka the consumer group has not yet committed, over every usage partition:
   * Kafka's own consumer lag for the whole group, read from its committed offsets, so a member
   * that stopped fetching (stuck, or gone with its partitions not yet reassigned) shows here,
   * where its own lag gauge keeps its last reading. A partition the group never committed counts
   * from its earliest message, where the group starts. Throws when Kafka does not answer.
   */
  async groupLag(): Promise<number> {
    try {
      const admin = await this.connected();
      const topics = allTopics(this.namespace);
      const committed = await this.committedOf(admin, topics);
      let lag = 0n;
      for (const p of await partitionsOf(admin, topics)) {
        const at = committed(p) ?? p.low;
        const from = at < p.low ? p.low : at;
        if (p.high > from) lag += p.high - from;
      }
      return Number(lag);
    } catch (error) {
      // As in settled: the next reading starts from a new connection.
      await this.close();
      throw error;
    }
  }

  /** The group's committed offsets now, as a lookup by partition (undefined: never committed). */
  private async committedOf(admin: Admin, topics: string[]): Promise<(p: Partition) => bigint | undefined> {
    const committed = await admin.fetchOffsets({ groupId: this.groupId, topics });
    return (p) => {
      const offset = committed
        .find((t) => t.topic === p.topic)
        ?.partitions.find((c) => c.partition === p.partition)?.offset;
      // kafkajs gives '-1' for a partition the group has no offset for.
      return offset === undefined || offset === '-1' ? undefined : BigInt(offset);
    };
  }

  private connected(): Promise<Admin> {
    this.admin ??= (async () => {
      const admin = this.kafka.admin();
      try {
        await admin.connect();
      } catch (error) {
        this.admin = undefined;
        throw error;
      }
      return admin;
    })();
    return this.admin;
  }

  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    await (await admin?.catch(() => undefined))?.disconnect().catch(() => undefined);
  }
}

/** A usage partition with its earliest and next offsets (`low`, `high`). */
interface Partition {
  topic: string;
  partition: number;
  low: bigint;
  high: bigint;
}

async function partitionsOf(admin: Admin, topics: string[]): Promise<Partition[]> {
  const all: Partition[] = [];
  for (const topic of topics)
    for (const p of await admin.fetchTopicOffsets(topic))
      all.push({ topic, partition: p.partition, low: BigInt(p.low), high: BigInt(p.high) });
  return all;
}
