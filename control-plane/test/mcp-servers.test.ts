import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { mcpServerKey } from '../src/snapshots/format';

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
  const call = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
    const r = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: r.statusCode, body: r.json() as Json };
  };
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
      url: 'https://origin.example/mcp',
      defaultPlanId: free.reference,
    });
    expect(patched.body).toMatchObject({
      status: 'suspended',
      url: 'https://origin.example/mcp',
      defaultPlanId: free.reference,
    });
    expect(await snapshot(name)).toMatchObject({
      status: 'suspended',
      originUrl: 'https://origin.example/mcp',
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
});
