import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, freePort, readEnv } from '@mcp-meter/contracts/kit';
import { MemoryCounterStore } from '@mcp-meter/contracts/limits';
import { JWKS_KEY, MemorySnapshotStore, mcpServerKey } from '@mcp-meter/contracts/snapshots';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { serverSnapshot } from '../helpers/snapshots';
import { tokenIssuer } from '../helpers/tokens';

const PROVIDER = 'prv_transparency';
const CUSTOMER = 'cus_transparency';

/**
 * The proxy must be invisible to MCP clients: the same conversation with an origin, once direct
 * and once through the proxy, gives the same answers, progress streams, server-initiated
 * notifications and session handling, with one usage record per tools/call.
 */
describe('MCP streamable HTTP through the proxy, compared with the origin directly', () => {
  const issuer = tokenIssuer({ sub: CUSTOMER, prv: PROVIDER });
  const snapshots = new MemorySnapshotStore();
  const records: UsageRecord[] = [];
  const origins: McpOrigin[] = [];
  let everything: ChildProcess | undefined;
  let everythingUrl = '';
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let dir: string;

  async function register(subdomain: string, originUrl: string) {
    await snapshots.set(
      mcpServerKey(subdomain),
      serverSnapshot({ subdomain, providerId: PROVIDER, originUrl }),
    );
    return `${proxy.url}/mcp/${subdomain}`;
  }

  async function connect(url: string, viaProxy: boolean) {
    const client = new Client({ name: 'transparency', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: viaProxy ? { headers: { authorization: `Bearer ${issuer.token}` } } : {},
    });
    await client.connect(transport);
    return { client, transport };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-transparency-'));
    await snapshots.set(JWKS_KEY, JSON.stringify(issuer.jwks));
    proxy = await startProxy({
      config: readProxyConfig(
        readEnv({
          OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
          PROXY_PORT: '0',
          DATA_DIR: dir,
          SECRET_KEY: '12'.repeat(32),
          EMITTER_LINGER_MS: '5',
        }),
      ),
      snapshots,
      counters: new MemoryCounterStore(),
      publisher: { publish: async (batch) => void records.push(...batch), close: async () => {} },
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    origins.push(
      await startMcpOrigin(),
      await startMcpOrigin({ json: true }),
      await startMcpOrigin({ standaloneRequests: true }),
    );
    const port = await freePort();
    const entry = createRequire(import.meta.url).resolve(
      '@modelcontextprotocol/server-everything/dist/index.js',
    );
    everything = spawn(process.execPath, [entry, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: 'ignore',
    });
    everythingUrl = `http://127.0.0.1:${port}/mcp`;
    await pollUntil(
      async () => (await fetch(everythingUrl, { method: 'GET' }).catch(() => undefined))?.status ?? 0,
      (status) => status > 0,
      { what: 'server-everything listening', timeoutMs: 30_000 },
    );
  });

  afterAll(async () => {
    await proxy?.close();
    for (const origin of origins) await origin.close();
    everything?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One conversation; what the client saw, for comparison. */
  async function conversation(url: string, viaProxy: boolean) {
    const { client, transport } = await connect(url, viaProxy);
    const changed = new Promise<string>((resolve) =>
      client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => resolve(n.method)),
    );
    const seen: Record<string, unknown> = {
      server: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      sessionIssued: typeof transport.sessionId === 'string',
      tools: (await client.listTools()).tools.map((t) => t.name).sort(),
      add: await client.callTool({ name: 'add', arguments: { a: 20, b: 22 } }),
      fail: await client.callTool({ name: 'fail', arguments: {} }),
    };
    const progress: number[] = [];
    seen.countdown = await client.callTool({ name: 'countdown', arguments: { from: 4 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    seen.progress = progress;
    seen.announce = await client.callTool({ name: 'announce', arguments: {} });
    seen.notification = await Promise.race([
      changed,
      new Promise((resolve) => setTimeout(() => resolve('no notification within 5 s'), 5000)),
    ]);
    await transport.terminateSession();
    // The session is gone at the origin too.
    const after = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': transport.sessionId ?? 'x',
        ...(viaProxy ? { authorization: `Bearer ${issuer.token}` } : {}),
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
    });
    seen.afterDeleteStatus = after.status;
    await client.close();
    return seen;
  }

  it.each([
    ['SSE answers', 0],
    ['JSON answers', 1],
  ])('an SDK-built origin with %s looks the same through the proxy', async (_name, index) => {
    const origin = origins[index] as McpOrigin;
    const direct = await conversation(origin.url, false);
    const before = records.length;
    const proxied = await conversation(await register(`sdk-${index}`, origin.url), true);
    expect(proxied).toEqual(direct);
    expect(direct).toMatchObject({
      sessionIssued: true,
      add: { content: [{ type: 'text', text: '42' }] },
      notification: 'notifications/tools/list_changed',
      // The test origin answers an unknown session with 400 (the SDK's own servers vary).
      afterDeleteStatus: 400,
    });
    // In JSON mode, progress of a request has no stream of its own; SSE answers carry it in order.
    if (index === 0) expect(direct.progress).toEqual([1, 2, 3, 4]);
    // One record per tools/call (add, fail, countdown, announce), none for anything else.
    await pollUntil(
      async () => records.length - before,
      (n) => n >= 4,
      { what: 'usage records', timeoutMs: 5_000 },
    );
    const mine = records.slice(before);
    expect(mine.map((r) => [r.properties.tool, r.properties.outcome])).toEqual([
      ['add', 'success'],
      ['fail', 'error'],
      ['countdown', 'success'],
      ['announce', 'success'],
    ]);
  });

  it("serves requests an origin sends on the session's standalone stream, session after session (issue 58)", async () => {
    const origin = origins[2] as McpOrigin;
    const proxied = await register('sdk-standalone', origin.url);
    // The client opens its GET stream before it calls the tool; through the proxy, the tool call
    // used to overtake the GET at the origin (a warm connection against a new one), and the
    // origin dropped the elicitation it had no stream for.
    for (let i = 0; i < 20; i++) {
      for (const [url, viaProxy] of [
        [origin.url, false],
        [proxied, true],
      ] as const) {
        const client = new Client(
          { name: 'standalone', version: '1.0.0' },
          { capabilities: { elicitation: {}, sampling: {} } },
        );
        client.setRequestHandler(ElicitRequestSchema, async () => ({
          action: 'accept',
          content: { name: `caller ${i}` },
        }));
        client.setRequestHandler(CreateMessageRequestSchema, async () => ({
          role: 'assistant',
          content: { type: 'text', text: 'hi' },
          model: 'test',
        }));
        const transport = new StreamableHTTPClientTransport(new URL(url), {
          requestInit: viaProxy ? { headers: { authorization: `Bearer ${issuer.token}` } } : {},
        });
        await client.connect(transport);
        const answer = await client.callTool({ name: 'ask', arguments: {} }, undefined, { timeout: 10_000 });
        expect(answer.content, `session ${i}, ${viaProxy ? 'through the proxy' : 'direct'}`).toEqual([
          { type: 'text', text: `caller ${i} / hi` },
        ]);
        await transport.terminateSession();
        await client.close();
      }
    }
    expect(origin.calls.get('ask')).toBe(40);
  });

  it('@modelcontextprotocol/server-everything works through the proxy as it does directly', async () => {
    const run = async (url: string, viaProxy: boolean) => {
      const { client, transport } = await connect(url, viaProxy);
      const progress: number[] = [];
      const seen = {
        server: client.getServerVersion()?.name,
        tools: (await client.listTools()).tools.map((t) => t.name).sort(),
        resources: (await client.listResources()).resources.length,
        prompts: (await client.listPrompts()).prompts.map((p) => p.name).sort(),
        echo: await client.callTool({ name: 'echo', arguments: { message: 'through' } }),
        sum: await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } }),
        long: await client.callTool(
          { name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
          undefined,
          { onprogress: (p) => progress.push(p.progress) },
        ),
        progress,
      };
      await transport.terminateSession();
      await client.close();
      return seen;
    };
    const direct = await run(everythingUrl, false);
    const proxied = await run(await register('everything', everythingUrl), true);
    expect(proxied).toEqual(direct);
    expect(direct.tools).toContain('echo');
    expect(direct.progress).toEqual([1, 2, 3]);
  });
});
