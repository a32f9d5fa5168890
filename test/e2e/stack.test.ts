import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { foreignToken, mcpThroughProxyFlow, type ProviderKeys, sellAndMeterFlow } from '../helpers/flows';
import { runAdmin, type Service, sharedStackEnv, spawnSplitStack } from '../helpers/processes';

/**
 * The distributed shape: real PostgreSQL, Redis and Kafka; control plane + ingest in one process
 * (it owns the embedded ClickHouse), the proxy in another, talking only through Redis and Kafka.
 */
describe('multi-process stack on real PostgreSQL, Redis and Kafka', () => {
  const infra = inject('infra');
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let services: Service[] = [];
  let baseUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-stack-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    const proxyPort = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    env = sharedStackEnv({ name: 'stack', infra, dir, port, extra: { PROXY_PORT: String(proxyPort) } });
    const stack = spawnSplitStack({ env, logDir: dir, proxies: [{}] });
    services = stack.services;
    await stack.ready;
  });

  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('sells a usage-based plan and reports exact sandbox usage through Kafka, invisible to the live key', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Stack Co'], env);
    await sellAndMeterFlow(baseUrl, provider);
  });

  it('meters exactly one record for one MCP tool call through a separate proxy process', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Stack MCP'], env);
    await mcpThroughProxyFlow(baseUrl, provider, async () =>
      foreignToken(
        baseUrl,
        await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Other Stack'], env),
      ),
    );
  });

  it('the admin CLI lists providers and rotates keys against DATABASE_URL', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Rotating'], env);
    const listed = await runAdmin<{ data: { id: string }[] }>(['provider', 'list'], env);
    expect(listed.data.map((p) => p.id)).toContain(provider.id);
    const rotated = await runAdmin<{ key: string; revokedKeys: number }>(
      ['key', 'rotate', '--provider', provider.id, '--environment', 'sandbox'],
      env,
    );
    expect(rotated.key).toMatch(/^sk_test_/);
    expect(rotated.revokedKeys).toBe(1);
    const oldKey = await fetch(`${baseUrl}/v1/sdk/merchant`, {
      headers: { authorization: `Bearer ${provider.sandboxKey}` },
    });
    expect(oldKey.status).toBe(401);
    const newKey = await fetch(`${baseUrl}/v1/sdk/merchant`, {
      headers: { authorization: `Bearer ${rotated.key}` },
    });
    expect(newKey.status).toBe(200);
  });
});
