import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { expect } from 'vitest';
import { apiClient } from './api';
import { customerWithToken, type ProviderKeys, suffix } from './flows';
import { runAdmin, type Service, type StackName, sharedStackEnv, spawnSplitStack } from './processes';

/** What a conformance run through the proxy talks to, and what it was metered as. */
export interface ProxiedOrigin {
  /** The loopback relay in front of the proxy that adds the customer's token. */
  relayUrl: string;
  customerRef: string;
}

/**
 * The split stack (control plane with ingest, one proxy) that the conformance suites run
 * through, with a provider whose default plan leaves plenty of calls. The suite cannot send an
 * access token, so each registered origin gets a loopback relay that adds the customer's
 * `Authorization` header (what any configured client does) and passes everything else, `Host`
 * and `Origin` included, as it came.
 */
export async function conformanceStack(
  name: StackName,
  infra: Parameters<typeof sharedStackEnv>[0]['infra'],
) {
  const dir = mkdtempSync(join(tmpdir(), `mcpmeter-${name}-`));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const proxyPort = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const env = sharedStackEnv({
    name,
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
  const services: Service[] = stack.services;
  const relays: Server[] = [];
  await stack.ready;
  const provider = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Conformance Co'], env);
  const api = apiClient(baseUrl, provider.sandboxKey);
  const product = (await api<{ id: string }>('POST', '/v1/ui/products', { name: 'Everything' })).body;
  const plan = (
    await api<{ id: string }>('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Plenty',
      currency: 'usd',
      type: 'recurring',
      billingCycle: 'monthly',
      price: 0,
      limit: 1_000_000,
      default: true,
    })
  ).body;

  /** Registers `originUrl` as an MCP server and puts a relay with a new customer's token before it. */
  const proxied = async (originUrl: string): Promise<ProxiedOrigin> => {
    const relayPort = await freePort();
    const relayUrl = `http://127.0.0.1:${relayPort}/mcp`;
    const registered = await api<{ subdomain: string }>('POST', '/v1/ui/mcp-servers', {
      name: `everything-${suffix()}`,
      url: originUrl,
      productId: product.id,
      defaultPlanId: plan.id,
      // The suite's "valid localhost" request carries the Origin of the URL it was given.
      allowedOrigins: [new URL(relayUrl).origin],
    });
    expect(registered.status).toBe(201);
    const customer = await customerWithToken(api);
    const target = new URL(`http://127.0.0.1:${proxyPort}/mcp/${registered.body.subdomain}`);
    const relay = createServer((req, res) => {
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
    relays.push(relay);
    return { relayUrl, customerRef: customer.ref };
  };

  const close = async () => {
    for (const relay of relays) {
      relay.closeAllConnections();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
    }
    await Promise.all(services.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  return { api, proxied, close };
}
