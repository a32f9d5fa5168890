import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, readEnv } from '@mcp-meter/contracts/kit';
import { type BusConfig, readBusConfig } from '@mcp-meter/contracts/usage';
import { callRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pollUntil } from '../../test/helpers/poll';
import type { UsagePublisher } from '../src/bus';
import { BatchingUsageEmitter } from '../src/emitter';
import { allTopics, Kafka, toMessages } from '../src/kafka-bus';
import { ThreadedKafkaPublisher } from '../src/producer-thread';
import { openUsageBus, type UsageBus } from '../src/service';

/** The Kafka producer in a worker thread, on the real broker started for the test run. */
const logger = createLogger({ level: 'silent', name: 'producer-thread-test' });
let config: BusConfig;
let bus: UsageBus;

const meter = (environment: 'sandbox' | 'live') => ({
  providerId: 'prv_thread',
  environment,
  meterRef: 'requests',
  meterName: 'requests',
});
const call = (customer: string, environment: 'sandbox' | 'live' = 'sandbox'): UsageRecord =>
  callRecord(meter(environment), customer, new Date().toISOString(), {
    // What a tool name may hold: every decoder must read the same text the proxy judged.
    tool: 'add 😀 "quoted" \u0000 \u2028',
    outcome: 'success',
    server: 'srv_1',
    latencyMs: 1.5,
    productId: 'prd_1',
    admitted: true,
  });

interface Message {
  topic: string;
  key: string;
  value: string;
}

/** The messages on the namespace's topics, as topic, key and text, read from the start until `done`. */
async function messagesOn(namespace: string, done: (seen: Message[]) => boolean) {
  const kafka = new Kafka({ brokers: config.kafkaBrokers, logLevel: 0 });
  const consumer = kafka.consumer({ groupId: `${namespace}-reader-${Date.now()}` });
  const seen: Message[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: allTopics(namespace), fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ topic, message }) => {
        seen.push({
          topic,
          key: message.key?.toString('utf8') ?? '',
          value: message.value?.toString('utf8') ?? '',
        });
      },
    });
    await pollUntil(
      () => Promise.resolve(seen),
      (list) => done(list),
      { what: `the messages on ${namespace}`, timeoutMs: 60_000 },
    );
  } finally {
    await consumer.disconnect();
  }
  return seen;
}

/** The record ids a list of messages carries, one per record, bulk messages opened. */
const recordIds = (messages: { value: string }[]): string[] =>
  messages.flatMap(({ value }) => {
    const parsed = JSON.parse(value) as { id: string } | { events: { id: string }[] };
    return 'events' in parsed ? parsed.events.map((e) => e.id) : [parsed.id];
  });

const openBus = async (namespace: string) => {
  const env = readEnv({ KAFKA_BROKERS: inject('infra').kafkaBrokers, BUS_NAMESPACE: namespace });
  config = env.done(readBusConfig(env));
  return openUsageBus(config, logger);
};

beforeAll(async () => {
  bus = await openBus(`thread${Date.now()}`);
});

afterAll(async () => {
  await bus?.close();
});

describe('the Kafka producer thread', () => {
  it('is what the bus publishes through, and sends the messages the event loop would have made', async () => {
    expect(bus.publisher).toBeInstanceOf(ThreadedKafkaPublisher);
    const records = [
      call('cus_1'),
      call('cus_1'),
      call('cus_1'),
      call('cus_2'),
      call('cus_1', 'live'),
      call('cus_\u0000😀', 'live'),
      call('cus_\u0000😀', 'live'),
    ];
    await bus.publisher.publish(records);
    const expected = toMessages(config.namespace, records).flatMap(({ topic, messages }) =>
      messages.map((m) => ({ topic, key: m.key, value: m.value })),
    );
    const seen = await messagesOn(config.namespace, (list) => list.length >= expected.length);
    const order = (list: Message[]) =>
      [...list].sort((a, b) => `${a.topic}${a.key}${a.value}`.localeCompare(`${b.topic}${b.key}${b.value}`));
    // Byte for byte: the same topics, keys and texts as the producer on the loop writes.
    expect(order(seen)).toEqual(order(expected));
    expect(recordIds(seen).sort()).toEqual(records.map((r) => r.id).sort());
  });

  it('fails the publishes a crashed thread held, and the next publish starts a new thread', async () => {
    const publisher = bus.publisher as ThreadedKafkaPublisher;
    await publisher.publish([call('cus_3')]);
    const first = publisher.threadId;
    expect(first).toBeDefined();
    // Handed to the thread as it stops: the thread can no longer answer it, whatever the brokers
    // do. (Handed over just before the stop instead, the brokers may answer first on a busy
    // machine, and then it is published: either is right, so that order proves nothing.)
    const crashed = publisher.crashThread();
    const held = publisher.publish([call('cus_3')]);
    await crashed;
    await expect(held).rejects.toThrow(/stopped before the brokers answered/);
    expect(publisher.threadId).toBeUndefined();
    await publisher.publish([call('cus_3')]);
    expect(publisher.threadId).toBeDefined();
    expect(publisher.threadId).not.toBe(first);
  });

  it('loses no record of an emitter whose producer thread crashes under it', async () => {
    const namespace = `threadcrash${Date.now()}`;
    const crashing = await openBus(namespace);
    const publisher = crashing.publisher as ThreadedKafkaPublisher;
    // Every third publish, the thread dies right after it was handed the records: in flight.
    let publishes = 0;
    const crashingPublisher: UsagePublisher = {
      sendsRecordJson: true,
      publish(records) {
        const sent = publisher.publish(records);
        if (++publishes % 3 === 1) void publisher.crashThread();
        return sent;
      },
      close: () => publisher.close(),
    };
    const emitter = new BatchingUsageEmitter(crashingPublisher, {
      maxBatch: 50,
      lingerMs: 5,
      maxQueued: 100_000,
      retryDelayMs: 20,
      spillDir: mkdtempSync(join(tmpdir(), 'thread-spool-')),
      writeAhead: true,
      logger,
    });
    const records = Array.from({ length: 600 }, (_, i) => call(`cus_${i % 9}`));
    try {
      for (let i = 0; i < records.length; i += 100) {
        for (const record of records.slice(i, i + 100)) emitter.emit(record);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await emitter.flush();
      await pollUntil(
        () => Promise.resolve(emitter.stats()),
        (s) => s.published === records.length,
        { what: 'every record published', timeoutMs: 60_000 },
      );
      expect(emitter.stats()).toMatchObject({ emitted: 600, published: 600, dropped: 0 });
      // Publishes did fail with their thread, and were retried.
      expect(emitter.stats().retried).toBeGreaterThan(0);
      // A publish the thread sent before it died may be on the bus twice: the store counts an id once.
      const onBus = (list: Message[]) => new Set(recordIds(list));
      const seen = onBus(
        await messagesOn(namespace, (list) => {
          const ids = onBus(list);
          return records.every((r) => ids.has(r.id));
        }),
      );
      expect(records.filter((r) => !seen.has(r.id))).toEqual([]);
    } finally {
      await emitter.close();
      await crashing.close();
    }
  });

  it('closes: what it held is answered first, and no publish is taken after', async () => {
    const closing = await openBus(`threadclose${Date.now()}`);
    const publisher = closing.publisher as ThreadedKafkaPublisher;
    const held = publisher.publish([call('cus_4'), call('cus_5')]);
    await closing.close();
    await expect(held).resolves.toBeUndefined();
    expect(publisher.threadId).toBeUndefined();
    await expect(publisher.publish([call('cus_4')])).rejects.toThrow(/closed/);
  });

  it('fails to connect as the producer on the loop would, when no broker answers', async () => {
    const publisher = new ThreadedKafkaPublisher({
      brokers: ['127.0.0.1:1'],
      clientId: 'unreachable',
      namespace: 'unreachable',
      logger,
    });
    await expect(publisher.connect()).rejects.toThrow();
    expect(publisher.threadId).toBeUndefined();
    await publisher.close();
  }, 120_000);
});
