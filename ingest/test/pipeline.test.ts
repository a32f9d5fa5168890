import { createLogger, readEnv } from '@mcp-meter/contracts/kit';
import { type BusConfig, readBusConfig } from '@mcp-meter/contracts/usage';
import { buildUsageRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pollUntil } from '../../test/helpers/poll';
import { openTestUsageStore } from '../../test/helpers/usage-store';
import { allTopics, Kafka, toMessages } from '../src/kafka-bus';
import { openUsageBus, startIngestConsumer, type UsageBus } from '../src/service';

/** Kafka → ingest consumer → ClickHouse (chdb), on the real broker started for the test run. */
const logger = createLogger({ level: 'silent', name: 'pipeline-test' });
let bus: UsageBus;
let config: BusConfig;
let store: Awaited<ReturnType<typeof openTestUsageStore>>;

const providerId = `prv_pipeline_${Date.now()}`;
const record = (
  environment: 'sandbox' | 'live',
  customerRef: string,
  value: number,
  id?: string,
): UsageRecord => {
  const built = buildUsageRecord(
    { customerRef, value, id },
    { providerId, environment, meterRef: 'mtr_pipe', meterName: 'requests', now: new Date() },
  );
  if (built.record === undefined) throw new Error(JSON.stringify(built.errors));
  return built.record;
};
const total = (environment: 'sandbox' | 'live', customerRef?: string) =>
  store.store.total({
    providerId,
    environment,
    meterRef: 'mtr_pipe',
    customerRef,
    from: new Date(0),
    to: new Date(Date.now() + 60_000),
  });

/** Every partition's committed position is its end: a new member would replay nothing. */
const expectAllCommitted = async () => {
  const admin = new Kafka({ brokers: config.kafkaBrokers, logLevel: 0 }).admin();
  await admin.connect();
  try {
    const topics = allTopics(config.namespace);
    const committed = await admin.fetchOffsets({ groupId: config.kafkaConsumerGroup, topics });
    const positions = [];
    for (const topic of topics) {
      const done = committed.find((c) => c.topic === topic)?.partitions ?? [];
      for (const end of await admin.fetchTopicOffsets(topic)) {
        const at = done.find((p) => p.partition === end.partition)?.offset ?? '-1';
        // A partition never written to has no commit (-1) and nothing to replay.
        positions.push({
          topic,
          partition: end.partition,
          committed: end.high === '0' ? '0' : at,
          end: end.high,
        });
      }
    }
    expect(positions.filter((p) => p.committed !== p.end)).toEqual([]);
  } finally {
    await admin.disconnect();
  }
};

beforeAll(async () => {
  const env = readEnv({
    KAFKA_BROKERS: inject('infra').kafkaBrokers,
    BUS_NAMESPACE: `pipe${Date.now()}`,
    INGEST_FLUSH_INTERVAL_MS: '100',
    INGEST_RETRY_DELAY_MS: '50',
  });
  config = env.done(readBusConfig(env));
  bus = await openUsageBus(config, logger);
  store = await openTestUsageStore('pipe');
});

afterAll(async () => {
  await bus?.close();
  await store?.close();
});

describe('usage pipeline on real Kafka and ClickHouse', () => {
  it('counts every record exactly once: duplicates collapse, sandbox and live never meet, and a clean stop commits all', async () => {
    const consumer = await startIngestConsumer({
      subscription: bus.subscription(),
      store: store.store,
      rollups: store.rollups,
      logger,
    });
    try {
      const sandbox = Array.from({ length: 300 }, (_, i) => record('sandbox', `c${i % 7}`, (i % 5) + 0.25));
      const live = Array.from({ length: 40 }, () => record('live', 'c0', 3));
      // Every sandbox record published twice, interleaved with live traffic.
      await Promise.all([
        bus.publisher.publish(sandbox),
        bus.publisher.publish(live),
        bus.publisher.publish(sandbox.slice().reverse()),
      ]);
      const expected = sandbox.reduce((sum, r) => sum + r.value, 0);
      const seen = await pollUntil(
        () => total('sandbox'),
        (t) => t.total >= expected,
        { what: 'sandbox total', timeoutMs: 60_000 },
      );
      expect(seen).toEqual({ total: expected, totalDecimal: String(expected), records: 300 });
      expect(await total('live')).toEqual({ total: 120, totalDecimal: '120', records: 40 });
      expect(await total('live', 'c1')).toEqual({ total: 0, totalDecimal: '0', records: 0 });
      // Each stored batch marked the analytics slots it touched, in its own environment.
      for (const [environment, records] of [
        ['sandbox', sandbox],
        ['live', live],
      ] as const) {
        const slots = [...new Set(records.map((r) => Math.floor(Date.parse(r.timestamp) / 900_000) * 900))];
        const result = await store.client.query({
          query: `SELECT DISTINCT toUnixTimestamp(slot) AS slot FROM mcpmeter.usage_slot_marks_${environment} ORDER BY slot`,
          format: 'JSONEachRow',
        });
        expect((await result.json<{ slot: number }>()).map((r) => Number(r.slot))).toEqual(slots.sort());
      }
    } finally {
      await consumer.close();
    }
    // A clean stop commits what it wrote, so the next member does not replay it.
    await expectAllCommitted();
  });

  it('a batch whose offsets were not committed after its insert is replayed and still counts once', async () => {
    // The first write lands in ClickHouse and then fails, as if the process died before committing.
    let failures = 0;
    const flaky = {
      insert: async (records: UsageRecord[]) => {
        await store.store.insert(records);
        if (failures++ === 0) throw new Error('crash after insert, before commit');
      },
    };
    const subscription = bus.subscription();
    await subscription.start((records) => flaky.insert(records));
    try {
      const batch = Array.from({ length: 50 }, () => record('sandbox', 'replay', 2));
      await bus.publisher.publish(batch);
      const seen = await pollUntil(
        () => total('sandbox', 'replay'),
        (t) => t.records >= 50 && failures > 1,
        {
          what: 'replayed batch',
          timeoutMs: 60_000,
        },
      );
      expect(seen).toEqual({ total: 100, totalDecimal: '100', records: 50 });
    } finally {
      await subscription.stop();
    }
  });

  it('records published while no consumer runs arrive once one starts again', async () => {
    const batch = Array.from({ length: 25 }, () => record('sandbox', 'offline', 1));
    await bus.publisher.publish(batch);
    const consumer = await startIngestConsumer({
      subscription: bus.subscription(),
      store: store.store,
      logger,
    });
    try {
      const seen = await pollUntil(
        () => total('sandbox', 'offline'),
        (t) => t.records >= 25,
        { what: 'late records', timeoutMs: 60_000 },
      );
      expect(seen).toEqual({ total: 25, totalDecimal: '25', records: 25 });
    } finally {
      await consumer.close();
    }
  });

  it('the settlement says true only once the consumer group has stored everything published before the call', async () => {
    const batch = Array.from({ length: 20 }, () => record('sandbox', 'watermark', 1));
    const late = Array.from({ length: 5 }, () => record('live', 'watermark', 1));
    const lagBefore = await bus.groupLag?.();
    await bus.publisher.publish(batch);
    await bus.publisher.publish(late);
    // No consumer runs: the records sit in Kafka, so billing must not close a period yet.
    expect(await bus.settlement.settled(1_500)).toBe(false);
    // Kafka's own lag for the group counts every message published and not committed.
    const messages = [...toMessages(config.namespace, batch), ...toMessages(config.namespace, late)].reduce(
      (n, topic) => n + topic.messages.length,
      0,
    );
    expect(messages).toBeGreaterThan(1);
    expect(await bus.groupLag?.()).toBe((lagBefore ?? Number.NaN) + messages);
    expect(await total('sandbox', 'watermark')).toEqual({ total: 0, totalDecimal: '0', records: 0 });
    const consumer = await startIngestConsumer({
      subscription: bus.subscription(),
      store: store.store,
      logger,
    });
    try {
      expect(await bus.settlement.settled(60_000)).toBe(true);
      // Read at once, without polling: settled means stored.
      expect(await total('sandbox', 'watermark')).toEqual({ total: 20, totalDecimal: '20', records: 20 });
      expect(await total('live', 'watermark')).toEqual({ total: 5, totalDecimal: '5', records: 5 });
      // Nothing new since: settled at once.
      expect(await bus.settlement.settled(1)).toBe(true);
      expect(await bus.groupLag?.()).toBe(0);
    } finally {
      await consumer.close();
    }
  });
});
