import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import { readBusConfig } from '@mcp-meter/contracts/usage';
import { openUsageBus, recordTopic, type UsageBus } from '@mcp-meter/ingest';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { toMessages } from '../../ingest/src/kafka-bus';
import { suffix } from '../helpers/flows';
import { pollUntil } from '../helpers/poll';
import { SERVE, type Service, spawnService, waitHealthy } from '../helpers/processes';
import { usageRecord } from '../helpers/usage-records';

/**
 * Ingest run alone (SERVICES=ingest, as the Compose file and the Helm chart run it) on the run's
 * Kafka, with INGEST_METRICS_PORT: it answers /healthz and, behind METRICS_TOKEN, /metrics with
 * what its consumer stored. Records are published by the test on the stack's own topics.
 */
describe('ingest alone: its health and metrics over HTTP', () => {
  const infra = inject('infra');
  const token = `metrics-${suffix()}`;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let service: Service;
  let url: string;
  let bus: UsageBus;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-ingest-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    env = {
      ...process.env,
      LOG_LEVEL: 'warn',
      SERVICES: 'ingest',
      DATA_DIR: join(dir, 'data'),
      KAFKA_BROKERS: infra.kafkaBrokers,
      BUS_NAMESPACE: `ingest${suffix()}`,
      INGEST_FLUSH_INTERVAL_MS: '100',
      INGEST_METRICS_PORT: String(port),
      METRICS_TOKEN: token,
    };
    service = spawnService(process.execPath, SERVE, {
      env,
      logDir: dir,
      name: 'ingest',
    });
    await waitHealthy(url, service);
    const reader = readEnv(env);
    bus = await openUsageBus(
      reader.done({ bus: readBusConfig(reader) }).bus,
      createLogger({ level: 'silent', name: 'ingest-test' }),
    );
  });

  afterAll(async () => {
    await bus?.close();
    await service?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const scrape = async () => {
    const answer = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(answer.status).toBe(200);
    return answer.text();
  };
  const stored = (page: string) =>
    Number(/^mcpmeter_ingest_records_stored_total (\d+)$/m.exec(page)?.[1] ?? Number.NaN);
  const read = (page: string) =>
    Number(/^mcpmeter_ingest_kafka_messages_read_total (\d+)$/m.exec(page)?.[1] ?? Number.NaN);

  it('answers /healthz with its consumer state, and refuses what it does not serve', async () => {
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({
      status: 'ok',
      ingest: expect.stringMatching(/starting|running/),
    });
    const other = await fetch(`${url}/v1/sdk/limits`);
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ status: 404, code: 'route_not_found' });
    const posted = await fetch(`${url}/metrics`, { method: 'POST', body: '{}' });
    expect(posted.status).toBe(405);
    expect(await posted.json()).toMatchObject({ code: 'method_not_allowed' });
  });

  it('serves its metrics only with the token', async () => {
    for (const authorization of [undefined, 'Bearer wrong', token]) {
      const refused = await fetch(`${url}/metrics`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer /);
      expect(await refused.json()).toMatchObject({ status: 401, code: 'unauthorized' });
    }
    const page = await scrape();
    expect(page).toMatch(/^# TYPE mcpmeter_ingest_batch_seconds histogram$/m);
    expect(page).toMatch(/^mcpmeter_ingest_event_loop_delay_seconds\{quantile="0.99"\} /m);
    expect(page).toMatch(/^mcpmeter_ingest_gc_pauses_total/m);
  });

  it('counts the records its consumer stored in ClickHouse, and the messages it could not read', async () => {
    const first = await scrape();
    const before = stored(first);
    // Before its consumer has joined, the page has no Kafka families yet: nothing read.
    const readBefore = Number.isNaN(read(first)) ? 0 : read(first);
    const records = Array.from({ length: 25 }, (_, i) => usageRecord({ customerRef: `cus_${i % 5}` }));
    // A foreign message on the record topic: skipped, logged and counted, never stored.
    const kafka = new Kafka({
      clientId: 'ingest-alone-test',
      brokers: [infra.kafkaBrokers],
      logLevel: logLevel.NOTHING,
    });
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic: recordTopic(String(env.BUS_NAMESPACE), 'sandbox'),
      messages: [{ value: 'not a record' }],
    });
    await producer.disconnect();
    await bus.publisher.publish(records);
    const malformed = (text: string) =>
      Number(/^mcpmeter_ingest_malformed_messages_total (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
    const page = await pollUntil(scrape, (text) => stored(text) >= before + 25 && malformed(text) >= 1, {
      what: 'the published records stored and the foreign message counted',
    });
    expect(stored(page) - before).toBe(25);
    expect(Number(/^mcpmeter_ingest_batch_failures_total (\d+)$/m.exec(page)?.[1])).toBe(0);
    // Every message fetched and written: nothing behind on Kafka or in memory.
    expect(malformed(page)).toBe(1);
    expect(Number(/^mcpmeter_ingest_kafka_lag_messages (\d+)$/m.exec(page)?.[1])).toBe(0);
    // Every message fetched counted once: the publisher's messages for the records, and the foreign one.
    const published = toMessages(String(env.BUS_NAMESPACE), records).reduce(
      (n, t) => n + t.messages.length,
      0,
    );
    expect(published).toBeGreaterThan(1);
    expect(read(page) - readBefore).toBe(published + 1);
    expect(Number(/^mcpmeter_ingest_records_unwritten (\d+)$/m.exec(page)?.[1])).toBe(0);
    expect(Number(/^mcpmeter_ingest_last_stored_timestamp_seconds (\S+)$/m.exec(page)?.[1])).toBeGreaterThan(
      Date.now() / 1000 - 60,
    );
    expect(await (await fetch(`${url}/healthz`)).json()).toMatchObject({ ingest: 'running' });
    // Kafka's view of the whole group, read in the background of scrapes: nothing uncommitted.
    const groupLag = (text: string) =>
      Number(/^mcpmeter_ingest_kafka_group_lag_messages (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
    const settled = await pollUntil(scrape, (text) => groupLag(text) === 0, {
      what: "the group's lag from Kafka read as 0",
      timeoutMs: 60_000,
    });
    expect(settled).toMatch(/^# TYPE mcpmeter_ingest_kafka_group_lag_messages gauge$/m);
  });
});
