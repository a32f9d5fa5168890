import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import { RedisCounterStore } from '@mcp-meter/contracts/limits';
import { JWKS_KEY, mcpServerKey, RedisSnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpOrigin, startMcpOrigin } from '../../test/helpers/mcp-origin';
import { pollUntil } from '../../test/helpers/poll';
import { serverSnapshot } from '../../test/helpers/snapshots';
import { tokenIssuer } from '../../test/helpers/tokens';

const PROVIDER = 'prv_snapshots';

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/**
 * The proxy reads servers, signing keys and purchases from Redis and caches them. Here its
 * Redis (a private redis-server, so the shared one stays up for other tests) is killed and
 * brought back: what was cached keeps serving, what was not gets a retry-shortly answer with the
 * request's id rather than an internal error, and the proxy recovers by itself.
 */
describe('the proxy while its snapshot store is down', () => {
  let dir: string;
  let redisPort: number;
  let redis: ChildProcess | undefined;
  let writer: RedisSnapshotStore;
  let origin: McpOrigin;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  const records: UsageRecord[] = [];
  const issuer = tokenIssuer({ sub: 'cus_known', prv: PROVIDER });

  const startRedis = async () => {
    redis = spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(redisPort), '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' },
    );
    const probe = new Redis(redisPort, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
    probe.on('error', () => undefined);
    await pollUntil(
      () => probe.ping().catch(() => 'down'),
      (reply) => reply === 'PONG',
      { what: 'redis-server up', timeoutMs: 10_000 },
    );
    probe.disconnect();
  };
  const server = (subdomain: string, productId: string | null) =>
    serverSnapshot({
      subdomain,
      providerId: PROVIDER,
      originUrl: origin.url,
      productId,
      ...(productId === null
        ? {}
        : {
            defaultPlanId: 'pln_free',
            defaultPlan: { planId: 'pln_free', limit: 100, billingCycle: 'monthly', intervalDays: null },
          }),
    });
  const publish = async () => {
    await writer.set(JWKS_KEY, JSON.stringify(issuer.jwks));
    for (const [name, productId] of [
      ['open', null],
      ['late', null],
      ['gated', 'prd_gated'],
    ] as const)
      await writer.set(mcpServerKey(name), server(name, productId));
  };
  /** The store fails fast while its connection is not up (offline queue off): retried until it is. */
  const publishWhenUp = () =>
    pollUntil(
      () =>
        publish().then(
          () => 'published',
          () => 'down',
        ),
      (state) => state === 'published',
      { what: 'snapshots published', timeoutMs: 10_000 },
    );
  const call = async (subdomain: string, token: string, id: number | null): Promise<Answer> => {
    const message =
      id === null
        ? { jsonrpc: '2.0', method: 'notifications/initialized' }
        : { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'add', arguments: { a: id, b: 1 } } };
    const response = await fetch(`${proxy.url}/mcp/${subdomain}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify(message),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text === '' ? {} : JSON.parse(text) };
  };
  /** A tools/call answered by the origin itself: stateless, so any proxy call of `add` works. */
  const toolText = (answer: Answer) => {
    const text = JSON.stringify(answer.body);
    const match = /"text":"(\d+)"/.exec(text);
    return match?.[1];
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-snapshot-outage-'));
    redisPort = await freePort();
    await startRedis();
    origin = await startMcpOrigin({ stateless: true });
    writer = RedisSnapshotStore.connect(`redis://127.0.0.1:${redisPort}`);
    await publishWhenUp();
    const url = `redis://127.0.0.1:${redisPort}`;
    proxy = await startProxy({
      config: readProxyConfig(
        readEnv({
          OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
          PROXY_PORT: '0',
          DATA_DIR: dir,
          SECRET_KEY: 'ef'.repeat(32),
          REDIS_URL: url,
          CONTROL_PLANE_URL: `http://127.0.0.1:${await freePort()}`,
          EMITTER_LINGER_MS: '5',
        }),
      ),
      snapshots: RedisSnapshotStore.connect(url),
      counters: new RedisCounterStore(url),
      publisher: { publish: async (batch) => void records.push(...batch), close: async () => {} },
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
  });

  afterAll(async () => {
    await proxy?.close();
    await writer?.close();
    await origin?.close();
    redis?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves what it has cached, answers the rest with retry-shortly errors, and recovers', async () => {
    // Before: the open server and the gated one are looked up, the token's key set is read.
    // The proxy read its store before it took traffic: the very first call is served.
    expect(toolText(await call('open', issuer.token, 1))).toBe('2');
    await call('gated', issuer.token, 2);

    redis?.kill('SIGKILL');
    await new Promise((resolve) => redis?.once('exit', resolve));

    // Cached server, cached token: as before. A new token under the cached key set: verified locally.
    expect(toolText(await call('open', issuer.token, 3))).toBe('4');
    expect(toolText(await call('open', issuer.mint('cus_new'), 4))).toBe('5');

    // A server never looked up: a JSON-RPC error with the call's id, not an internal error.
    const late = await call('late', issuer.token, 5);
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({
      jsonrpc: '2.0',
      id: 5,
      error: { code: -32000, message: expect.stringContaining('try again shortly') },
    });
    // Without an id to answer: 503 with Retry-After.
    const notice = await call('late', issuer.token, null);
    expect(notice.status).toBe(503);
    expect(notice.headers.get('retry-after')).toBe('1');
    expect(notice.body).toMatchObject({ code: 'proxy_unavailable' });

    // A token under a key this proxy has never seen may be good: not refused as invalid.
    const rotated = tokenIssuer({ sub: 'cus_known', prv: PROVIDER });
    const unknownKey = await call('open', rotated.token, 6);
    expect(unknownKey.status).toBe(200);
    expect(unknownKey.body).toMatchObject({ id: 6, error: { code: -32000 } });

    // A customer whose purchase is not cached, on a gated server: which plan applies is unknown.
    const stranger = await call('gated', issuer.mint('cus_stranger'), 7);
    expect(stranger.body).toMatchObject({
      id: 7,
      error: { code: -32000, message: expect.stringContaining('cannot be checked right now') },
    });
    // Three open calls, and the gated one before the outage: its counter could not be seeded (no
    // control plane here), so it ran on the outage grace (PROXY_LIMITS_WHEN_UNAVAILABLE=grace).
    expect(origin.calls.get('add')).toBe(4);

    // Redis comes back (empty: nothing persisted); the control plane publishes again.
    await startRedis();
    await publishWhenUp();
    const recovered = await pollUntil(
      () => call('late', issuer.token, 8),
      (answer) => toolText(answer) === '9',
      { what: 'the proxy reading snapshots again', timeoutMs: 15_000 },
    );
    expect(recovered.status).toBe(200);

    await pollUntil(
      async () => records.length,
      (n) => n >= 6,
      { what: 'usage records', timeoutMs: 5_000 },
    );
    // Calls 1, 3, 4 and 8 ran, and 2 on the outage grace (no seed without the control plane); 7
    // was refused; 5, 6 and the notification had no server or no verified customer to record against.
    expect(records.map((r) => [r.customerRef, r.properties.tool, r.properties.outcome])).toEqual([
      ['cus_known', 'add', 'success'],
      ['cus_known', 'add', 'success'],
      ['cus_known', 'add', 'success'],
      ['cus_new', 'add', 'success'],
      ['cus_stranger', 'add', 'unavailable'],
      ['cus_known', 'add', 'success'],
    ]);
  });
});
