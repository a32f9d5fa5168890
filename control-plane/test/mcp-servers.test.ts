import { createServer } from 'node:http';
import { mcpServerKey } from '@mcp-meter/contracts/snapshots';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';

/** The MCP server registry and the snapshots it writes for the proxy, on real PostgreSQL. */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// Response bodies are read field by field and each field is asserted, so the type stays loose here.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = Record<string, any>;

async function seller(name = 'Registry') {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const call = injectClient(harness.controlPlane, sandboxKey);
  const product = (await call('POST', '/v1/ui/products', { name: 'Tools', isMcpPay: true })).body;
  const free = (
    await call('POST', `/v1/ui/products/${product.id}/plans`, { name: 'Free', type: 'recurring', limit: 100 })
  ).body;
  const paid = (
    await call('POST', `/v1/ui/products/${product.id}/plans`, { name: 'Pro', type: 'recurring', price: 900 })
  ).body;
  return { call, product, free, paid };
}
const snapshot = async (subdomain: string) =>
  JSON.parse((await harness.snapshots.get(mcpServerKey(subdomain))) ?? 'null');
const unique = () => `srv-${Math.random().toString(36).slice(2, 8)}`;

describe('MCP server registry', () => {
  it('registers a server with its product, free default plan and gated tools, and publishes them to the proxy', async () => {
    const { call, product, free, paid } = await seller();
    const name = unique();
    const created = await call('POST', '/v1/ui/mcp-servers', {
      name,
      url: 'http://127.0.0.1:3000/mcp',
      productId: product.id,
      defaultPlanId: free.reference,
      avatarUrl: 'https://example.com/a.png',
      tools: [
        { name: 'search', noPlan: true, description: 'free' },
        { name: 'deep_search', planIds: [paid.reference] },
      ],
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name,
      subdomain: name,
      productId: product.id,
      defaultPlanId: free.reference,
      status: 'active',
      hasAuthApiKey: false,
      tools: [
        { name: 'search', planIds: [], noPlan: true, description: 'free', isVirtual: false },
        { name: 'deep_search', planIds: [paid.reference], noPlan: false, description: '', isVirtual: false },
      ],
    });
    expect(created.body.mcpProxyUrl).toMatch(new RegExp(`/mcp/${name}$`));
    expect(await snapshot(name)).toMatchObject({
      serverId: created.body.id,
      status: 'active',
      defaultPlanId: free.reference,
      tools: [
        { name: 'search', noPlan: true },
        { name: 'deep_search', planIds: [paid.reference] },
      ],
    });
    expect((await call('GET', `/v1/ui/mcp-servers/${name}`)).body.id).toBe(created.body.id);
  });

  it.each([
    [{ defaultPlanId: 'paid' }, '/defaultPlanId'],
    [{ defaultPlanId: 'pln_other' }, '/defaultPlanId'],
    [{ productId: undefined, defaultPlanId: 'free' }, '/defaultPlanId'],
    [{ tools: [{ name: 'a' }, { name: 'a' }] }, '/tools/1/name'],
    [{ tools: [{ name: 'a', planIds: ['pln_nope'] }] }, '/tools/0/planIds/0'],
    [{ tools: [{ name: 'a', noPlan: true, planIds: ['free'] }] }, '/tools/0/planIds'],
    [{ name: '!!' }, '/name'],
    [{ url: 'ftp://origin' }, '/url'],
  ])('refuses %j naming the field, and registers nothing', async (change, path) => {
    const { call, product, free, paid } = await seller();
    const resolve = (v: unknown) => (v === 'free' ? free.reference : v === 'paid' ? paid.reference : v);
    const body: Json = { name: unique(), url: 'http://127.0.0.1:3000/mcp', productId: product.id, ...change };
    if (body.defaultPlanId !== undefined) body.defaultPlanId = resolve(body.defaultPlanId);
    if (Array.isArray(body.tools))
      body.tools = body.tools.map((t: Json) => ({
        ...t,
        ...(t.planIds ? { planIds: t.planIds.map(resolve) } : {}),
      }));
    const response = await call('POST', '/v1/ui/mcp-servers', body);
    expect(response.status).toBe(400);
    expect(response.body.errors.map((e: Json) => e.path)).toContain(path);
    expect((await call('GET', '/v1/ui/mcp-servers')).body).toEqual([]);
  });

  it('updates and deletes, keeping the snapshot in step; a deleted subdomain can be taken again', async () => {
    const { call, product, free } = await seller();
    const name = unique();
    const id = (
      await call('POST', '/v1/ui/mcp-servers', {
        name,
        url: 'http://127.0.0.1:3000/mcp',
        productId: product.id,
      })
    ).body.id;
    const patched = await call('PATCH', `/v1/ui/mcp-servers/${id}`, {
      status: 'suspended',
      url: 'http://127.0.0.1:3001/mcp',
      defaultPlanId: free.reference,
    });
    expect(patched.body).toMatchObject({
      status: 'suspended',
      url: 'http://127.0.0.1:3001/mcp',
      defaultPlanId: free.reference,
    });
    expect(await snapshot(name)).toMatchObject({
      status: 'suspended',
      originUrl: 'http://127.0.0.1:3001/mcp',
    });
    expect((await call('PATCH', `/v1/ui/mcp-servers/${id}`, { productId: null })).body.errors[0].path).toBe(
      '/defaultPlanId',
    );

    const duplicate = await call('POST', '/v1/ui/mcp-servers', { name, url: 'http://127.0.0.1:3000/mcp' });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.code).toBe('subdomain_taken');
    const other = await seller('Other');
    expect((await other.call('GET', `/v1/ui/mcp-servers/${id}`)).status).toBe(404);
    expect((await other.call('PATCH', `/v1/ui/mcp-servers/${id}`, { status: 'active' })).status).toBe(404);

    expect((await call('DELETE', `/v1/ui/mcp-servers/${id}`)).body).toEqual({ id, deleted: true });
    expect((await call('GET', `/v1/ui/mcp-servers/${id}`)).body.code).toBe('mcp_server_not_found');
    expect(await snapshot(name)).toBeNull();
    expect((await call('GET', '/v1/ui/mcp-servers')).body).toEqual([]);
    expect(
      (await other.call('POST', '/v1/ui/mcp-servers', { name, url: 'http://127.0.0.1:4000/mcp' })).status,
    ).toBe(201);
  });

  it('keeps the browser origins a server allows, written exactly as browsers send them', async () => {
    const { call } = await seller('Origins');
    const name = unique();
    const created = await call('POST', '/v1/ui/mcp-servers', { name, url: 'http://127.0.0.1:3000/mcp' });
    expect(created.body.allowedOrigins).toEqual([]);
    expect((await snapshot(name)).allowedOrigins).toEqual([]);
    const id = created.body.id as string;
    const patched = await call('PATCH', `/v1/ui/mcp-servers/${id}`, {
      allowedOrigins: ['https://app.example', 'http://localhost:5173', 'http://[::1]:8080'],
    });
    expect(patched.status).toBe(200);
    expect((await snapshot(name)).allowedOrigins).toEqual([
      'https://app.example',
      'http://localhost:5173',
      'http://[::1]:8080',
    ]);
    const refused = await call('PATCH', `/v1/ui/mcp-servers/${id}`, {
      allowedOrigins: [
        'https://ok.example',
        'https://App.example',
        'https://app.example/',
        '*',
        'ftp://x.example',
        'https://a.example:443',
      ],
    });
    expect(refused.status).toBe(400);
    expect(refused.body.errors.map((e: { path: string }) => e.path)).toEqual([
      '/allowedOrigins/1',
      '/allowedOrigins/2',
      '/allowedOrigins/3',
      '/allowedOrigins/4',
      '/allowedOrigins/5',
    ]);
    expect(refused.body.errors[0].message).toContain('https://app.example');
    expect((await call('GET', `/v1/ui/mcp-servers/${id}`)).body.allowedOrigins).toHaveLength(3);
  });

  it('keeps origin keys write-only and sealed, and starts even when one was sealed under another secret', async () => {
    const { call } = await seller('Sealed');
    const name = unique();
    const created = await call('POST', '/v1/ui/mcp-servers', {
      name,
      url: 'http://127.0.0.1:4000/mcp',
      authHeaderName: 'X-Api-Key',
      authApiKey: 'origin-key-42',
    });
    expect(created.body).toMatchObject({ hasAuthApiKey: true, authHeaderName: 'X-Api-Key' });
    expect(JSON.stringify(created.body)).not.toContain('origin-key-42');
    const { rows } = await harness.pool.query<{ auth_api_key_sealed: string }>(
      'SELECT auth_api_key_sealed FROM mcp_servers WHERE id = $1',
      [created.body.id],
    );
    expect(rows[0]?.auth_api_key_sealed).toMatch(/^v1\./);
    expect(rows[0]?.auth_api_key_sealed).not.toContain('origin-key-42');
    const snap = await snapshot(name);
    expect(snap.originAuth.header).toBe('x-api-key');
    expect(JSON.stringify(snap)).not.toContain('origin-key-42');
    // Sealed under a different SECRET_KEY: that server is skipped and logged, the rest publish.
    await harness.pool.query(
      `UPDATE mcp_servers SET auth_api_key_sealed = 'v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.AAAA' WHERE id = $1`,
      [created.body.id],
    );
    await expect(harness.controlPlane.mcpServers.publishAll()).resolves.toBeGreaterThan(0);
    expect(
      (await call('PATCH', `/v1/ui/mcp-servers/${created.body.id}`, { authApiKey: null })).body,
    ).toMatchObject({
      hasAuthApiKey: false,
    });
    expect((await snapshot(name)).originAuth).toBeNull();
  });

  it('refuses origin URLs at internal addresses or privileged ports, and never echoes what an origin answered', async () => {
    const { call, product } = await seller('Guarded');
    let internal = 0;
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'http://10.0.0.5/mcp',
      'http://127.0.0.2:8080/mcp', // loopback, and only 127.0.0.1 is allow-listed here
      'http://localhost:8080/mcp', // a name that resolves to loopback
      'http://[::1]:8080/mcp',
      'http://[::ffff:7f00:1]/mcp',
      'http://[64:ff9b::a9fe:a9fe]/',
      'http://93.184.216.34:22/mcp',
      'http://user:pw@example.com/mcp',
    ]) {
      const refused = await call('POST', '/v1/ui/mcp-servers', {
        name: unique(),
        url,
        productId: product.id,
      });
      expect({ url, status: refused.status }).toEqual({ url, status: 400 });
      expect(refused.body.code).toBe('validation_failed');
      // An internal address says which setting a private deployment would change (issue 60).
      if (/internal address/.test(JSON.stringify(refused.body))) {
        expect(JSON.stringify(refused.body)).toContain('OUTBOUND_ALLOWED_HOSTS');
        internal++;
      }
    }
    expect(internal).toBeGreaterThanOrEqual(6);
    const kept = await call('POST', '/v1/ui/mcp-servers', {
      name: unique(),
      url: 'http://127.0.0.1:3000/mcp',
      productId: product.id,
    });
    expect(kept.status).toBe(201);
    const moved = await call('PATCH', `/v1/ui/mcp-servers/${kept.body.id}`, { url: 'http://10.1.1.1/mcp' });
    expect(moved.status).toBe(400);

    // An origin that answers with something worth stealing: the import error names the failure only.
    const origin = createServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('SECRET-METADATA-TOKEN');
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const address = origin.address();
    const port = address !== null && typeof address === 'object' ? address.port : 0;
    try {
      const server = await call('POST', '/v1/ui/mcp-servers', {
        name: unique(),
        url: `http://127.0.0.1:${port}/mcp`,
        productId: product.id,
      });
      const imported = await call('POST', `/v1/ui/mcp-servers/${server.body.id}/tools/import`);
      expect(imported.status).toBe(422);
      expect(imported.body.code).toBe('origin_unreachable');
      expect(JSON.stringify(imported.body)).not.toContain('SECRET');
      expect(imported.body.detail).toContain('HTTP 500');
      // The health check reads the same origin: unhealthy, with why, and still nothing it answered.
      const health = await call('GET', `/v1/ui/mcp-servers/${server.body.id}/health`);
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ healthy: false, toolCount: null, serverName: null });
      expect(health.body.problem).toContain('HTTP 500');
      expect(JSON.stringify(health.body)).not.toContain('SECRET');
    } finally {
      origin.closeAllConnections();
      await new Promise<void>((resolve) => origin.close(() => resolve()));
    }
  });
});
