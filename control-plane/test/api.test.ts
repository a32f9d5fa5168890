import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import type { Pool } from '../src/db/pool';
import type { ControlPlane } from '../src/service';

/**
 * The HTTP API through the real Fastify app (inject) on real PostgreSQL and real ClickHouse
 * (chdb). Each test creates its own provider, so tests never see each other's rows.
 */
let harness: TestControlPlane;
let pool: Pool;
let controlPlane: ControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 64 * 1024 });
  ({ pool, controlPlane } = harness);
});

afterAll(() => harness?.close());

async function newProvider(options: { liveEnabled?: boolean } = {}) {
  return controlPlane.providers.create({
    displayName: 'Test Provider',
    legalName: 'Test Provider Ltd',
    ...options,
  });
}

function call(key: string | undefined, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) {
  return controlPlane.app.inject({
    method,
    url,
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
    ...(body === undefined
      ? {}
      : typeof body === 'string'
        ? { payload: body, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } }
        : { payload: body as object }),
  });
}

async function countRows(table: 'products' | 'plans' | 'outbox_events', providerId: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM ${table} WHERE provider_id = $1`,
    [providerId],
  );
  return Number(rows[0]?.n);
}

describe('authentication', () => {
  it('a request without a key is refused with 401 unauthorized and a Bearer challenge', async () => {
    const response = await call(undefined, 'GET', '/v1/sdk/merchant');
    expect(response.statusCode).toBe(401);
    expect(response.headers['content-type']).toContain('application/problem+json');
    expect(response.headers['www-authenticate']).toContain('Bearer');
    expect(response.json()).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it.each([
    ['an unknown key', 'sk_test_doesnotexist'],
    ['a malformed key', 'not-a-key'],
    ['a publishable-looking key', 'pk_test_123'],
  ])('%s is refused with 401 invalid_api_key', async (_name, key) => {
    const response = await call(key, 'GET', '/v1/sdk/merchant');
    expect(response.statusCode).toBe(401);
    expect(response.json().code).toBe('invalid_api_key');
  });

  it('a sandbox key cannot pose as live by changing its prefix', async () => {
    const { sandboxKey } = await newProvider();
    const response = await call(sandboxKey.replace('sk_test_', 'sk_live_'), 'GET', '/v1/sdk/merchant');
    expect(response.statusCode).toBe(401);
  });

  it('GET /v1/sdk/merchant answers the merchant identity of spec 2.1', async () => {
    const { sandboxKey, liveKey } = await newProvider();
    for (const key of [sandboxKey, liveKey]) {
      const response = await call(key, 'GET', '/v1/sdk/merchant');
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({ displayName: 'Test Provider', legalName: 'Test Provider Ltd' });
    }
  });

  it('a live key of a provider not activated in live answers 404 provider_not_found_in_environment', async () => {
    const { liveKey, sandboxKey } = await newProvider({ liveEnabled: false });
    const response = await call(liveKey, 'GET', '/v1/sdk/merchant');
    expect(response.statusCode).toBe(404);
    expect(response.json()).toMatchObject({
      code: 'provider_not_found_in_environment',
      requestedEnvironment: 'live',
      providerExistsInSandbox: true,
    });
    expect((await call(sandboxKey, 'GET', '/v1/sdk/merchant')).statusCode).toBe(200);
  });
});

describe('products', () => {
  it('are created, fetched by id or reference, listed with a cursor, updated and archived, each with its event', async () => {
    const { sandboxKey, provider } = await newProvider();
    const created = await call(sandboxKey, 'POST', '/v1/ui/products', {
      name: 'Search API',
      reference: 'search',
      description: 'Full-text search',
      productType: 'mcp_server',
      isMcpPay: true,
      metadata: { team: 'core' },
    });
    expect(created.statusCode).toBe(201);
    const product = created.json();
    expect(product).toMatchObject({
      reference: 'search',
      status: 'active',
      productType: 'mcp_server',
      isMcpPay: true,
    });
    expect(product.id).toMatch(/^prd_/);
    expect((await call(sandboxKey, 'GET', '/v1/ui/products/search')).json().id).toBe(product.id);
    expect((await call(sandboxKey, 'GET', `/v1/ui/products/${product.id}`)).json().reference).toBe('search');

    for (const name of ['B', 'C'])
      expect((await call(sandboxKey, 'POST', '/v1/ui/products', { name })).statusCode).toBe(201);
    const first = (await call(sandboxKey, 'GET', '/v1/ui/products?limit=2')).json();
    expect(first.data).toHaveLength(2);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = (
      await call(sandboxKey, 'GET', `/v1/ui/products?limit=2&cursor=${first.nextCursor}`)
    ).json();
    expect(second.data).toHaveLength(1);
    expect(second.nextCursor).toBeNull();

    const updated = await call(sandboxKey, 'PATCH', '/v1/ui/products/search', {
      name: 'Search API v2',
      description: null,
    });
    expect(updated.json()).toMatchObject({ name: 'Search API v2', description: null });
    const archived = await call(sandboxKey, 'POST', '/v1/ui/products/search/archive');
    expect(archived.json().status).toBe('archived');
    expect((await call(sandboxKey, 'GET', '/v1/ui/products?status=archived')).json().data).toHaveLength(1);

    const { rows } = await pool.query<{
      type: string;
      payload: { livemode: boolean; data: { object: { reference: string } } };
    }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1 AND payload->'data'->'object'->>'id' = $2 ORDER BY created_at, id`,
      [provider.id, product.id],
    );
    expect(rows.map((r) => r.type)).toEqual(['product.created', 'product.updated', 'product.archived']);
    expect(rows[0]?.payload.livemode).toBe(false);
  });

  it('a second product with the same reference is a 409 and nothing is written', async () => {
    const { sandboxKey, provider } = await newProvider();
    expect(
      (await call(sandboxKey, 'POST', '/v1/ui/products', { name: 'A', reference: 'dup' })).statusCode,
    ).toBe(201);
    const before = await countRows('outbox_events', provider.id);
    const response = await call(sandboxKey, 'POST', '/v1/ui/products', { name: 'B', reference: 'dup' });
    expect(response.statusCode).toBe(409);
    expect(response.json().code).toBe('reference_taken');
    expect(await countRows('products', provider.id)).toBe(1);
    expect(await countRows('outbox_events', provider.id)).toBe(before);
  });

  it('another provider, or the same provider in live, cannot see a sandbox product', async () => {
    const owner = await newProvider();
    const other = await newProvider();
    const product = (
      await call(owner.sandboxKey, 'POST', '/v1/ui/products', { name: 'Private', reference: 'private' })
    ).json();
    for (const key of [other.sandboxKey, other.liveKey, owner.liveKey]) {
      for (const ref of [product.id, 'private']) {
        const response = await call(key, 'GET', `/v1/ui/products/${ref}`);
        expect(response.statusCode).toBe(404);
        expect(response.json().code).toBe('product_not_found');
      }
    }
    expect((await call(owner.liveKey, 'GET', '/v1/ui/products')).json().data).toEqual([]);
  });
});

describe('plans', () => {
  async function productFor(key: string) {
    return (await call(key, 'POST', '/v1/ui/products', { name: 'Weather' })).json() as { id: string };
  }

  it('POST /v1/ui/products/{id}/plans answers 201 with the plan of spec 2.2 and the requests meter', async () => {
    const { sandboxKey } = await newProvider();
    const product = await productFor(sandboxKey);
    const response = await call(sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      description: 'For teams',
      type: 'hybrid',
      billingCycle: 'monthly',
      price: 1,
      basePrice: 4900,
      currency: 'EUR',
      creditsPerUnit: 2,
      freeUnits: 1000,
      limit: 50_000,
      setupFee: 500,
      trialDays: 14,
      rolloverUnusedUnits: true,
      autoRenew: true,
      status: 'active',
      maxActiveUsers: 5,
      default: true,
      limits: { requests: 50_000 },
      features: { sso: true, seats: 5 },
      metadata: { tier: 'pro' },
      usageTracking: { method: 'automatic', granularity: 'hourly' },
    });
    expect(response.statusCode).toBe(201);
    const plan = response.json();
    expect(plan).toMatchObject({
      type: 'hybrid',
      price: 1,
      basePrice: 4900,
      currency: 'eur',
      currencySymbol: '€',
      requiresPayment: true,
      isActive: true,
      status: 'active',
      billingCycle: 'monthly',
      billingModel: 'pre-paid',
      creditsPerUnit: 2,
      measures: 'requests',
      limit: 50_000,
      default: true,
      features: { sso: true, seats: 5 },
    });
    expect(plan.reference).toMatch(/^pln_/);
    expect(plan.meterRef).toMatch(/^mtr_/);
    expect(Date.parse(plan.createdAt)).not.toBeNaN();
  });

  it('a usage-based plan defaults to post-paid monthly, and a recurring plan has no meter', async () => {
    const { sandboxKey } = await newProvider();
    const product = await productFor(sandboxKey);
    const usage = (
      await call(sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'PAYG',
        type: 'usage-based',
        price: 3,
      })
    ).json();
    expect(usage).toMatchObject({
      billingModel: 'post-paid',
      billingCycle: 'monthly',
      currency: 'usd',
      currencySymbol: '$',
    });
    expect(usage.meterRef).toMatch(/^mtr_/);
    const recurring = (
      await call(sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Basic',
        type: 'recurring',
        price: 900,
      })
    ).json();
    expect(recurring).toMatchObject({
      meterRef: null,
      measures: null,
      billingModel: 'pre-paid',
      autoRenew: true,
    });
    const free = (
      await call(sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Free',
        type: 'recurring',
      })
    ).json();
    expect(free.requiresPayment).toBe(false);
  });

  it.each([
    ['a missing name', { type: 'recurring' }, '/name'],
    ['an empty name', { name: '', type: 'recurring' }, '/name'],
    ['an unknown type', { name: 'X', type: 'monthly' }, '/type'],
    ['a price given as a string', { name: 'X', type: 'recurring', price: '10' }, '/price'],
    ['a fractional price', { name: 'X', type: 'recurring', price: 9.99 }, '/price'],
    ['a negative price', { name: 'X', type: 'recurring', price: -1 }, '/price'],
    ['creditsPerUnit 0', { name: 'X', type: 'usage-based', creditsPerUnit: 0 }, '/creditsPerUnit'],
    ['an unknown billing cycle', { name: 'X', type: 'recurring', billingCycle: 'daily' }, '/billingCycle'],
    ['an unknown billing model', { name: 'X', type: 'recurring', billingModel: 'later' }, '/billingModel'],
    ['an unknown currency', { name: 'X', type: 'recurring', currency: 'ZZZ' }, '/currency'],
    ['an unknown field', { name: 'X', type: 'recurring', colour: 'red' }, '/colour'],
    ['status archived at creation', { name: 'X', type: 'recurring', status: 'archived' }, '/status'],
    [
      'a one-time plan with a billing cycle',
      { name: 'X', type: 'one-time', billingCycle: 'monthly' },
      '/billingCycle',
    ],
    ['a one-time plan with a trial', { name: 'X', type: 'one-time', trialDays: 7 }, '/trialDays'],
    [
      'a custom cycle without its length',
      { name: 'X', type: 'recurring', billingCycle: 'custom' },
      '/billingIntervalDays',
    ],
    ['free units on a recurring plan', { name: 'X', type: 'recurring', freeUnits: 10 }, '/freeUnits'],
    ['a base price on a usage-based plan', { name: 'X', type: 'usage-based', basePrice: 100 }, '/basePrice'],
    [
      'an unknown tracking method',
      { name: 'X', type: 'usage-based', usageTracking: { method: 'magic', granularity: 'hourly' } },
      '/usageTracking/method',
    ],
    ['metadata with a non-string value', { name: 'X', type: 'recurring', metadata: { a: 1 } }, '/metadata/a'],
    ['a negative limit', { name: 'X', type: 'usage-based', limit: -5 }, '/limit'],
  ])(
    'refuses %s with 400 validation_failed naming the field, and writes nothing',
    async (_name, body, path) => {
      const { sandboxKey, provider } = await newProvider();
      const product = await productFor(sandboxKey);
      const events = await countRows('outbox_events', provider.id);
      const response = await call(sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, body);
      expect(response.statusCode).toBe(400);
      const problem = response.json();
      expect(problem.code).toBe('validation_failed');
      expect(problem.errors.map((e: { path: string }) => e.path)).toContain(path);
      expect(await countRows('plans', provider.id)).toBe(0);
      expect(await countRows('outbox_events', provider.id)).toBe(events);
    },
  );

  it('bad JSON, an oversized body and a wrong content type get 400, 413 and 415 with codes', async () => {
    const { sandboxKey } = await newProvider();
    const product = await productFor(sandboxKey);
    const url = `/v1/ui/products/${product.id}/plans`;
    const badJson = await call(sandboxKey, 'POST', url, '{"name": ');
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().code).toBe('invalid_json');
    const huge = await call(sandboxKey, 'POST', url, { name: 'x'.repeat(100_000), type: 'recurring' });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().code).toBe('payload_too_large');
    const text = await controlPlane.app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${sandboxKey}`, 'content-type': 'text/plain' },
      payload: 'name=x',
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().code).toBe('unsupported_media_type');
  });

  it('an unknown or foreign product gets 404 product_not_found; an archived one 409', async () => {
    const owner = await newProvider();
    const other = await newProvider();
    const product = await productFor(owner.sandboxKey);
    const body = { name: 'X', type: 'recurring' };
    expect((await call(owner.sandboxKey, 'POST', '/v1/ui/products/prd_nope/plans', body)).json().code).toBe(
      'product_not_found',
    );
    expect(
      (await call(other.sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, body)).statusCode,
    ).toBe(404);
    expect((await call(owner.liveKey, 'POST', `/v1/ui/products/${product.id}/plans`, body)).statusCode).toBe(
      404,
    );
    await call(owner.sandboxKey, 'POST', `/v1/ui/products/${product.id}/archive`);
    const archived = await call(owner.sandboxKey, 'POST', `/v1/ui/products/${product.id}/plans`, body);
    expect(archived.statusCode).toBe(409);
    expect(archived.json().code).toBe('product_archived');
  });

  it('are listed, updated with cross-field checks, kept to one default per product, and archived', async () => {
    const { sandboxKey } = await newProvider();
    const product = await productFor(sandboxKey);
    const url = `/v1/ui/products/${product.id}/plans`;
    const a = (await call(sandboxKey, 'POST', url, { name: 'A', type: 'recurring', default: true })).json();
    const b = (await call(sandboxKey, 'POST', url, { name: 'B', type: 'recurring', default: true })).json();
    expect((await call(sandboxKey, 'GET', `/v1/ui/plans/${a.reference}`)).json().default).toBe(false);
    expect(b.default).toBe(true);

    const patched = await call(sandboxKey, 'PATCH', `/v1/ui/plans/${a.reference}`, {
      price: 1500,
      limit: 100,
    });
    expect(patched.json()).toMatchObject({ price: 1500, limit: 100, measures: 'requests' });
    const invalid = await call(sandboxKey, 'PATCH', `/v1/ui/plans/${a.reference}`, {
      billingCycle: 'custom',
    });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json().errors[0].path).toBe('/billingIntervalDays');
    const immutable = await call(sandboxKey, 'PATCH', `/v1/ui/plans/${a.reference}`, { type: 'one-time' });
    expect(immutable.statusCode).toBe(400);

    const archived = await call(sandboxKey, 'POST', `/v1/ui/plans/${a.reference}/archive`);
    expect(archived.json()).toMatchObject({ status: 'archived', isActive: false });
    expect(
      (await call(sandboxKey, 'PATCH', `/v1/ui/plans/${a.reference}`, { name: 'again' })).json().code,
    ).toBe('plan_archived');
    const list = (await call(sandboxKey, 'GET', `${url}?status=active`)).json();
    expect(list.data.map((p: { reference: string }) => p.reference)).toEqual([b.reference]);
  });
});

describe('usage API', () => {
  it('refuses malformed meter events naming the field, unknown meters with 404, and a reversed range with 400', async () => {
    const { sandboxKey } = await newProvider();
    await call(sandboxKey, 'POST', '/v1/sdk/customers', { externalRef: 'c' });
    const cases: [unknown, string][] = [
      [{}, '/customerRef'],
      [{ customerRef: '' }, '/customerRef'],
      [{ customerRef: 'c', value: -1 }, '/value'],
      [{ customerRef: 'c', value: 0.0000000001 }, '/value'],
      [{ customerRef: 'c', value: '3' }, '/value'],
      [{ customerRef: 'c', properties: [] }, '/properties'],
      [{ customerRef: 'c', timestamp: 'yesterday' }, '/timestamp'],
      [{ customerRef: 'c', timestamp: '2001-01-01T00:00:00Z' }, '/timestamp'],
      [{ customerRef: 'c', id: 'has space' }, '/id'],
      [{ customerRef: 'c', id: 'a', idempotencyKey: 'b' }, '/idempotencyKey'],
      [{ customerRef: 'c', extra: true }, '/extra'],
    ];
    for (const [body, path] of cases) {
      const response = await call(sandboxKey, 'POST', '/v1/sdk/meter-events', body);
      expect(response.statusCode, JSON.stringify(body)).toBe(400);
      expect(
        response.json().errors.map((e: { path: string }) => e.path),
        JSON.stringify(body),
      ).toContain(path);
    }
    const unknownMeter = await call(sandboxKey, 'POST', '/v1/sdk/meter-events', {
      customerRef: 'c',
      meterName: 'tokens',
    });
    expect(unknownMeter.statusCode).toBe(404);
    expect(unknownMeter.json().code).toBe('meter_not_found');
    const reversed = await call(sandboxKey, 'GET', '/ui/meters/requests/usage?from=2026-02-01&to=2026-01-01');
    expect(reversed.statusCode).toBe(400);
    const badDate = await call(sandboxKey, 'GET', '/ui/meters/requests/usage?from=soon');
    expect(badDate.json().errors[0].path).toBe('/from');
    // Nothing of the refused events reached the store.
    const total = await call(sandboxKey, 'GET', '/ui/meters/requests/usage');
    expect(total.json()).toMatchObject({ total: 0, records: 0 });
  });

  it('answers 202 with the record reference, and the total counts it in its time range only', async () => {
    const { sandboxKey } = await newProvider();
    const at = new Date(Date.now() - 3600_000).toISOString();
    const customer = (await call(sandboxKey, 'POST', '/v1/sdk/customers', { externalRef: 'c1' })).json();
    await call(sandboxKey, 'POST', '/v1/sdk/customers', { externalRef: 'someone-else' });
    const accepted = await call(sandboxKey, 'POST', '/v1/sdk/meter-events', {
      customerRef: 'c1',
      value: 4,
      timestamp: at,
    });
    expect(accepted.statusCode).toBe(202);
    expect(accepted.json()).toMatchObject({
      customerRef: customer.reference,
      value: 4,
      meterName: 'requests',
      timestamp: at,
    });
    const read = async (query: string) =>
      (await call(sandboxKey, 'GET', `/ui/meters/requests/usage${query}`)).json();
    for (let i = 0; i < 100 && (await read('')).records < 1; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await read('')).toMatchObject({ total: 4, records: 1 });
    expect(
      await read(`?from=${encodeURIComponent(new Date(Date.now() - 60_000).toISOString())}`),
    ).toMatchObject({ total: 0 });
    expect(await read('?customerRef=someone-else')).toMatchObject({ total: 0 });
  });
});

describe('OpenAPI', () => {
  it('GET /openapi.json describes every route from the route schemas', async () => {
    const response = await controlPlane.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    const spec = response.json();
    expect(spec.openapi).toBe('3.1.0');
    const routes = Object.entries(spec.paths as Record<string, Record<string, unknown>>).flatMap(
      ([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(routes).toEqual(
      expect.arrayContaining([
        'GET /v1/sdk/merchant',
        'POST /v1/ui/products',
        'GET /v1/ui/products',
        'GET /v1/ui/products/{id}',
        'PATCH /v1/ui/products/{id}',
        'POST /v1/ui/products/{id}/archive',
        'POST /v1/ui/products/{id}/plans',
        'GET /v1/ui/products/{id}/plans',
        'GET /v1/ui/plans/{planRef}',
        'PATCH /v1/ui/plans/{planRef}',
        'POST /v1/ui/plans/{planRef}/archive',
        'POST /v1/sdk/meter-events',
        'GET /ui/meters/{meterRef}/usage',
        'POST /v1/ui/mcp-servers',
        'GET /v1/ui/mcp-servers',
        'GET /v1/ui/mcp-servers/{id}',
      ]),
    );
    expect(
      spec.paths['/v1/ui/products/{id}/plans'].post.requestBody.content['application/json'].schema.properties
        .billingCycle.enum,
    ).toEqual(['weekly', 'monthly', 'quarterly', 'yearly', 'custom']);
  });
});
