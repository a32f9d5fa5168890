import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, readEnv } from '@mcp-meter/contracts/kit';
import { MemoryCounterStore } from '@mcp-meter/contracts/limits';
import { JWKS_KEY, MemorySnapshotStore, mcpServerKey } from '@mcp-meter/contracts/snapshots';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverSnapshot } from '../../test/helpers/snapshots';
import { tokenIssuer } from '../../test/helpers/tokens';

const PROVIDER = 'prv_shutdown';
const SLOW_MS = 2_000;

/**
 * Stopping a proxy (SIGTERM, a deploy): tool calls in flight finish and are recorded, while the
 * session's standalone GET stream, which never ends by itself, is closed at once so the client
 * reconnects elsewhere. Neither may hold the process up.
 */
describe('stopping the proxy', () => {
  let dir: string;
  let origin: Server;
  let originUrl = '';
  const streamsClosed: number[] = [];
  const records: UsageRecord[] = [];
  const issuer = tokenIssuer({ sub: 'cus_stop', prv: PROVIDER });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-shutdown-'));
    origin = createServer((req, res) => {
      if (req.method === 'GET') {
        // A standalone SSE stream: comments every 100 ms, forever.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': open\n\n');
        const timer = setInterval(() => res.write(': ping\n\n'), 100);
        res.on('close', () => {
          clearInterval(timer);
          streamsClosed.push(Date.now());
        });
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const { id } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: number };
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'slow' }] } }),
          );
        }, SLOW_MS);
      });
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const address = origin.address();
    originUrl = `http://127.0.0.1:${address !== null && typeof address === 'object' ? address.port : 0}/mcp`;
  });

  afterAll(async () => {
    origin.closeAllConnections();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('lets tool calls in flight finish and be recorded, and closes standalone streams at once', async () => {
    const snapshots = new MemorySnapshotStore();
    await snapshots.set(JWKS_KEY, JSON.stringify(issuer.jwks));
    await snapshots.set(
      mcpServerKey('slow'),
      serverSnapshot({ subdomain: 'slow', providerId: PROVIDER, originUrl }),
    );
    const proxy = await startProxy({
      config: readProxyConfig(
        readEnv({
          OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
          PROXY_PORT: '0',
          DATA_DIR: dir,
          SECRET_KEY: '34'.repeat(32),
          EMITTER_LINGER_MS: '50',
        }),
      ),
      snapshots,
      counters: new MemoryCounterStore(),
      publisher: { publish: async (batch) => void records.push(...batch), close: async () => {} },
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    const url = `${proxy.url}/mcp/slow`;
    const headers = {
      authorization: `Bearer ${issuer.token}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
    };

    const stream = await fetch(url, { method: 'GET', headers });
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain(': open');
    const call = fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'wait', arguments: {} },
      }),
    }).then(async (response) => ({ status: response.status, body: await response.text() }));
    // The call has reached the origin before the stop begins.
    await new Promise((resolve) => setTimeout(resolve, 100));

    const stopping = Date.now();
    await Promise.race([
      proxy.close(),
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error('close() still waiting after 8 s')), 8_000),
      ),
    ]);
    const took = Date.now() - stopping;

    // The call in flight was answered in full, after its origin took its time.
    const answered = await call;
    expect(answered.status).toBe(200);
    expect(JSON.parse(answered.body)).toMatchObject({ id: 1, result: { content: [{ text: 'slow' }] } });
    // It waited for the call, and not for the 10 s given to calls that do not finish.
    expect(took).toBeGreaterThanOrEqual(SLOW_MS - 250);
    // The standalone stream ended for the client and at the origin, without waiting for the call.
    for (;;) if ((await reader.read()).done) break;
    expect(streamsClosed.length).toBe(1);
    // Closed while the call was still at the origin, not after it.
    expect((streamsClosed[0] as number) - stopping).toBeLessThan(SLOW_MS - 250);
    // The call's record was flushed by close().
    expect(records.map((r) => [r.customerRef, r.properties.tool, r.properties.outcome])).toEqual([
      ['cus_stop', 'wait', 'success'],
    ]);
  });
});
