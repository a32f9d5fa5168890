import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import type { Pool } from '../src/db/pool';
import type { ControlPlane } from '../src/service';

/** Merchant profile, customers and the credit ledger on real PostgreSQL, through Fastify. */
let harness: TestControlPlane;
let pool: Pool;
let controlPlane: ControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
  ({ pool, controlPlane } = harness);
});
afterAll(() => harness?.close());

// Response bodies are read field by field and each field is asserted, so the type stays loose here.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = Record<string, any>;

function client(key: string) {
  return async (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const response = await controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, ...headers },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json, headers: response.headers };
  };
}

async function events(
  providerId: string,
  prefix: string,
): Promise<{ type: string; object: Json; previous: Json | null }[]> {
  const { rows } = await pool.query<{ type: string; payload: Json }>(
    `SELECT type, payload FROM outbox_events WHERE provider_id = $1 AND type LIKE $2 ORDER BY created_at, id`,
    [providerId, `${prefix}%`],
  );
  return rows.map((r) => ({
    type: r.type,
    object: r.payload.data.object,
    previous: r.payload.data.previous_attributes,
  }));
}

describe('merchant profile', () => {
  it('every field of spec 2.1 is editable and GET /v1/sdk/merchant reflects it; null clears', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Acme' });
    const api = client(sandboxKey);
    const profile = {
      displayName: 'Acme Tools',
      legalName: 'Acme Tools Ltd',
      companyNumber: '12345678',
      country: 'gb',
      defaultCurrency: 'GBP',
      iconUrl: 'https://acme.example/icon.png',
      logoUrl: 'https://acme.example/logo.png',
      privacyUrl: 'https://acme.example/privacy',
      termsUrl: 'https://acme.example/terms',
      statementDescriptor: 'ACME TOOLS',
      supportedTopupCurrencies: ['gbp', 'EUR'],
      supportEmail: 'help@acme.example',
      supportUrl: 'https://acme.example/help',
      taxId: '12-3456789',
      vatNumber: 'GB123456789',
    };
    const patched = await api('PATCH', '/v1/sdk/merchant', profile);
    expect(patched.status).toBe(200);
    const expected = {
      ...profile,
      country: 'GB',
      defaultCurrency: 'gbp',
      supportedTopupCurrencies: ['gbp', 'eur'],
    };
    expect(patched.body).toEqual(expected);
    expect((await api('GET', '/v1/sdk/merchant')).body).toEqual(expected);
    const cleared = await api('PATCH', '/v1/sdk/merchant', { taxId: null, vatNumber: null });
    expect(cleared.body.taxId).toBeUndefined();
    expect(cleared.body.vatNumber).toBeUndefined();
  });

  it.each([
    [{ country: 'ZZ' }, '/country'],
    [{ defaultCurrency: 'xyz' }, '/defaultCurrency'],
    [{ termsUrl: 'javascript:alert(1)' }, '/termsUrl'],
    [{ logoUrl: 'not a url' }, '/logoUrl'],
    [{ statementDescriptor: 'AB<>' }, '/statementDescriptor'],
    [{ supportEmail: 'nobody' }, '/supportEmail'],
    [{ defaultCurrency: 'usd', supportedTopupCurrencies: ['eur'] }, '/supportedTopupCurrencies'],
    [{ displayName: '' }, '/displayName'],
    [{ colour: 'red' }, '/colour'],
  ])('refuses %j naming the field, and changes nothing', async (body, path) => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Before' });
    const api = client(sandboxKey);
    const response = await api('PATCH', '/v1/sdk/merchant', { displayName: 'After', ...body });
    expect(response.status).toBe(400);
    expect(response.body.errors.map((e: Json) => e.path)).toContain(path);
    expect((await api('GET', '/v1/sdk/merchant')).body.displayName).toBe('Before');
  });
});

describe('customers', () => {
  it('are created, found by reference, externalRef or email, updated and deleted, each with its event', async () => {
    const { sandboxKey, provider } = await controlPlane.providers.create({ displayName: 'Shop' });
    const api = client(sandboxKey);
    const created = await api('POST', '/v1/sdk/customers', {
      externalRef: 'user-1',
      name: 'Ann',
      email: 'Ann@Example.com',
      telephone: '+447700900123',
    });
    expect(created.status).toBe(201);
    const ref = created.body.reference;
    expect(ref).toMatch(/^cus_/);
    expect(created.body).toMatchObject({ externalRef: 'user-1', status: 'active' });
    expect((await api('GET', `/v1/sdk/customers/${ref}`)).body.name).toBe('Ann');
    expect((await api('GET', '/v1/sdk/customers/user-1')).body.reference).toBe(ref);
    expect((await api('GET', '/v1/sdk/customers?externalRef=user-1')).body.data).toHaveLength(1);
    expect((await api('GET', '/v1/sdk/customers?email=ann@example.com')).body.data[0].reference).toBe(ref);

    const duplicate = await api('POST', '/v1/sdk/customers', { externalRef: 'user-1' });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body).toMatchObject({ code: 'customer_exists', customerRef: ref });

    const updated = await api('PATCH', `/v1/sdk/customers/${ref}`, {
      name: 'Ann B',
      telephone: null,
      status: 'inactive',
    });
    expect(updated.body).toMatchObject({ name: 'Ann B', telephone: null, status: 'inactive' });
    expect((await api('DELETE', `/v1/sdk/customers/${ref}`)).body).toEqual({ reference: ref, deleted: true });
    expect((await api('GET', `/v1/sdk/customers/${ref}`)).body.code).toBe('customer_not_found');
    // The externalRef is free again once its customer is deleted.
    expect((await api('POST', '/v1/sdk/customers', { externalRef: 'user-1' })).status).toBe(201);

    const written = await events(provider.id, 'customer.');
    expect(written.map((e) => e.type)).toEqual([
      'customer.created',
      'customer.updated',
      'customer.deleted',
      'customer.created',
    ]);
    expect(written[0]?.object).toMatchObject({
      id: ref,
      reference: ref,
      name: 'Ann',
      email: 'Ann@Example.com',
      status: 'active',
      product: null,
    });
    expect(written[1]?.previous).toEqual({ name: 'Ann', telephone: '+447700900123', status: 'active' });
    expect(Object.keys(written[2]?.object ?? {}).sort()).toEqual(['created', 'id']);
  });

  it('ensure creates a customer exactly once under 20 concurrent calls', async () => {
    const { sandboxKey, provider } = await controlPlane.providers.create({ displayName: 'Ensure' });
    const api = client(sandboxKey);
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        api('POST', '/v1/sdk/customers/ensure', { externalRef: 'ext-42', name: 'Bo' }),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(19);
    expect(new Set(results.map((r) => r.body.reference)).size).toBe(1);
    expect((await events(provider.id, 'customer.created')).length).toBe(1);
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM customers WHERE provider_id = $1', [
      provider.id,
    ]);
    expect(rows[0].n).toBe(1);
  });

  it('bad fields get 400 naming them; other providers and environments get 404', async () => {
    const owner = await controlPlane.providers.create({ displayName: 'Owner' });
    const other = await controlPlane.providers.create({ displayName: 'Other' });
    const api = client(owner.sandboxKey);
    for (const [body, path] of [
      [{ email: 'nope' }, '/email'],
      [{ telephone: 'call me' }, '/telephone'],
      [{ externalRef: 'has space' }, '/externalRef'],
      [{ nickname: 'x' }, '/nickname'],
    ] as const) {
      const response = await api('POST', '/v1/sdk/customers', body);
      expect(response.status).toBe(400);
      expect(response.body.errors.map((e: Json) => e.path)).toContain(path);
    }
    expect((await api('POST', '/v1/sdk/customers/ensure', {})).status).toBe(400);
    const ref = (await api('POST', '/v1/sdk/customers', { externalRef: 'mine' })).body.reference;
    for (const key of [other.sandboxKey, owner.liveKey]) {
      for (const path of [
        `/v1/sdk/customers/${ref}`,
        '/v1/sdk/customers/mine',
        `/v1/sdk/customers/${ref}/balance`,
      ]) {
        expect((await client(key)('GET', path)).status).toBe(404);
      }
    }
  });
});

describe('credits', () => {
  it('keeps an exact ledger and fires low_balance and exhausted once per crossing', async () => {
    const { sandboxKey, provider } = await controlPlane.providers.create({ displayName: 'Credits' });
    const api = client(sandboxKey);
    expect((await api('PATCH', '/v1/ui/settings', { lowBalanceThreshold: 100 })).body).toEqual({
      lowBalanceThreshold: 100,
    });
    const product = (await api('POST', '/v1/ui/products', { name: 'LLM', reference: 'llm' })).body;
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Credits',
        type: 'usage-based',
        creditsPerUnit: 3,
      })
    ).body;
    const ref = (await api('POST', '/v1/sdk/customers', { externalRef: 'c' })).body.reference;
    const move = async (body: Json, key?: string) => {
      const response = await api(
        'POST',
        `/v1/sdk/customers/${ref}/credits`,
        body,
        key === undefined ? {} : { 'idempotency-key': key },
      );
      return response;
    };

    expect((await move({ kind: 'top_up', amount: 150 })).body.code).toBe('idempotency_key_required');
    expect((await move({ kind: 'top_up', amount: 150 }, 'topup-1')).body).toMatchObject({
      kind: 'top_up',
      amount: 150,
      balance: 150,
    });
    expect(
      (await move({ kind: 'debit', units: 20, planRef: plan.reference, productRef: 'llm' })).body,
    ).toMatchObject({ amount: -60, balance: 90, productRef: 'llm' });
    expect((await move({ kind: 'debit', amount: 10 })).body.balance).toBe(80);
    expect((await move({ kind: 'grant', amount: 100, reason: 'welcome' })).body.balance).toBe(180);
    expect((await move({ kind: 'debit', amount: 100 })).body.balance).toBe(80);
    const tooMuch = await move({ kind: 'debit', amount: 81 });
    expect(tooMuch.status).toBe(409);
    expect(tooMuch.body).toMatchObject({ code: 'insufficient_credits', credits: 80 });
    expect((await move({ kind: 'debit', amount: 80 })).body.balance).toBe(0);
    expect((await move({ kind: 'adjustment', amount: 5 })).body.balance).toBe(5);
    expect((await move({ kind: 'adjustment', amount: -5 })).body.balance).toBe(0);
    for (const [body, path] of [
      [{ kind: 'adjustment', amount: 0 }, '/amount'],
      [{ kind: 'grant', amount: -1 }, '/amount'],
      [{ kind: 'debit', units: 2 }, '/planRef'],
      [{ kind: 'grant', units: 2, planRef: plan.reference }, '/units'],
      [{ kind: 'grant', amount: 1.5 }, '/amount'],
    ] as const) {
      expect((await move(body)).body.errors?.[0]?.path, JSON.stringify(body)).toBe(path);
    }

    expect((await api('GET', `/v1/sdk/customers/${ref}/balance`)).body).toMatchObject({
      customerRef: ref,
      credits: 0,
      lowBalanceThreshold: 100,
    });
    const ledger = (await api('GET', `/v1/sdk/customers/${ref}/credits?limit=100`)).body.data;
    expect(ledger.map((m: Json) => m.amount)).toEqual([-5, 5, -80, -100, 100, -10, -60, 150]);

    const credit = await events(provider.id, 'customer.credit.');
    expect(credit.map((e) => `${e.type.replace('customer.credit.', '')}:${e.object.credits}`)).toEqual([
      'topped_up:150',
      'debited:90',
      'low_balance:90',
      'debited:80',
      'granted:180',
      'debited:80',
      'low_balance:80',
      'debited:0',
      'exhausted:0',
      'adjusted:5',
      'adjusted:0',
      'exhausted:0',
    ]);
    expect(credit[1]?.object).toEqual({
      customerId: ref,
      providerId: provider.id,
      credits: 90,
      amount: -60,
      productRef: 'llm',
    });
  });

  it('an Idempotency-Key replays the stored response, refuses a different body with 422, and credits once under concurrency', async () => {
    const { sandboxKey, provider } = await controlPlane.providers.create({ displayName: 'Idem' });
    const api = client(sandboxKey);
    const ref = (await api('POST', '/v1/sdk/customers', {})).body.reference;
    const url = `/v1/sdk/customers/${ref}/credits`;
    const body = { kind: 'top_up', amount: 500 };

    const first = await api('POST', url, body, { 'idempotency-key': 'k-1' });
    const again = await api('POST', url, body, { 'idempotency-key': 'k-1' });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    const changed = await api('POST', url, { kind: 'top_up', amount: 501 }, { 'idempotency-key': 'k-1' });
    expect(changed.status).toBe(422);
    expect(changed.body.code).toBe('idempotency_key_reused');

    const concurrent = await Promise.all(
      Array.from({ length: 10 }, () => api('POST', url, body, { 'idempotency-key': 'k-2' })),
    );
    for (const r of concurrent) expect([201, 409]).toContain(r.status);
    expect(
      concurrent
        .filter((r) => r.status === 409)
        .every((r) => r.body.code === 'idempotency_request_in_progress'),
    ).toBe(true);
    expect(new Set(concurrent.filter((r) => r.status === 201).map((r) => r.body.id)).size).toBe(1);

    expect((await api('GET', `/v1/sdk/customers/${ref}/balance`)).body.credits).toBe(1000);
    expect((await events(provider.id, 'customer.credit.topped_up')).length).toBe(2);
    expect((await api('POST', url, body, { 'idempotency-key': 'bad key with spaces' })).status).toBe(400);
  });
});
