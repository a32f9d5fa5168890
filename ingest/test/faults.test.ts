import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createLogger, readEnv } from '@mcp-meter/contracts/kit';
import { readBusConfig } from '@mcp-meter/contracts/usage';
import { buildUsageRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pollUntil } from '../../test/helpers/poll';
import { Kafka } from '../src/kafka-bus';
import { openUsageBus, openUsageStore, type UsageStoreHandle } from '../src/service';

/** Faults 2, 4 and 6 of reliability.md on the real Kafka broker and real ClickHouse (chdb). */
const logger = createLogger({ level: 'silent', name: 'faults' });
const brokers = () => inject('infra').kafkaBrokers;
const busEnv = (namespace: string) => ({
  KAFKA_BROKERS: brokers(),
  BUS_NAMESPACE: namespace,
  INGEST_FLUSH_INTERVAL_MS: '100',
  INGEST_BATCH_SIZE: '200',
  INGEST_RETRY_DELAY_MS: '50',
  // The broker's minimum: the killed consumer's partitions move to the next one sooner.
  KAFKA_SESSION_TIMEOUT_MS: '6000',
});
const openBus = (namespace: string) => {
  const env = readEnv(busEnv(namespace));
  return openUsageBus(env.done(readBusConfig(env)), logger);
};
const makeRecord = (customerRef: string, value: number, id?: string): UsageRecord => {
  const built = buildUsageRecord(
    { customerRef, value, id },
    {
      providerId: 'prv_faults',
      environment: 'sandbox',
      meterRef: 'mtr_f',
      meterName: 'requests',
      now: new Date(),
    },
  );
  if (built.record === undefined) throw new Error('bad record');
  return built.record;
};

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcpmeter-faults-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runConsumer(
  env: Record<string, string>,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/consumer-process.ts')],
      {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.on('exit', (code, signal) => resolvePromise({ code, signal, stdout }));
  });
}

describe('usage pipeline under faults', () => {
  it('a consumer killed between the ClickHouse insert and the offset commit loses and doubles nothing', async () => {
    const namespace = `crash${Date.now()}`;
    const bus = await openBus(namespace);
    const records = Array.from({ length: 600 }, (_, i) => makeRecord(`c${i % 13}`, (i % 4) + 1));
    await bus.publisher.publish(records);
    await bus.close();
    const chdb = join(dir, 'crash-ch');
    const env = { ...busEnv(namespace), CHDB_PATH: chdb };

    const crashed = await runConsumer({ ...env, CRASH_AFTER_INSERT: '1' });
    expect(crashed.signal).toBe('SIGKILL');
    const resumed = await runConsumer({ ...env, EXPECT_RECORDS: '600' });
    expect(resumed.code).toBe(0);
    const { final, raw } = JSON.parse(resumed.stdout) as {
      final: { records: number; total: number };
      raw: { records: number };
    };
    expect(final).toEqual({ records: 600, total: records.reduce((s, r) => s + r.value, 0) });
    // The replayed first batch did reach ClickHouse again, or was dropped by its dedupe token;
    // either way the counted total above is exact.
    expect(raw.records).toBeGreaterThanOrEqual(600);
  });

  it('while ClickHouse is down the consumer pauses with offsets uncommitted, then catches up exactly', async () => {
    const namespace = `chdown${Date.now()}`;
    const bus = await openBus(namespace);
    const store: UsageStoreHandle = await openUsageStore({
      url: undefined,
      user: undefined,
      password: undefined,
      chdbPath: join(dir, 'down-ch'),
      database: 'mcpmeter',
    });
    let down = true;
    let failedWrites = 0;
    const subscription = bus.subscription();
    await subscription.start(async (records, token) => {
      if (down) {
        failedWrites++;
        throw new Error('ClickHouse: connection refused');
      }
      await store.store.insert(records, token);
    });
    const admin = new Kafka({ clientId: 'faults-admin', brokers: [brokers()] }).admin();
    await admin.connect();
    try {
      await bus.publisher.publish(Array.from({ length: 300 }, (_, i) => makeRecord(`d${i % 5}`, 2)));
      await pollUntil(
        async () => failedWrites,
        (n) => n >= 3,
        { what: 'failed writes' },
      );
      const offsets = await admin.fetchOffsets({
        groupId: `${namespace}-ingest`,
        topics: [`${namespace}.sandbox.meter.recordBulk`],
      });
      const committed = offsets.flatMap((t) => t.partitions.map((p) => Number(p.offset)));
      expect(committed.every((o) => o <= 0)).toBe(true);

      down = false;
      const total = () =>
        store.store.total({
          providerId: 'prv_faults',
          environment: 'sandbox',
          meterRef: 'mtr_f',
          from: new Date(0),
          to: new Date(Date.now() + 60_000),
        });
      const seen = await pollUntil(total, (t) => t.records >= 300, { what: 'catch-up', timeoutMs: 60_000 });
      expect(seen).toEqual({ total: 600, totalDecimal: '600', records: 300 });
    } finally {
      await admin.disconnect();
      await subscription.stop();
      await bus.close();
      await store.close();
    }
  });

  it('the same record sent 1,000 times concurrently by two producers is counted once', async () => {
    const namespace = `dup${Date.now()}`;
    const [a, b] = [await openBus(namespace), await openBus(namespace)];
    const store = await openUsageStore({
      url: undefined,
      user: undefined,
      password: undefined,
      chdbPath: join(dir, 'dup-ch'),
      database: 'mcpmeter',
    });
    const subscription = a.subscription();
    await subscription.start((records, token) => store.store.insert(records, token));
    try {
      const record = makeRecord('dup', 9, 'same-record-id');
      await Promise.all(
        Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? a : b).publisher.publish([record])),
      );
      const query = {
        providerId: 'prv_faults',
        environment: 'sandbox' as const,
        meterRef: 'mtr_f',
        customerRef: 'dup',
        from: new Date(0),
        to: new Date(Date.now() + 60_000),
      };
      await pollUntil(
        async () => {
          const result = await store.client.query({
            query: "SELECT count() AS n FROM mcpmeter.usage_records_sandbox WHERE customer_ref = 'dup'",
            format: 'JSONEachRow',
          });
          return Number((await result.json<{ n: string }>())[0]?.n);
        },
        (n) => n >= 1,
        { what: 'first copy' },
      );
      // Give every copy time to land, then the counted total is still one record.
      await new Promise((r) => setTimeout(r, 1500));
      expect(await store.store.total(query)).toEqual({ total: 9, totalDecimal: '9', records: 1 });
    } finally {
      await subscription.stop();
      await a.close();
      await b.close();
      await store.close();
    }
  });
});
