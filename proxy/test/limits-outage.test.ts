import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import {
  type CounterStore,
  calendarPeriod,
  counterKey,
  MemoryCounterStore,
  RedisCounterStore,
} from '@mcp-meter/contracts/limits';
import { JWKS_KEY, MemorySnapshotStore, mcpServerKey } from '@mcp-meter/contracts/snapshots';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpOrigin, startMcpOrigin } from '../../test/helpers/mcp-origin';
import { root } from '../../test/helpers/processes';
import { serverSnapshot } from '../../test/helpers/snapshots';
import { tokenIssuer } from '../../test/helpers/tokens';

const PROVIDER = 'prv_outage';
const PRODUCT = 'prd_outage';
const PLAN = 'pln_free';
const CUSTOMER = 'cus_outage';

/**
 * The proxy's limit check when its counter store is unreachable, and its paywall when the
 * control plane is: each policy documented in docs/operations.md, on a real origin.
 */
describe('proxy limits when Redis or the control plane is unreachable', () => {
  let origin: McpOrigin;
  let dir: string;
  const issuer = tokenIssuer({ sub: CUSTOMER, prv: PROVIDER });
  const records: UsageRecord[] = [];
  const started: Array<{ close(): Promise<void> }> = [];
  const stores: CounterStore[] = [];

  let lastProxyUrl = '';
  async function proxyWith(
    counters: CounterStore,
    extra: Record<string, string>,
    originUrl?: string,
    limit = 3,
  ) {
    const snapshots = new MemorySnapshotStore();
    await snapshots.set(JWKS_KEY, JSON.stringify(issuer.jwks));
    await snapshots.set(
      mcpServerKey('calc'),
      serverSnapshot({
        subdomain: 'calc',
        providerId: PROVIDER,
        originUrl: originUrl ?? origin.url,
        productId: PRODUCT,
        defaultPlanId: PLAN,
        defaultPlan: { planId: PLAN, limit, billingCycle: 'monthly', intervalDays: null },
        tools: [{ name: 'fail', planIds: [], noPlan: true }],
      }),
    );
    const config = readProxyConfig(
      readEnv({
        OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
        PROXY_PORT: '0',
        DATA_DIR: dir,
        PROXY_SPILL_DIR: join(dir, `spill-${started.length}`),
        SECRET_KEY: 'cd'.repeat(32),
        // Nothing listens here: paywall sessions and counter seeds cannot be had.
        CONTROL_PLANE_URL: `http://127.0.0.1:${await freePort()}`,
        EMITTER_LINGER_MS: '5',
        ...extra,
      }),
    );
    const proxy = await startProxy({
      config,
      snapshots,
      counters,
      publisher: { publish: async (batch) => void records.push(...batch), close: async () => {} },
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    started.push(proxy);
    lastProxyUrl = proxy.url;
    if (originUrl !== undefined) return undefined;
    const client = new Client({ name: 'outage', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${proxy.url}/mcp/calc`), {
        requestInit: { headers: { authorization: `Bearer ${issuer.token}` } },
      }),
    );
    return client;
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-limits-outage-'));
    origin = await startMcpOrigin();
  });
  afterAll(async () => {
    for (const s of started) await s.close();
    for (const s of stores) await s.close();
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The limit counter of the customer on the default plan, this period. */
  const freeCounterKey = () =>
    counterKey({
      providerId: PROVIDER,
      environment: 'sandbox',
      customerId: CUSTOMER,
      productId: PRODUCT,
      planId: PLAN,
      periodStart: calendarPeriod('monthly', null, new Date()).start,
    });

  /** The default plan's counter as an earlier seed left it, so only the paywall needs the control plane. */
  const seedFreeCounter = (counters: CounterStore, used: number) =>
    counters.seed(freeCounterKey(), used, Date.now() + 60_000);

  const deadRedis = async () => {
    const store = new RedisCounterStore(`redis://127.0.0.1:${await freePort()}`);
    stores.push(store);
    return store;
  };

  it('closed: limited calls get a retry-later error, free tools still work, nothing reaches the origin', async () => {
    const client = (await proxyWith(await deadRedis(), {
      PROXY_LIMITS_WHEN_UNAVAILABLE: 'closed',
    })) as Client;
    await expect(client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).rejects.toThrow(
      /Usage limits cannot be checked right now/,
    );
    expect(origin.calls.get('add') ?? 0).toBe(0);
    const free = await client.callTool({ name: 'fail', arguments: {} });
    expect(free.content).toEqual([{ type: 'text', text: 'nope' }]);
    await client.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Both calls are metered; neither spent any allowance.
    expect(
      records.map((r) => [r.properties.tool, r.properties.outcome, r.properties.admitted ?? false]),
    ).toEqual([
      ['add', 'unavailable', false],
      ['fail', 'error', false],
    ]);
  });

  it('grace (default): a bounded number of calls per counter is admitted, then retry-later errors', async () => {
    records.length = 0;
    const before = origin.calls.get('add') ?? 0;
    // Default: 1% of the limit, at least one call, at most 100; here 50% of 4 = 2 calls.
    const client = (await proxyWith(
      await deadRedis(),
      { PROXY_LIMIT_OUTAGE_GRACE_PERCENT: '50' },
      undefined,
      4,
    )) as Client;
    for (let i = 0; i < 2; i++)
      expect((await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).content).toEqual([
        { type: 'text', text: '3' },
      ]);
    await expect(client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).rejects.toThrow(
      /Usage limits cannot be checked right now/,
    );
    expect((origin.calls.get('add') ?? 0) - before).toBe(2);
    const metrics = await (await fetch(`${lastProxyUrl}/metrics`)).text();
    expect(metrics).toMatch(/mcpmeter_proxy_limit_decisions_total\{decision="grace"\} 2/);
    expect(metrics).toMatch(/mcpmeter_proxy_limit_grace_unreported 2/);
    await client.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(records.map((r) => [r.properties.outcome, r.properties.admitted ?? false])).toEqual([
      ['success', true],
      ['success', true],
      ['unavailable', false],
    ]);
  });

  it('grace with a maximum of 0 fails closed', async () => {
    const client = (await proxyWith(await deadRedis(), { PROXY_LIMIT_OUTAGE_GRACE_MAX: '0' })) as Client;
    await expect(client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).rejects.toThrow(
      /Usage limits cannot be checked right now/,
    );
    await client.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
  });

  it('Redis stopped under a held lease: its units, then the grace, then retry-later; counted once Redis is back', async () => {
    records.length = 0;
    const stack = mkdtempSync(join(tmpdir(), 'mcpmeter-redis-outage-'));
    chmodSync(stack, 0o755);
    const redisEnv = { ...process.env, STACK_DIR: stack, REDIS_PORT: String(await freePort()) };
    const redis = (verb: 'start' | 'stop') =>
      execFileSync('bash', [join(root, 'deploy', 'infra.sh'), 'redis', verb], {
        env: redisEnv,
        stdio: 'ignore',
        timeout: 60_000,
      });
    redis('start');
    try {
      const counters = new RedisCounterStore(`redis://127.0.0.1:${redisEnv.REDIS_PORT}`);
      stores.push(counters);
      expect(await counters.ready()).toBe(true);
      await seedFreeCounter(counters, 0);
      // A limit of 40: the first call leases a quarter of it (10); the grace is 5% of 40 = 2.
      const client = (await proxyWith(
        counters,
        { PROXY_LIMIT_OUTAGE_GRACE_PERCENT: '5' },
        undefined,
        40,
      )) as Client;
      const add = () => client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
      expect((await add()).content).toEqual([{ type: 'text', text: '3' }]);
      redis('stop');
      // Longer than the lease's hold (1 s): an outage outlives it, the lease still serves.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      for (let i = 0; i < 9 + 2; i++) expect((await add()).content).toEqual([{ type: 'text', text: '3' }]);
      await expect(add()).rejects.toThrow(/Usage limits cannot be checked right now/);
      redis('start');
      expect(await counters.ready(10_000)).toBe(true);
      // The lease is settled at what it spent, and the grace calls are added: 12 used, none leased.
      const key = freeCounterKey();
      let reply = await counters.lease({ key, limit: 40, want: 0, divisor: 1, leaseTtlMs: 0, leaseId: '' });
      for (let i = 0; i < 100 && !(reply.missing === false && reply.used === 12 && reply.leased === 0); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        reply = await counters.lease({ key, limit: 40, want: 0, divisor: 1, leaseTtlMs: 0, leaseId: '' });
      }
      expect(reply).toMatchObject({ missing: false, used: 12, leased: 0 });
      expect(await (await fetch(`${lastProxyUrl}/metrics`)).text()).toMatch(
        /mcpmeter_proxy_limit_grace_unreported 0/,
      );
      await client.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const limited = records.filter((r) => r.properties.tool === 'add');
      expect(limited.map((r) => [r.properties.outcome, r.properties.admitted ?? false])).toEqual([
        ...Array.from({ length: 12 }, () => ['success', true]),
        ['unavailable', false],
      ]);
    } finally {
      redis('stop');
      rmSync(stack, { recursive: true, force: true });
    }
  }, 60_000);

  it('open: limited calls are admitted and recorded as admitted, so the next seed counts them', async () => {
    records.length = 0;
    const client = (await proxyWith(await deadRedis(), { PROXY_LIMITS_WHEN_UNAVAILABLE: 'open' })) as Client;
    const result = await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } });
    expect(result.content).toEqual([{ type: 'text', text: '3' }]);
    await client.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(records.map((r) => r.properties)).toMatchObject([
      {
        tool: 'add',
        outcome: 'success',
        productId: PRODUCT,
        planId: PLAN,
        admitted: true,
        server: 'mcp_calc',
      },
    ]);
  });

  it('a paywall without a reachable control plane still answers, without a checkout link', async () => {
    records.length = 0;
    const counters = new MemoryCounterStore();
    // The counter exists (as after an earlier seed), so only the paywall needs the control plane.
    await seedFreeCounter(counters, 1);
    const client = (await proxyWith(counters, {})) as Client;
    const answers = [];
    for (let i = 0; i < 4; i++)
      answers.push(await client.callTool({ name: 'add', arguments: { a: i, b: 0 } }));
    expect(answers.slice(0, 2).map((a) => a.isError)).toEqual([undefined, undefined]);
    for (const wall of answers.slice(2)) {
      expect(wall.isError).toBe(true);
      expect(wall.structuredContent).toBeUndefined();
      expect(wall._meta?.['dev.mcp-meter/paywall']).toMatchObject({
        kind: 'payment_required',
        reason: 'limit_reached',
        limit: 3,
        used: 3,
        checkoutUrl: null,
      });
      expect((wall.content as Array<{ text: string }>)[0]?.text).toContain('could not be created');
    }
    await client.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Each judged by the free plan, the refused ones at its limit.
    expect(
      records.map((r) => [r.properties.outcome, r.properties.admitted ?? false, r.properties.planId]),
    ).toEqual([
      ['success', true, PLAN],
      ['success', true, PLAN],
      ['paywall', false, PLAN],
      ['paywall', false, PLAN],
    ]);
  });

  it('a JSON-RPC batch with a refused call: the rest reaches the origin, the answers are merged', async () => {
    records.length = 0;
    // A plain JSON-RPC origin that answers batches (the SDK's servers do not take them).
    const seen: unknown[] = [];
    const batchOrigin = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Array<{
          id?: number;
          method: string;
        }>;
        seen.push(body);
        const answers = body
          .filter((m) => m.id !== undefined)
          .map((m) => ({
            jsonrpc: '2.0',
            id: m.id,
            result: { content: [{ type: 'text', text: `ran ${m.id}` }] },
          }));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers));
      });
    });
    await new Promise<void>((resolve) => batchOrigin.listen(0, '127.0.0.1', resolve));
    const address = batchOrigin.address();
    const port = address !== null && typeof address === 'object' ? address.port : 0;
    const counters = new MemoryCounterStore();
    await seedFreeCounter(counters, 2);
    await proxyWith(counters, {}, `http://127.0.0.1:${port}/rpc`);
    const call = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'add', arguments: {} },
    });
    const response = await fetch(`${lastProxyUrl}/mcp/calc`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${issuer.token}`,
      },
      body: JSON.stringify([
        call(1),
        call(2),
        { jsonrpc: '2.0', method: 'notifications/progress', params: {} },
      ]),
    });
    const answers = (await response.json()) as Array<{
      id: number;
      result: { isError?: boolean; _meta?: unknown };
    }>;
    expect(response.status).toBe(200);
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(answers[0]?.result).toEqual({ content: [{ type: 'text', text: 'ran 1' }] });
    expect(answers[1]?.result).toMatchObject({
      isError: true,
      _meta: { 'dev.mcp-meter/paywall': { kind: 'payment_required', limit: 3 } },
    });
    // The origin saw the admitted call and the notification, never the refused call.
    expect(seen).toEqual([[call(1), { jsonrpc: '2.0', method: 'notifications/progress', params: {} }]]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(records.map((r) => [r.properties.outcome, r.properties.admitted ?? false])).toEqual([
      ['success', true],
      ['paywall', false],
    ]);
    batchOrigin.close();
  });

  it('streams a merged batch answer as the origin sends it, holding none of it whole', async () => {
    records.length = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const big = 'x'.repeat(4 << 20);
    const batchOrigin = createServer((req, res) => {
      req.resume();
      req.on('end', async () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        // The first answer, megabytes long; the bracket only once the gate opens.
        res.write(
          `[${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: big }] } })}`,
        );
        await gate;
        res.end(']');
      });
    });
    await new Promise<void>((resolve) => batchOrigin.listen(0, '127.0.0.1', resolve));
    const address = batchOrigin.address();
    const port = address !== null && typeof address === 'object' ? address.port : 0;
    const counters = new MemoryCounterStore();
    await seedFreeCounter(counters, 2);
    await proxyWith(counters, {}, `http://127.0.0.1:${port}/rpc`);
    const call = (id: number) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'add', arguments: {} },
    });
    const response = await fetch(`${lastProxyUrl}/mcp/calc`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${issuer.token}`,
      },
      body: JSON.stringify([call(1), call(2)]),
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    // Megabytes arrive while the origin has not finished: nothing waits for the whole answer.
    let received = 0;
    const chunks: Uint8Array[] = [];
    while (received < 1 << 20) {
      const next = await reader.read();
      if (next.done) break;
      chunks.push(next.value);
      received += next.value.length;
    }
    expect(received).toBeGreaterThanOrEqual(1 << 20);
    release();
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      chunks.push(next.value);
    }
    const answers = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Array<{
      id: number;
      result: Record<string, unknown>;
    }>;
    expect(answers.map((a) => a.id)).toEqual([1, 2]);
    expect(answers[1]?.result).toMatchObject({ isError: true });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(records.map((r) => r.properties.outcome)).toEqual(['success', 'paywall']);
    batchOrigin.close();
  });
});
