import type { JsonWebKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifyAccessToken } from '@mcp-meter/contracts/snapshots';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api';
import { foreignToken, mcpThroughProxyFlow, type ProviderKeys, sellAndMeterFlow } from '../helpers/flows';
import { pollUntil } from '../helpers/poll';
import {
  type EmbeddedService,
  embeddedEnv,
  embeddedService,
  runAdmin,
  type Service,
  spawnService,
  waitHealthy,
} from '../helpers/processes';

describe('npm start: the whole service in one process on embedded defaults', () => {
  let embedded: EmbeddedService;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let service: Service;
  let baseUrl: string;
  let proxyUrl: string;

  const start = async () => {
    service = await embedded.start();
    await waitHealthy(proxyUrl, service);
  };

  beforeAll(async () => {
    embedded = await embeddedService('aio', { npm: true });
    ({ dir: dataDir, env, baseUrl, proxyUrl } = embedded);
    await start();
  });

  afterAll(async () => {
    await service?.stop();
    embedded?.remove();
  });

  it('refuses to start on a bad setting, naming each variable and what is wrong', async () => {
    const bad = spawnService('npm', ['start'], {
      env: embeddedEnv({
        DATA_DIR: join(dataDir, 'unused'),
        PORT: 'eighty',
        PROXY_PORT: '70000',
        LOG_LEVEL: 'chatty',
      }),
      logDir: dataDir,
      name: 'bad-config',
    });
    const code = await new Promise<number | null>((resolve) => bad.child.on('exit', resolve));
    expect(code).not.toBe(0);
    const log = readFileSync(bad.logFile, 'utf8');
    expect(log).toContain('PORT: expected an integer, got "eighty"');
    expect(log).toContain('PROXY_PORT: must be between 0 and 65535, got 70000');
    expect(log).toContain(
      'LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "chatty"',
    );
  });

  it('prints both URLs and answers health checks', () => {
    const log = readFileSync(service.logFile, 'utf8');
    expect(log).toContain(`Control plane: ${baseUrl}`);
    expect(log).toContain(`MCP proxy:     ${proxyUrl}`);
  });

  it('sells a usage-based plan and reports exact sandbox usage, invisible to the live key', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Acme Tools'], env);
    expect(provider.sandboxKey).toMatch(/^sk_test_/);
    expect(provider.liveKey).toMatch(/^sk_live_/);
    await sellAndMeterFlow(baseUrl, provider);
  });

  it('meters exactly one record for one MCP tool call through the proxy', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'MCP Shop'], env);
    await mcpThroughProxyFlow(baseUrl, provider, async () =>
      foreignToken(
        baseUrl,
        await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Other Shop'], env),
      ),
    );
  });

  it('the admin CLI mints a customer token the proxy accepts', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Token Shop'], env);
    const customer = await apiClient(baseUrl, provider.sandboxKey)('POST', '/v1/sdk/customers', {
      externalRef: 'cli-user',
    });
    const token = await runAdmin<{ accessToken: string; customerRef: string }>(
      ['token', 'create', '--key', provider.sandboxKey, '--customer', 'cli-user'],
      env,
    );
    expect(token.customerRef).toBe(customer.body.reference);
    const jwks = (await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as { keys: JsonWebKey[] };
    expect(
      await verifyAccessToken(token.accessToken, jwks.keys, Math.floor(Date.now() / 1000)),
    ).toMatchObject({
      ok: true,
      claims: { sub: customer.body.reference, prv: provider.id },
    });
    // Run beside the service without its port (issue 60): the CLI reads where the service on this
    // data directory answers, so its token carries the issuer the service checks, not the default.
    const { PORT: _port, ...withoutPort } = env;
    const beside = await runAdmin<{ accessToken: string }>(
      ['token', 'create', '--key', provider.sandboxKey, '--customer', 'cli-user'],
      withoutPort,
    );
    expect(
      await verifyAccessToken(beside.accessToken, jwks.keys, Math.floor(Date.now() / 1000), baseUrl),
    ).toMatchObject({ ok: true });
    expect(
      await verifyAccessToken(
        token.accessToken,
        jwks.keys,
        Math.floor(Date.now() / 1000),
        'http://127.0.0.1:8080',
      ),
    ).toEqual({ ok: false, reason: 'wrong issuer: tokens here are issued by http://127.0.0.1:8080' });
  });

  it('flushes usage accepted just before SIGTERM and keeps every total across a restart', async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Restart Co'], env);
    const sandbox = apiClient(baseUrl, provider.sandboxKey);
    expect((await sandbox('POST', '/v1/sdk/customers', { externalRef: 'cus_r' })).status).toBe(201);
    const sent = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        sandbox('POST', '/v1/sdk/meter-events', { customerRef: 'cus_r', value: i + 1 }),
      ),
    );
    expect(sent.every((r) => r.status === 202)).toBe(true);
    // Within the 500 ms flush interval: only the shutdown flush can have written these records.
    await service.stop('SIGTERM');
    await start();
    const total = await pollUntil(
      async () =>
        (await apiClient(baseUrl, provider.sandboxKey)('GET', '/ui/meters/requests/usage?customerRef=cus_r'))
          .body,
      (body) => body.records === 50,
      { what: 'usage after restart' },
    );
    expect(total).toMatchObject({ total: (50 * 51) / 2, records: 50 });
    // The provider, its keys and its catalog survived too.
    expect((await sandbox('GET', '/v1/sdk/merchant')).body).toMatchObject({ displayName: 'Restart Co' });
  });
});
