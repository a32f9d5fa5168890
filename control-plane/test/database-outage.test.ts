import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { root } from '../../test/helpers/processes';

/**
 * PostgreSQL stopped under the API (issue 32): every call that needs it answers 503
 * `dependency_unavailable` with `Retry-After`, never 500; a key verified shortly before keeps
 * working for usage reads (ClickHouse only); and everything answers again once it is back.
 * The server here is this file's own, started and stopped with deploy/infra.sh.
 */
const infra = join(root, 'deploy', 'infra.sh');

describe('PostgreSQL outage', () => {
  let dir: string;
  let pgEnv: NodeJS.ProcessEnv;
  let harness: TestControlPlane;
  const postgres = (verb: 'start' | 'stop') =>
    execFileSync('bash', [infra, 'postgres', verb], { env: pgEnv, stdio: 'ignore', timeout: 120_000 });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-pg-outage-'));
    chmodSync(dir, 0o755);
    pgEnv = { ...process.env, STACK_DIR: join(dir, 'stack'), PG_PORT: String(await freePort()) };
    postgres('start');
    harness = await startTestControlPlane({
      bodyLimitBytes: 64 * 1024,
      postgresServerUrl: `postgres://mcpmeter:mcpmeter-local@127.0.0.1:${pgEnv.PG_PORT}/mcpmeter`,
    });
  }, 180_000);

  afterAll(async () => {
    await harness?.close().catch(() => undefined);
    if (pgEnv !== undefined) postgres('stop');
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('answers 503 with Retry-After while it is down, serves usage reads to known keys, and recovers', async () => {
    const { controlPlane } = harness;
    const seen = await controlPlane.providers.create({ displayName: 'Seen', legalName: 'Seen Ltd' });
    const unseen = await controlPlane.providers.create({ displayName: 'Unseen', legalName: 'Unseen Ltd' });
    const api = injectClient(controlPlane, seen.sandboxKey);
    expect((await api('POST', '/v1/sdk/customers', { externalRef: 'c-1' })).status).toBe(201);
    expect(
      (await api('POST', '/v1/sdk/meter-events', { customerRef: 'c-1', meterName: 'requests', value: 3 }))
        .status,
    ).toBe(202);
    await harness.settled();
    const before = await api('GET', '/ui/meters/requests/usage');
    expect(before).toMatchObject({ status: 200, body: { total: 3 } });
    // A connection checked out between two queries (a transaction waiting on something else).
    const held = await harness.pool.connect();
    await held.query('BEGIN');

    postgres('stop');
    try {
      // Its connection broke with the server while no query ran on it (the event loop turns
      // first); the process is still here, and the next query on it fails.
      await new Promise((resolve) => setTimeout(resolve, 500));
      await expect(held.query('SELECT 1')).rejects.toThrow();
      held.release(true);
      const calls: Array<[string, 'GET' | 'POST', string, unknown?]> = [
        [seen.sandboxKey, 'GET', '/v1/ui/products'],
        [seen.sandboxKey, 'POST', '/v1/sdk/customers', { externalRef: 'c-2' }],
        [seen.sandboxKey, 'POST', '/v1/sdk/limits', { customerRef: 'c-1', productRef: 'prd_missing' }],
        // A key never seen by this process cannot be checked: 503, not 401.
        [unseen.sandboxKey, 'GET', '/ui/meters/requests/usage'],
      ];
      for (const [key, method, url, body] of calls) {
        const response = await controlPlane.app.inject({
          method,
          url,
          headers: { authorization: `Bearer ${key}` },
          ...(body === undefined ? {} : { payload: body as object }),
        });
        expect(response.statusCode, `${method} ${url}`).toBe(503);
        expect(response.json(), `${method} ${url}`).toMatchObject({ code: 'dependency_unavailable' });
        expect(Number(response.headers['retry-after']), `${method} ${url}`).toBeGreaterThan(0);
      }
      // Usage lives in ClickHouse: a key verified before the outage still reads it.
      expect(await api('GET', '/ui/meters/requests/usage')).toMatchObject({
        status: 200,
        body: { total: 3 },
      });
      const health = await controlPlane.app.inject({ method: 'GET', url: '/healthz' });
      expect(health.statusCode).toBe(503);
      // The metrics page still answers, without the webhook backlog it reads from PostgreSQL.
      const metrics = await controlPlane.app.inject({ method: 'GET', url: '/metrics' });
      expect(metrics.statusCode).toBe(200);
      expect(metrics.body).toMatch(
        /^mcpmeter_control_plane_http_requests_total\{method="GET",route="\/healthz",status="503"\} 1$/m,
      );
      expect(metrics.body).not.toContain('mcpmeter_webhook_deliveries_due');
    } finally {
      postgres('start');
    }
    // Connections the pool held died with the server: the next calls make new ones.
    let products = await api('GET', '/v1/ui/products');
    for (let i = 0; i < 20 && products.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 250));
      products = await api('GET', '/v1/ui/products');
    }
    expect(products.status).toBe(200);
    expect((await api('POST', '/v1/sdk/customers', { externalRef: 'c-2' })).status).toBe(201);
    expect((await injectClient(controlPlane, unseen.sandboxKey)('GET', '/v1/ui/products')).status).toBe(200);
  }, 120_000);
});
