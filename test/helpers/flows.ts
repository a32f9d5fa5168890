import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'vitest';
import { apiClient } from './api';
import { startMcpOrigin } from './mcp-origin';
import { pollUntil } from './poll';

export interface ProviderKeys {
  id: string;
  sandboxKey: string;
  liveKey: string;
}

interface UsageTotal {
  total: number;
  records: number;
  meterRef: string;
}

export const suffix = () => randomBytes(4).toString('hex');

/** A new customer of the provider `api` speaks for, with an access token minted for it. */
export async function customerWithToken(api: ReturnType<typeof apiClient>) {
  const customer = (await api<{ reference: string }>('POST', '/v1/sdk/customers', {})).body;
  const token = await api<{ accessToken: string }>(
    'POST',
    `/v1/sdk/customers/${customer.reference}/tokens`,
    {},
  );
  return { ref: customer.reference, token: token.body.accessToken };
}

/**
 * The core promise of the product end to end: a provider sells a usage-based plan, usage sent
 * with its sandbox key is counted exactly (decimals, duplicates), and its live key sees none of it.
 */
export async function sellAndMeterFlow(baseUrl: string, provider: ProviderKeys): Promise<void> {
  const sandbox = apiClient(baseUrl, provider.sandboxKey);
  const live = apiClient(baseUrl, provider.liveKey);

  const product = await sandbox('POST', '/v1/ui/products', {
    name: 'Weather API',
    reference: `weather-${suffix()}`,
  });
  expect(product.status).toBe(201);
  const plan = await sandbox<{ meterRef: string; type: string; price: number }>(
    'POST',
    `/v1/ui/products/${product.body.reference}/plans`,
    { name: 'Pay as you go', type: 'usage-based', price: 2, currency: 'usd', freeUnits: 100, limit: 10_000 },
  );
  expect(plan.status).toBe(201);
  expect(plan.body.meterRef).toMatch(/^mtr_/);

  // 10 × 0.1 + 5 × 2 + 1 (default value) = 12 exactly; a float sum would give 11.999…
  // Usage is kept under the customer's id; events may name it by externalRef.
  for (const externalRef of ['cus_alice', 'cus_bob'])
    expect((await sandbox('POST', '/v1/sdk/customers', { externalRef })).status).toBe(201);
  const values = [...Array(10).fill(0.1), ...Array(5).fill(2), undefined];
  const accepted = await Promise.all(
    values.map((value) =>
      sandbox('POST', '/v1/sdk/meter-events', {
        customerRef: 'cus_alice',
        ...(value === undefined ? {} : { value }),
      }),
    ),
  );
  expect(accepted.map((r) => r.status)).toEqual(values.map(() => 202));
  // The same record sent twice counts once.
  for (let i = 0; i < 2; i++) {
    const dup = await sandbox('POST', '/v1/sdk/meter-events', {
      customerRef: 'cus_bob',
      value: 7,
      id: 'order-42',
    });
    expect(dup.status).toBe(202);
  }

  const total = await pollUntil(
    async () => (await sandbox<UsageTotal>('GET', `/ui/meters/${plan.body.meterRef}/usage`)).body,
    (body) => body.records >= 17,
    { what: 'sandbox usage total', timeoutMs: 30_000 },
  );
  expect(total).toMatchObject({ total: 19, records: 17, meterRef: plan.body.meterRef });
  const alice = await sandbox<UsageTotal>('GET', '/ui/meters/requests/usage?customerRef=cus_alice');
  expect(alice.body).toMatchObject({ total: 12, records: 16 });

  const liveTotal = await live<UsageTotal>('GET', '/ui/meters/requests/usage');
  expect(liveTotal.status).toBe(200);
  expect(liveTotal.body).toMatchObject({ total: 0, records: 0 });
  // The sandbox meter id means nothing in live.
  expect((await live('GET', `/ui/meters/${plan.body.meterRef}/usage`)).status).toBe(404);
}

/**
 * The official MCP SDK client calls a tool of a real SDK-built MCP server through the proxy,
 * sees the origin's answer, and exactly one usage record appears for the one tools/call.
 */
export async function mcpThroughProxyFlow(
  baseUrl: string,
  provider: ProviderKeys,
  /** Mints a valid token of another provider, which this provider's server must refuse. */
  other: () => Promise<string>,
): Promise<void> {
  const sandbox = apiClient(baseUrl, provider.sandboxKey);
  const origin = await startMcpOrigin();
  try {
    const registered = await sandbox<{ mcpProxyUrl: string; subdomain: string }>(
      'POST',
      '/v1/ui/mcp-servers',
      {
        name: `calc-${suffix()}`,
        url: origin.url,
      },
    );
    expect(registered.status).toBe(201);

    const customer = await sandbox<{ reference: string }>('POST', '/v1/sdk/customers', {
      externalRef: `mcp-user-${suffix()}`,
    });
    const token = await sandbox<{ accessToken: string }>(
      'POST',
      `/v1/sdk/customers/${customer.body.reference}/tokens`,
      {},
    );
    expect(token.status).toBe(201);

    // Without a valid token the proxy refuses with a Bearer challenge, before the origin is called.
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const attempt = (authorization?: string) =>
      fetch(registered.body.mcpProxyUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(authorization === undefined ? {} : { authorization }),
        },
        body: JSON.stringify(initialize),
      });
    const anonymous = await attempt();
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(
      /^Bearer realm="mcp", resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/mcp\/[a-z0-9-]+", scope="mcp"$/,
    );
    const garbage = await attempt('Bearer not.a.token');
    expect(garbage.status).toBe(401);
    expect(garbage.headers.get('www-authenticate')).toContain('error="invalid_token"');
    // Another provider's token finds no server here (404, as for a server that does not exist).
    expect((await attempt(`Bearer ${await other()}`)).status).toBe(404);

    const client = new Client({ name: 'e2e-client', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(registered.body.mcpProxyUrl), {
      requestInit: { headers: { authorization: `Bearer ${token.body.accessToken}` } },
    });
    await client.connect(transport);
    expect(transport.sessionId).toBeTruthy();
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name).sort()).toEqual(['add', 'announce', 'countdown', 'fail']);
    const result = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    expect(result.content).toEqual([{ type: 'text', text: '5' }]);
    await transport.terminateSession();
    await client.close();

    const usage = await pollUntil(
      async () =>
        (await sandbox<UsageTotal>('GET', `/ui/meters/requests/usage?customerRef=${customer.body.reference}`))
          .body,
      (body) => body.records >= 1,
      { what: 'proxy usage record', timeoutMs: 30_000 },
    );
    expect(usage).toMatchObject({ total: 1, records: 1 });
    // Nothing else trickles in later: initialize and tools/list are not metered.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await sandbox<UsageTotal>('GET', '/ui/meters/requests/usage')).body).toMatchObject({
      records: 1,
    });

    // The proxy honours the registry: a suspended server answers 503, a deleted one 404, once
    // its cached snapshot expires.
    const bearer = `Bearer ${token.body.accessToken}`;
    expect(
      (await sandbox('PATCH', `/v1/ui/mcp-servers/${registered.body.subdomain}`, { status: 'suspended' }))
        .status,
    ).toBe(200);
    await pollUntil(
      async () => (await attempt(bearer)).status,
      (s) => s === 503,
      { what: 'suspended server refused', timeoutMs: 20_000 },
    );
    expect((await sandbox('DELETE', `/v1/ui/mcp-servers/${registered.body.subdomain}`)).status).toBe(200);
    await pollUntil(
      async () => (await attempt(bearer)).status,
      (s) => s === 404,
      { what: 'deleted server gone', timeoutMs: 20_000 },
    );
  } finally {
    await origin.close();
  }
}

/** A valid customer token of another provider (for refusal checks). */
export async function foreignToken(baseUrl: string, provider: ProviderKeys): Promise<string> {
  const api = apiClient(baseUrl, provider.sandboxKey);
  const customer = await api<{ reference: string }>('POST', '/v1/sdk/customers', {});
  return (
    await api<{ accessToken: string }>('POST', `/v1/sdk/customers/${customer.body.reference}/tokens`, {})
  ).body.accessToken;
}
