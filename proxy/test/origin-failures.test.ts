import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import { calendarPeriod, counterKey, MemoryCounterStore } from '@mcp-meter/contracts/limits';
import { JWKS_KEY, MemorySnapshotStore, mcpServerKey } from '@mcp-meter/contracts/snapshots';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpOrigin, startMcpOrigin } from '../../test/helpers/mcp-origin';
import { pollUntil } from '../../test/helpers/poll';
import { pythonWith } from '../../test/helpers/python';
import { serverSnapshot } from '../../test/helpers/snapshots';
import { tokenIssuer } from '../../test/helpers/tokens';

const PROVIDER = 'prv_failures';
const PRODUCT = 'prd_failures';
const PLAN = 'pln_free';
const CUSTOMER = 'cus_failures';
const LIMIT = 3;

/**
 * Calls the origin never read (issue 58): an origin that closes kept-alive connections without
 * saying so loses no call (the request a stale connection never delivered goes again), and an
 * origin that cannot be reached costs the customer nothing (not billed, its unit given back).
 */
describe('calls the origin never read', () => {
  const issuer = tokenIssuer({ sub: CUSTOMER, prv: PROVIDER });
  const snapshots = new MemorySnapshotStore();
  const counters = new MemoryCounterStore();
  const records: UsageRecord[] = [];
  const origins: McpOrigin[] = [];
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let dir: string;

  const register = (subdomain: string, originUrl: string, limit: number) =>
    snapshots.set(
      mcpServerKey(subdomain),
      serverSnapshot({
        subdomain,
        providerId: PROVIDER,
        originUrl,
        productId: `${PRODUCT}_${subdomain}`,
        defaultPlanId: PLAN,
        defaultPlan: { planId: PLAN, limit, billingCycle: 'monthly', intervalDays: null },
        tools: [],
      }),
    );
  /** The default plan's counter as a seed left it (the control plane is not running here). */
  const seed = (subdomain: string) =>
    counters.seed(
      counterKey({
        providerId: PROVIDER,
        environment: 'sandbox',
        customerId: CUSTOMER,
        productId: `${PRODUCT}_${subdomain}`,
        planId: PLAN,
        periodStart: calendarPeriod('monthly', null, new Date()).start,
      }),
      0,
      Date.now() + 600_000,
    );
  const connect = async (subdomain: string) => {
    const client = new Client({ name: 'failures', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${proxy.url}/mcp/${subdomain}`), {
        requestInit: { headers: { authorization: `Bearer ${issuer.token}` } },
      }),
    );
    return client;
  };
  /** One tools/call as a plain HTTP POST with the customer's token (no MCP session). */
  const toolCall = (
    url: string,
    id: number,
    name: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
  ) =>
    fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${issuer.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
      signal,
    });
  const recordsOf = (subdomain: string) => records.filter((r) => r.properties.server === `mcp_${subdomain}`);

  /** A proxy over this test's stores, its records collected, with `settings` besides the defaults. */
  const proxyWith = async (dataDir: string, settings: Record<string, string> = {}) =>
    startProxy({
      config: readProxyConfig(
        readEnv({
          OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
          PROXY_PORT: '0',
          DATA_DIR: dataDir,
          SECRET_KEY: 'ef'.repeat(32),
          CONTROL_PLANE_URL: `http://127.0.0.1:${await freePort()}`,
          EMITTER_LINGER_MS: '5',
          ...settings,
        }),
      ),
      snapshots,
      counters,
      publisher: { publish: async (batch) => void records.push(...batch), close: async () => {} },
      logger: createLogger({ level: 'silent', name: 'test' }),
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-origin-failures-'));
    await snapshots.set(JWKS_KEY, JSON.stringify(issuer.jwks));
    proxy = await proxyWith(dir);
  });
  afterAll(async () => {
    await proxy?.close();
    for (const origin of origins) await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves and records every call when the origin closes idle connections without saying so', async () => {
    // The origin drops every idle kept-alive connection each 5 ms, with no Keep-Alive timeout in
    // its answers to go by; calls come 0 to 10 ms apart on four clients, so many are written to a
    // connection the origin is closing at that moment.
    const origin = await startMcpOrigin({ json: true, closeIdleEveryMs: 5 });
    origins.push(origin);
    await register('stale', origin.url, 1_000_000);
    await seed('stale');
    const CLIENTS = 4;
    const EACH = 150;
    const clients = await Promise.all(Array.from({ length: CLIENTS }, () => connect('stale')));
    const answers = await Promise.all(
      clients.map(async (client, c) => {
        const texts: string[] = [];
        for (let i = 0; i < EACH; i++) {
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 10));
          const result = (await client.callTool({ name: 'add', arguments: { a: c, b: i } })) as {
            content: Array<{ text: string }>;
            isError?: boolean;
          };
          texts.push(result.isError === true ? 'error' : (result.content[0]?.text ?? ''));
        }
        return texts;
      }),
    );
    for (const client of clients) await client.close();
    answers.forEach((texts, c) => {
      expect(texts).toEqual(Array.from({ length: EACH }, (_, i) => String(c + i)));
    });
    // What the origin ran is what was recorded, each a success.
    expect(origin.calls.get('add')).toBe(CLIENTS * EACH);
    await pollUntil(
      async () => recordsOf('stale').length,
      (n) => n >= CLIENTS * EACH,
      { what: 'every call recorded', timeoutMs: 10_000 },
    );
    const outcomes = new Map<unknown, number>();
    for (const record of recordsOf('stale'))
      outcomes.set(record.properties.outcome, (outcomes.get(record.properties.outcome) ?? 0) + 1);
    expect(Object.fromEntries(outcomes)).toEqual({ success: CLIENTS * EACH });
  });

  it('bills nothing for calls to an origin that cannot be reached, and gives their units back', async () => {
    const port = await freePort();
    await register('down', `http://127.0.0.1:${port}/mcp`, LIMIT);
    await seed('down');
    // Nothing listens: twenty calls at once. At most the limit's 3 hold a unit at a time (the
    // others meet the paywall meanwhile); each admitted one is refused by the connection, never
    // reaches the origin, and gives its unit back.
    const DEAD = 20;
    const bodies = await Promise.all(
      Array.from({ length: DEAD }, async (_, i) => {
        const answer = await toolCall(`${proxy.url}/mcp/down`, i, 'add', { a: 1, b: i });
        return (await answer.json()) as { error?: { message: string }; result?: { isError?: boolean } };
      }),
    );
    const unreachable = bodies.filter((body) => /unreachable/.test(body.error?.message ?? '')).length;
    expect(unreachable).toBeGreaterThan(0);
    expect(bodies.filter((body) => body.result?.isError === true)).toHaveLength(DEAD - unreachable);
    // The origin comes up on that port: the plan's whole limit is still there.
    const origin = await startMcpOrigin({ port });
    origins.push(origin);
    const client = await connect('down');
    for (let i = 0; i < LIMIT; i++) {
      const result = (await client.callTool({ name: 'add', arguments: { a: 2, b: i } })) as {
        content: Array<{ text: string }>;
        isError?: boolean;
      };
      expect(result.isError, `call ${i}`).not.toBe(true);
      expect(result.content[0]?.text).toBe(String(2 + i));
    }
    const over = (await client.callTool({ name: 'add', arguments: { a: 9, b: 9 } })) as {
      isError?: boolean;
      _meta?: Record<string, unknown>;
    };
    expect(over.isError).toBe(true);
    expect(over._meta?.['dev.mcp-meter/paywall']).toMatchObject({ limit: LIMIT });
    await client.close();
    expect(origin.calls.get('add')).toBe(LIMIT);
    await pollUntil(
      async () => recordsOf('down').length,
      (n) => n >= DEAD + LIMIT + 1,
      { what: 'every call recorded', timeoutMs: 10_000 },
    );
    const outcomes = recordsOf('down').map((r) => [
      r.properties.outcome,
      r.properties.admitted ?? false,
      r.properties.refused ?? false,
    ]);
    const count = (outcome: string) => outcomes.filter(([o]) => o === outcome);
    // The unreachable calls: recorded, never billable, holding no unit; the paywalled ones; then
    // the limit's three served and one paywalled once the origin was up.
    expect(count('upstream_error')).toEqual(
      Array.from({ length: unreachable }, () => ['upstream_error', false, true]),
    );
    expect(count('success')).toEqual(Array.from({ length: LIMIT }, () => ['success', true, false]));
    expect(count('paywall')).toHaveLength(DEAD - unreachable + 1);
    expect(outcomes).toHaveLength(DEAD + LIMIT + 1);
  });

  it('gives the unit back of a call whose client left before it was written to the origin', async () => {
    // One origin connection at most: a second call waits for the first's, admitted (its unit
    // spent), and its client leaves meanwhile. As with a client that leaves the moment its
    // payment admits it, the call never reaches the origin, so it costs nothing.
    const narrow = await proxyWith(join(dir, 'narrow'), { PROXY_ORIGIN_MAX_CONNECTIONS: '1' });
    try {
      const origin = await startMcpOrigin({ json: true, stateless: true });
      origins.push(origin);
      await register('queued', origin.url, LIMIT);
      await seed('queued');
      const call = (id: number, name: string, args: Record<string, unknown>, signal?: AbortSignal) =>
        toolCall(`${narrow.url}/mcp/queued`, id, name, args, signal).then(
          async (answer) => (await answer.json()) as { result?: { isError?: boolean; content: unknown } },
        );
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      // The first holds the only connection for two seconds (a countdown of 100 × 20 ms).
      const first = call(1, 'countdown', { from: 100 });
      await sleep(300);
      const leaving = new AbortController();
      const second = call(2, 'add', { a: 1, b: 1 }, leaving.signal).catch((error: Error) => error.name);
      await sleep(300);
      leaving.abort();
      expect(await second).toBe('AbortError');
      expect((await first).result?.isError).not.toBe(true);
      // The plan's 3: the countdown took one; the call that left took none, so two more run.
      const after = [];
      for (let i = 0; i < LIMIT; i++) after.push(await call(10 + i, 'add', { a: 2, b: i }));
      expect(after.map((answer) => answer.result?.isError === true)).toEqual([false, false, true]);
      expect(origin.calls.get('add')).toBe(LIMIT - 1);
      await pollUntil(
        async () => recordsOf('queued').length,
        (n) => n >= 2 + LIMIT,
        { what: 'every call recorded', timeoutMs: 10_000 },
      );
      const outcomes = recordsOf('queued').map((r) => [
        r.properties.tool,
        r.properties.outcome,
        r.properties.admitted ?? false,
        r.properties.refused ?? false,
      ]);
      expect(outcomes).toEqual(
        expect.arrayContaining([
          ['countdown', 'success', true, false],
          ['add', 'error', false, true],
          ['add', 'paywall', false, true],
        ]),
      );
      expect(outcomes.filter(([, outcome]) => outcome === 'success')).toHaveLength(LIMIT);
      expect(outcomes).toHaveLength(2 + LIMIT);
    } finally {
      await narrow.close();
    }
  });

  it('refuses calls an origin has no connection for, fast and unbilled, and gives their units back', async () => {
    // One origin connection, one place in its queue, 300 ms in it: a call past the queue is
    // refused at once and the one waiting when its time is up, each with origin_busy and a
    // Retry-After, never written to the origin: not billed, their units back.
    const busy = await proxyWith(join(dir, 'busy'), {
      PROXY_ORIGIN_MAX_CONNECTIONS: '1',
      PROXY_ORIGIN_MAX_PENDING: '1',
      PROXY_ORIGIN_QUEUE_TIMEOUT_MS: '300',
    });
    try {
      const origin = await startMcpOrigin({ json: true, stateless: true });
      origins.push(origin);
      await register('busy', origin.url, LIMIT);
      await seed('busy');
      const url = `${busy.url}/mcp/busy`;
      type Body = {
        result?: { isError?: boolean };
        error?: { code: number; message: string; data?: { code?: string } };
      };
      const call = async (id: number, name: string, args: Record<string, unknown>) => {
        const answer = await toolCall(url, id, name, args);
        return { retryAfter: answer.headers.get('retry-after'), body: (await answer.json()) as Body };
      };
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      // The first holds the only connection for two seconds (a countdown of 100 × 20 ms).
      const first = call(1, 'countdown', { from: 100 });
      await sleep(300);
      const waiting = call(2, 'add', { a: 1, b: 1 });
      await sleep(50);
      const past = await call(3, 'add', { a: 1, b: 2 });
      // A notification carries no call: refused the same way, as HTTP.
      const note = await fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${issuer.token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
      });
      expect(note.status).toBe(503);
      expect(note.headers.get('retry-after')).toBe('1');
      expect(await note.json()).toMatchObject({ code: 'origin_busy' });
      for (const refused of [past, await waiting]) {
        expect(refused.retryAfter).toBe('1');
        expect(refused.body.error).toMatchObject({ code: -32603, data: { code: 'origin_busy' } });
      }
      expect((await first).body.result?.isError).not.toBe(true);
      // Counted for the operator (an alert reads it), apart from the origins that failed otherwise.
      const page = await (await fetch(`${busy.url}/metrics`)).text();
      expect(page).toContain('mcpmeter_proxy_origin_failures_total{code="origin_busy"} 3\n');
      // The plan's 3: the countdown took one; the two refused took none, so two more run.
      const after = [];
      for (let i = 0; i < LIMIT; i++) after.push(await call(10 + i, 'add', { a: 2, b: i }));
      expect(after.map((answer) => answer.body.result?.isError === true)).toEqual([false, false, true]);
      // What the origin ran is what was recorded as run.
      expect(origin.calls.get('add')).toBe(LIMIT - 1);
      await pollUntil(
        async () => recordsOf('busy').length,
        (n) => n >= 3 + LIMIT,
        { what: 'every call recorded', timeoutMs: 10_000 },
      );
      const outcomes = recordsOf('busy').map((r) => [
        r.properties.tool,
        r.properties.outcome,
        r.properties.admitted ?? false,
        r.properties.refused ?? false,
      ]);
      expect(outcomes.filter(([, outcome]) => outcome === 'upstream_error')).toEqual([
        ['add', 'upstream_error', false, true],
        ['add', 'upstream_error', false, true],
      ]);
      expect(outcomes.filter(([, outcome]) => outcome === 'success')).toHaveLength(LIMIT);
      expect(outcomes).toHaveLength(3 + LIMIT);
    } finally {
      await busy.close();
    }
  });

  it('answers MCP SDK clients a busy origin as an error they read and retry, in their sessions', async () => {
    // One origin connection and no queue: a call while another holds it is refused at once.
    const busy = await proxyWith(join(dir, 'busy-sdk'), {
      PROXY_ORIGIN_MAX_CONNECTIONS: '1',
      PROXY_ORIGIN_MAX_PENDING: '0',
    });
    const python = await steppedPythonClient();
    try {
      const origin = await startMcpOrigin({ json: true, stateless: true });
      origins.push(origin);
      await register('busy-sdk', origin.url, 10);
      await seed('busy-sdk');
      const transport = () =>
        ({
          requestInit: { headers: { authorization: `Bearer ${issuer.token}` } },
        }) as const;
      const url = new URL(`${busy.url}/mcp/busy-sdk`);
      const v1 = new Client({ name: 'busy-v1', version: '1.0.0' });
      await v1.connect(new StreamableHTTPClientTransport(url, transport()));
      const v2 = new ClientV2({ name: 'busy-v2', version: '1.0.0' });
      await v2.connect(new TransportV2(url, transport()));
      await python.connect(url.href, issuer.token);
      // What each client made of a call: the result's text, or the error it raised.
      const viaTypeScript = (client: Client | ClientV2) => async (): Promise<Answer> => {
        try {
          const result = (await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })) as {
            content: Array<{ text?: string }>;
          };
          return { text: result.content[0]?.text };
        } catch (thrown) {
          const { code, data } = thrown as { code?: number; data?: { code?: string } };
          return { error: { code, data } };
        }
      };
      const clients = {
        'TypeScript SDK v1': viaTypeScript(v1),
        'TypeScript SDK v2': viaTypeScript(v2),
        'Python SDK': () => python.call('add', { a: 1, b: 2 }),
      };
      // A countdown of 100 × 20 ms holds the only connection for two seconds. A client's own
      // requests after connecting (a GET for a stream, a notification) may still hold it: a
      // countdown refused for that ends at once and is sent again.
      let holding: Promise<Response> | undefined;
      for (let attempt = 1; holding === undefined; attempt++) {
        const countdown = toolCall(url.href, attempt, 'countdown', { from: 100 });
        const early = await Promise.race([
          countdown.then(() => 'ended'),
          new Promise((resolve) => setTimeout(() => resolve('holding'), 300)),
        ]);
        if (early === 'holding') holding = countdown;
        else expect(attempt).toBeLessThan(5);
      }
      for (const [name, call] of Object.entries(clients))
        expect([name, await call()]).toMatchObject([
          name,
          { error: { code: -32603, data: { code: 'origin_busy' } } },
        ]);
      expect((await holding).status).toBe(200);
      // Their sessions still work: the same call goes again, and the origin runs it.
      for (const [name, call] of Object.entries(clients))
        expect([name, await call()]).toEqual([name, { text: '3' }]);
      expect(origin.calls.get('add')).toBe(3);
      await pollUntil(
        async () => recordsOf('busy-sdk').length,
        (n) => n >= 7 && recordsOf('busy-sdk').some((r) => r.properties.tool === 'countdown'),
        { what: 'every call recorded', timeoutMs: 10_000 },
      );
      const outcomes = recordsOf('busy-sdk').map((r) => `${r.properties.tool} ${r.properties.outcome}`);
      expect(outcomes.filter((o) => o.startsWith('add ')).sort()).toEqual([
        ...['add success', 'add success', 'add success'],
        ...['add upstream_error', 'add upstream_error', 'add upstream_error'],
      ]);
      expect(outcomes.filter((o) => o === 'countdown success')).toHaveLength(1);
      await v1.close();
      await v2.close();
    } finally {
      python.close();
      await busy.close();
    }
  }, 300_000);
});

/** A tool call's answer as a client saw it: the result's text, or the error it raised. */
interface Answer {
  text?: string | undefined;
  error?: { code?: number | undefined; data?: { code?: string } | undefined };
}

/**
 * The Python SDK's client (test/e2e/python/stepped_client.py) in a process of its own: it
 * connects, then calls a tool each time it is told, in the same session.
 */
async function steppedPythonClient() {
  const python = await pythonWith('python-mcp-2.3.0', ['mcp==2.3.0']);
  let child: ChildProcessWithoutNullStreams | undefined;
  let lines: AsyncIterator<string> | undefined;
  const next = async (): Promise<string> => {
    const line = await lines?.next();
    if (line === undefined || line.done === true) throw new Error('the Python client ended');
    return line.value;
  };
  return {
    async connect(url: string, token: string): Promise<void> {
      const script = join(import.meta.dirname, '..', '..', 'test', 'e2e', 'python', 'stepped_client.py');
      child = spawn(python, [script, url, token, 'legacy']);
      child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
      lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      expect(await next()).toBe('READY');
    },
    async call(tool: string, args: Record<string, unknown>): Promise<Answer> {
      child?.stdin.write(`${tool} ${JSON.stringify(args)}\n`);
      const line = await next();
      expect(line).toMatch(/^RESULT /);
      const answer = JSON.parse(line.slice('RESULT '.length)) as {
        text?: string;
        isError?: boolean;
        error?: Answer['error'];
      };
      return answer.error === undefined ? { text: answer.text } : { error: answer.error };
    },
    close(): void {
      child?.stdin.end();
      child?.kill();
    },
  };
}
