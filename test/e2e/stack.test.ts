import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient } from '../helpers/api';
import {
  foreignToken,
  mcpThroughProxyFlow,
  type ProviderKeys,
  sellAndMeterFlow,
  suffix,
} from '../helpers/flows';
import { pollUntil } from '../helpers/poll';
import { runAdmin, type Service, sharedStackEnv, spawnSplitStack } from '../helpers/processes';

/**
 * The distributed shape: real PostgreSQL, Redis and Kafka; control plane + ingest in one process
 * (it owns the embedded ClickHouse), the proxy in another, talking only through Redis and Kafka.
 */
const METRICS_TOKEN = `metrics-${suffix()}`;

/** A sample's value on a metrics page (its name and labels exactly as the page writes them); 0 when absent. */
function sample(page: string, series: string): number {
  const line = page.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** How much a sample grew from one page to the next. */
const grew = (before: string, after: string, series: string) =>
  sample(after, series) - sample(before, series);

describe('multi-process stack on real PostgreSQL, Redis and Kafka', () => {
  const infra = inject('infra');
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let services: Service[] = [];
  let baseUrl: string;
  let proxyUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-stack-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    const proxyPort = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    proxyUrl = `http://127.0.0.1:${proxyPort}`;
    env = sharedStackEnv({
      name: 'stack',
      infra,
      dir,
      port,
      extra: { PROXY_PORT: String(proxyPort), METRICS_TOKEN },
    });
    const stack = spawnSplitStack({ env, logDir: dir, proxies: [{}] });
    services = stack.services;
    await stack.ready;
  });

  const scrape = async () => {
    const answer = await fetch(`${baseUrl}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^text\/plain; version=0.0.4/);
    return answer.text();
  };

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

  it("serves the control plane's metrics behind its token: requests by route, the limit check, its records and ingest's", async () => {
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Metrics Co'], env);
    const api = apiClient(baseUrl, provider.sandboxKey);
    const product = (await api('POST', '/v1/ui/products', { name: 'Checked', reference: 'checked' })).body;
    await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Free',
      type: 'recurring',
      billingCycle: 'monthly',
      price: 0,
      limit: 100,
      default: true,
    });
    expect((await api('POST', '/v1/sdk/customers', { externalRef: 'metered' })).status).toBe(201);
    for (const authorization of [undefined, 'Bearer wrong', METRICS_TOKEN]) {
      const refused = await fetch(`${baseUrl}/metrics`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ status: 401, code: 'unauthorized' });
    }
    const before = await scrape();
    const checks = await Promise.all(
      Array.from({ length: 3 }, () =>
        api('POST', '/v1/sdk/limits', { customerRef: 'metered', productRef: 'checked', consume: true }),
      ),
    );
    expect(checks.map((c) => c.status)).toEqual([200, 200, 200]);
    const limitCheck =
      'mcpmeter_control_plane_http_requests_total{method="POST",route="/v1/sdk/limits",status="200"}';
    // Each check's record goes to Kafka in a batch, and the ingest consumer in the same process
    // stores it: every count on the page moves by the three checks.
    const after = await pollUntil(
      scrape,
      (page) =>
        grew(before, page, 'mcpmeter_usage_published_total') >= 3 &&
        grew(before, page, 'mcpmeter_ingest_records_stored_total') >= 3,
      { what: "the limit checks' records published and stored" },
    );
    expect(grew(before, after, limitCheck)).toBe(3);
    expect(grew(before, after, 'mcpmeter_control_plane_limit_check_seconds_count')).toBe(3);
    expect(grew(before, after, 'mcpmeter_usage_emitted_total')).toBe(3);
    expect(grew(before, after, 'mcpmeter_usage_spooled_total')).toBe(3);
    expect(grew(before, after, 'mcpmeter_usage_published_total')).toBe(3);
    expect(sample(after, 'mcpmeter_usage_dropped_total')).toBe(0);
    expect(sample(after, 'mcpmeter_ingest_batches_stored_total')).toBeGreaterThan(0);
    expect(sample(after, 'mcpmeter_ingest_last_stored_timestamp_seconds')).toBeGreaterThan(
      Date.now() / 1000 - 60,
    );
    // Routes are labelled by their pattern: a path no route has is one series, whatever was asked.
    await fetch(`${baseUrl}/no/such/${suffix()}`);
    await fetch(`${baseUrl}/no/such/${suffix()}`);
    const unmatched = await scrape();
    expect(
      unmatched.match(
        /^mcpmeter_control_plane_http_requests_total\{method="GET",route="unmatched",status="404"\} \d+$/gm,
      ),
    ).toHaveLength(1);
    expect(unmatched).not.toContain('/no/such/');
    expect(unmatched).toMatch(/^mcpmeter_control_plane_event_loop_delay_seconds\{quantile="0.99"\} /m);
    // The one METRICS_TOKEN guards the proxy's page too (PROXY_METRICS_TOKEN unset).
    expect((await fetch(`${proxyUrl}/metrics`)).status).toBe(401);
    const proxyPage = await fetch(`${proxyUrl}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(proxyPage.status).toBe(200);
    expect(await proxyPage.text()).toMatch(/^mcpmeter_proxy_http_requests_total/m);
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
