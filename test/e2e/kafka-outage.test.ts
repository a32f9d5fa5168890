import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import { MemoryCounterStore } from '@mcp-meter/contracts/limits';
import { MemorySnapshotStore, mcpServerKey } from '@mcp-meter/contracts/snapshots';
import { readBusConfig } from '@mcp-meter/contracts/usage';
import { openUsageBus, openUsageStore, type UsageBus } from '@mcp-meter/ingest';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { root } from '../helpers/processes';

/**
 * Fault 1 of reliability.md on a broker of its own: Kafka is SIGKILLed while the proxy serves
 * tool calls and restarted seconds later. Calls keep being answered, records wait in memory and
 * in the spill file, and every one of them reaches ClickHouse exactly once.
 */
const logger = createLogger({ level: 'silent', name: 'outage' });
const infra = join(root, 'deploy', 'infra.sh');

describe('Kafka broker killed while the proxy emits', () => {
  let dir: string;
  let kafkaEnv: NodeJS.ProcessEnv;
  let bus: UsageBus;
  let origin: Awaited<ReturnType<typeof startMcpOrigin>>;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-outage-'));
    chmodSync(dir, 0o755);
    kafkaEnv = {
      ...process.env,
      STACK_DIR: join(dir, 'stack'),
      KAFKA_PORT: String(await freePort()),
      KAFKA_CONTROLLER_PORT: String(await freePort()),
    };
    execFileSync('bash', [infra, 'kafka', 'start'], { env: kafkaEnv, stdio: 'inherit', timeout: 120_000 });
    env = {
      OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
      KAFKA_BROKERS: `127.0.0.1:${kafkaEnv.KAFKA_PORT}`,
      BUS_NAMESPACE: 'outage',
      // No control plane here to issue tokens: this test is about the bus, not identity.
      PROXY_REQUIRE_AUTH: 'false',
      PROXY_PORT: '0',
      PROXY_SPILL_DIR: join(dir, 'spill'),
      // A small memory bound so the outage exercises the spill file, not just RAM.
      EMITTER_MAX_QUEUED: '20',
      EMITTER_LINGER_MS: '5',
      INGEST_FLUSH_INTERVAL_MS: '100',
    };
    const reader = readEnv(env);
    const config = reader.done({ bus: readBusConfig(reader), proxy: readProxyConfig(reader) });
    bus = await openUsageBus(config.bus, logger);
    origin = await startMcpOrigin();
    const snapshots = new MemorySnapshotStore();
    await snapshots.set(
      mcpServerKey('outage'),
      JSON.stringify({
        v: 1,
        serverId: 'mcp_outage',
        providerId: 'prv_outage',
        environment: 'sandbox',
        subdomain: 'outage',
        originUrl: origin.url,
        status: 'active',
        productId: null,
        meterRef: 'mtr_outage',
        meterName: 'requests',
      }),
    );
    proxy = await startProxy({
      config: config.proxy,
      snapshots,
      counters: new MemoryCounterStore(),
      publisher: bus.publisher,
      logger,
    });
  });

  afterAll(async () => {
    await proxy?.close();
    await origin?.close();
    await bus?.close().catch(() => undefined);
    execFileSync('bash', [infra, 'kafka', 'stop'], { env: kafkaEnv, stdio: 'inherit' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps answering tool calls and delivers every usage record once the broker is back', async () => {
    const client = new Client({ name: 'outage-client', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${proxy.url}/mcp/outage`)));
    const call = async (i: number) => {
      const started = performance.now();
      const result = await client.callTool({ name: 'add', arguments: { a: i, b: 1 } });
      expect(result.content).toEqual([{ type: 'text', text: String(i + 1) }]);
      return performance.now() - started;
    };

    for (let i = 0; i < 30; i++) await call(i);
    execFileSync('bash', ['-c', `kill -9 "$(cat ${join(dir, 'stack', 'kafka.pid')})"`]);
    const duringOutage: number[] = [];
    for (let i = 0; i < 100; i++) duringOutage.push(await call(i));
    // Liveness, not a benchmark: no call waits on the dead broker (its retries take seconds).
    expect(Math.max(...duringOutage)).toBeLessThan(1500);

    await new Promise((resolve) => setTimeout(resolve, 5000));
    execFileSync('bash', [infra, 'kafka', 'start'], { env: kafkaEnv, stdio: 'inherit', timeout: 120_000 });
    for (let i = 0; i < 20; i++) await call(i);
    await client.close();

    const metrics = async () => {
      const text = await (await fetch(`${proxy.url}/metrics`)).text();
      const value = (name: string) =>
        Number(
          /^mcpmeter_usage_(\S+) (\d+)$/m.test(text)
            ? new RegExp(`^mcpmeter_usage_${name} (\\d+)$`, 'm').exec(text)?.[1]
            : Number.NaN,
        );
      return {
        emitted: value('emitted_total'),
        published: value('published_total'),
        spilled: value('spilled_total'),
        replayed: value('replayed_total'),
        dropped: value('dropped_total'),
        queued: value('emitter_queue_depth'),
      };
    };
    // A bound on the wait, not a timing claim: on a loaded machine the restarted broker's first
    // metadata and the spill replay behind it have taken more than a minute.
    const settled = await pollUntil(metrics, (m) => m.queued === 0 && m.published + m.replayed >= 150, {
      what: 'emitter to drain',
      timeoutMs: 150_000,
    });
    expect(settled).toMatchObject({ emitted: 150, dropped: 0 });
    expect(settled.spilled).toBeGreaterThan(0);
    expect(settled.replayed).toBe(settled.spilled);

    const store = await openUsageStore({
      url: undefined,
      user: undefined,
      password: undefined,
      chdbPath: join(dir, 'ch'),
      database: 'mcpmeter',
    });
    const consumer = bus.subscription();
    await consumer.start((records, token) => store.store.insert(records, token));
    try {
      const total = () =>
        store.store.total({
          providerId: 'prv_outage',
          environment: 'sandbox',
          meterRef: 'mtr_outage',
          from: new Date(0),
          to: new Date(Date.now() + 60_000),
        });
      const seen = await pollUntil(total, (t) => t.records >= 150, {
        what: 'all records in ClickHouse',
        timeoutMs: 60_000,
      });
      expect(seen).toEqual({ total: 150, totalDecimal: '150', records: 150 });
    } finally {
      await consumer.stop();
      await store.close();
    }
    expect(readFileSync(join(dir, 'stack', 'kafka', 'stdout.log'), 'utf8')).not.toContain('FATAL');
  }, 300_000);
});
