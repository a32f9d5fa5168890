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

const PROVIDER = 'prv_guard';

/**
 * The proxy dials an origin only at an address the SSRF guard accepts, checked when it connects:
 * a snapshot naming an internal address (written before a rule changed, or by anything other
 * than the registry) reaches nothing, and the call is answered and recorded as upstream_error.
 */
describe('the SSRF guard at the proxy', () => {
  let dir: string;
  let origin: Server;
  let port = 0;
  let hits = 0;
  const records: UsageRecord[] = [];
  const issuer = tokenIssuer({ sub: 'cus_guard', prv: PROVIDER });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-guard-'));
    origin = createServer((_req, res) => {
      hits++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'secret' }] } }),
      );
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const address = origin.address();
    port = address !== null && typeof address === 'object' ? address.port : 0;
  });

  afterAll(async () => {
    origin.closeAllConnections();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses origins at internal addresses, by name or literal, unless allow-listed', async () => {
    const snapshots = new MemorySnapshotStore();
    await snapshots.set(JWKS_KEY, JSON.stringify(issuer.jwks));
    const servers = {
      named: `http://localhost:${port}/mcp`,
      literal: `http://127.0.0.1:${port}/mcp`,
      mapped: `http://[::ffff:127.0.0.1]:${port}/mcp`,
      metadata: 'http://169.254.169.254/latest/meta-data',
      privileged: 'http://93.184.216.34:22/',
    };
    for (const [subdomain, originUrl] of Object.entries(servers))
      await snapshots.set(
        mcpServerKey(subdomain),
        serverSnapshot({ subdomain, providerId: PROVIDER, originUrl }),
      );
    const start = (allowed: string) =>
      startProxy({
        config: readProxyConfig(
          readEnv({
            OUTBOUND_ALLOWED_HOSTS: allowed,
            PROXY_PORT: '0',
            DATA_DIR: dir,
            SECRET_KEY: '56'.repeat(32),
            EMITTER_LINGER_MS: '5',
            PROXY_ORIGIN_CONNECT_TIMEOUT_MS: '500',
          }),
        ),
        snapshots,
        counters: new MemoryCounterStore(),
        publisher: { publish: async (batch) => void records.push(...batch), close: async () => {} },
        logger: createLogger({ level: 'silent', name: 'test' }),
      });
    const call = (url: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${issuer.token}`,
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read' } }),
      });

    const strict = await start('');
    try {
      for (const subdomain of Object.keys(servers)) {
        const answer = await call(`${strict.url}/mcp/${subdomain}`);
        expect(answer.status, subdomain).toBe(200);
        const body = (await answer.json()) as { error?: { message: string } };
        expect(body.error?.message, subdomain).toMatch(/address is not allowed/);
      }
      // An ordinary request without an id (a GET stream) gets the HTTP form of the refusal.
      const stream = await fetch(`${strict.url}/mcp/named`, {
        headers: { authorization: `Bearer ${issuer.token}`, accept: 'text/event-stream' },
      });
      expect(stream.status).toBe(502);
      expect(await stream.json()).toMatchObject({ code: 'origin_not_allowed' });
    } finally {
      await strict.close();
    }
    expect(hits).toBe(0);
    expect(records.map((r) => r.properties.outcome)).toEqual(Array(5).fill('upstream_error'));

    // The allow-list lets a named loopback origin through (tests, private deployments).
    const open = await start('localhost');
    try {
      const answer = await call(`${open.url}/mcp/named`);
      expect(await answer.json()).toMatchObject({ result: { content: [{ text: 'secret' }] } });
      expect(hits).toBe(1);
    } finally {
      await open.close();
    }
  });
});
