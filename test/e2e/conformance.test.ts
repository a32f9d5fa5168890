import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient } from '../helpers/api';
import { type ConformanceResults, conformanceRunner, failures, passed } from '../helpers/conformance';
import { type ConformanceOrigin, startConformanceOrigin } from '../helpers/conformance-origin';
import { customerWithToken, type ProviderKeys, suffix } from '../helpers/flows';
import { pollUntil } from '../helpers/poll';
import { runAdmin, type Service, sharedStackEnv, spawnSplitStack } from '../helpers/processes';

/** The tasks extension: the SDK v2 has no task runtime, so the origin cannot pass it directly. */
const isExtension = (scenario: string) => scenario.startsWith('tasks-');

/**
 * The official MCP conformance suite, server side, for both protocol eras: first against a test
 * origin on the TypeScript SDK v2 directly, then against the same origin through the proxy.
 * Every scenario the direct run passes must pass through the proxy too. The suite cannot send
 * an access token, so it talks to a loopback relay that adds the customer's `Authorization`
 * header (what any configured client does) and passes everything else, `Host` and `Origin`
 * included, as it came.
 */
describe('the MCP conformance suite, directly and through the proxy', () => {
  const infra = inject('infra');
  let dir: string;
  let services: Service[] = [];
  let baseUrl: string;
  let origin: ConformanceOrigin;
  let relay: Server;
  let relayUrl: string;
  let api: ReturnType<typeof apiClient>;
  let customerRef: string;
  let suite: Awaited<ReturnType<typeof conformanceRunner>>['server'];

  beforeAll(async () => {
    suite = (await conformanceRunner()).server;
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-conformance-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    const proxyPort = await freePort();
    const relayPort = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    relayUrl = `http://127.0.0.1:${relayPort}/mcp`;
    const env = sharedStackEnv({
      name: 'conformance',
      infra,
      dir,
      port,
      extra: { SECRET_KEY: 'ce'.repeat(32), PUBLIC_URL: baseUrl },
    });
    const stack = spawnSplitStack({
      env,
      logDir: dir,
      proxies: [{ PROXY_PORT: String(proxyPort), PROXY_SPILL_DIR: join(dir, 'spill') }],
    });
    services = stack.services;
    await stack.ready;
    origin = await startConformanceOrigin();
    const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Conformance Co'], env);
    api = apiClient(baseUrl, provider.sandboxKey);
    const product = (await api<{ id: string }>('POST', '/v1/ui/products', { name: 'Everything' })).body;
    const plan = (
      await api<{ id: string }>('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Plenty',
        currency: 'usd',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 0,
        limit: 100_000,
        default: true,
      })
    ).body;
    const registered = await api<{ subdomain: string }>('POST', '/v1/ui/mcp-servers', {
      name: `everything-${suffix()}`,
      url: origin.url,
      productId: product.id,
      defaultPlanId: plan.id,
      // The suite's "valid localhost" request carries the Origin of the URL it was given.
      allowedOrigins: [new URL(relayUrl).origin],
    });
    expect(registered.status).toBe(201);
    const customer = await customerWithToken(api);
    customerRef = customer.ref;

    const target = new URL(`http://127.0.0.1:${proxyPort}/mcp/${registered.body.subdomain}`);
    relay = createServer((req, res) => {
      const rest = (req.url ?? '/mcp').replace(/^\/mcp/, '');
      const forwarded = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: `${target.pathname}${rest}`,
          headers: { ...req.headers, authorization: `Bearer ${customer.token}` },
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forwarded.on('error', () => res.destroy());
      req.pipe(forwarded);
      res.on('close', () => forwarded.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(relayPort, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    relay?.closeAllConnections();
    await new Promise<void>((resolve) => (relay === undefined ? resolve() : relay.close(() => resolve())));
    await Promise.all(services.map((s) => s.stop()));
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Scenarios the direct run passes that the proxied run does not. */
  const lostThroughProxy = (direct: ConformanceResults, proxied: ConformanceResults) =>
    [...direct]
      .filter(([, checks]) => passed(checks))
      .filter(([scenario]) => !passed(proxied.get(scenario) ?? []));

  it.each([
    ['2025-11-25', ['--spec-version', '2025-11-25']],
    // Everything the 2026-07-28 revision requires (stateless serving, multi-round results,
    // caching hints), plus its pending scenarios and the tasks extension, which are reported.
    ['2026-07-28', ['--requirements', '2026-07-28']],
  ])(
    'MCP %s: every scenario the origin passes directly also passes through the proxy',
    async (_era, selection) => {
      const direct = await suite(origin.url, selection);
      const directFailures = [...direct.keys()].filter((scenario) => !isExtension(scenario));
      expect(direct.size).toBeGreaterThan(30);
      expect(failures(direct, directFailures)).toEqual([]);

      const proxied = await suite(relayUrl, selection);
      const lost = lostThroughProxy(direct, proxied).map(([scenario]) => scenario);
      expect(lost, failures(proxied, lost).join('\n')).toEqual([]);
      expect([...proxied.keys()].sort()).toEqual([...direct.keys()].sort());
    },
  );

  it('metered the tool calls the suite made through the proxy, with multi-round input rounds not billable', async () => {
    const usage = await pollUntil(
      async () =>
        (
          await api<{ total: number; groups?: Array<{ value: string; records: number }> }>(
            'GET',
            `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
          )
        ).body,
      (body) => {
        const records = (outcome: string) =>
          body.groups?.find((group) => group.value === outcome)?.records ?? 0;
        return records('success') > 20 && records('input_required') > 5;
      },
      { what: "the suite's tool calls on the requests meter" },
    );
    const byOutcome = new Map((usage.groups ?? []).map((group) => [group.value, group.records]));
    expect(byOutcome.get('success')).toBeGreaterThan(20);
    expect(byOutcome.get('input_required')).toBeGreaterThan(5);
    // The total is what can be billed: admitted calls only, never the input rounds.
    const inputRounds = byOutcome.get('input_required') ?? 0;
    const all = [...byOutcome.values()].reduce((sum, records) => sum + records, 0);
    expect(usage.total).toBeLessThanOrEqual(all - inputRounds);
  });
});
