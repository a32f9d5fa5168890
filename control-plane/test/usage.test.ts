import type { UsageReader } from '@mcp-meter/contracts/usage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import type { ControlPlane } from '../src/service';

/** Usage endpoints through Fastify on real PostgreSQL and ClickHouse (chdb), one provider per test. */
let harness: TestControlPlane;
let controlPlane: ControlPlane;
let store: TestControlPlane['store'];

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
  ({ controlPlane, store } = harness);
});

afterAll(() => harness?.close());

const build = (reader: UsageReader) => harness.build(reader);
const settled = () => harness.settled();

// Response bodies are read field by field and each field is asserted, so the type stays loose here.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = Record<string, unknown> & { [key: string]: any };

function client(key: string, app = () => controlPlane.app) {
  return async (
    method: 'GET' | 'POST',
    url: string,
    body?: unknown,
  ): Promise<{ status: number; body: Json }> => {
    const response = await app().inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() };
  };
}

/** Customers with these externalRefs; answers their ids (`cus_…`) by externalRef. */
async function withCustomers(
  api: ReturnType<typeof client>,
  ...refs: string[]
): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const ref of refs)
    ids[ref] = (await api('POST', '/v1/sdk/customers', { externalRef: ref })).body.reference;
  return ids;
}

const hoursAgo = (h: number) => new Date(Date.now() - h * 3600_000).toISOString();

describe('meters', () => {
  it('are created with each aggregation, found by id or name, listed, and archived without losing history', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'M' });
    const api = client(sandboxKey);
    const tokens = await api('POST', '/v1/ui/meters', {
      name: 'tokens',
      aggregation: 'sum',
      description: 'LLM tokens',
    });
    expect(tokens.status).toBe(201);
    expect(tokens.body).toMatchObject({
      name: 'tokens',
      aggregation: 'sum',
      status: 'active',
      valueProperty: null,
    });
    expect((await api('GET', `/v1/ui/meters/${tokens.body.id}`)).body.name).toBe('tokens');
    expect((await api('GET', '/v1/ui/meters/tokens')).body.id).toBe(tokens.body.id);
    for (const [name, aggregation, valueProperty] of [
      ['calls', 'count', undefined],
      ['peak', 'max', undefined],
      ['users', 'unique_count', 'user'],
    ]) {
      expect((await api('POST', '/v1/ui/meters', { name, aggregation, valueProperty })).status).toBe(201);
    }
    const list = await api('GET', '/v1/ui/meters?limit=10');
    expect(list.body.data.map((m: Json) => m.name).sort()).toEqual([
      'calls',
      'peak',
      'requests',
      'tokens',
      'users',
    ]);

    expect((await api('POST', '/v1/ui/meters', { name: 'tokens', aggregation: 'sum' })).body.code).toBe(
      'meter_name_taken',
    );
    const noProperty = await api('POST', '/v1/ui/meters', { name: 'u2', aggregation: 'unique_count' });
    expect(noProperty.body.errors[0].path).toBe('/valueProperty');
    expect((await api('POST', '/v1/ui/meters', { name: 'Bad Name', aggregation: 'sum' })).status).toBe(400);
    expect((await api('POST', '/v1/ui/meters/requests/archive')).body.code).toBe('meter_protected');

    await withCustomers(api, 'c');
    expect(
      (await api('POST', '/v1/sdk/meter-events', { customerRef: 'c', meterName: 'tokens', value: 5 })).status,
    ).toBe(202);
    await settled();
    expect((await api('POST', '/v1/ui/meters/tokens/archive')).body.status).toBe('archived');
    const refused = await api('POST', '/v1/sdk/meter-events', {
      customerRef: 'c',
      meterName: 'tokens',
      value: 5,
    });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('meter_archived');
    expect((await api('GET', '/ui/meters/tokens/usage')).body).toMatchObject({ total: 5, records: 1 });
  });

  it('aggregate exactly as declared: sum, count, max and unique count over a property', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Agg' });
    const api = client(sandboxKey);
    await api('POST', '/v1/ui/meters', { name: 'gb', aggregation: 'sum' });
    await api('POST', '/v1/ui/meters', { name: 'calls', aggregation: 'count' });
    await api('POST', '/v1/ui/meters', { name: 'peak', aggregation: 'max' });
    await api('POST', '/v1/ui/meters', { name: 'users', aggregation: 'unique_count', valueProperty: 'user' });
    await withCustomers(api, 'c');
    const values = [0.1, 0.2, 0.3, 2.5, 7];
    const records = values.flatMap((value, i) => [
      { customerRef: 'c', meterName: 'gb', value },
      { customerRef: 'c', meterName: 'calls', value },
      { customerRef: 'c', meterName: 'peak', value },
      { customerRef: 'c', meterName: 'users', properties: { user: i % 3 === 0 ? 'ann' : `u${i}` } },
    ]);
    expect((await api('POST', '/v1/sdk/meter-events/bulk', { records })).status).toBe(202);
    await settled();
    const total = async (meter: string) => (await api('GET', `/ui/meters/${meter}/usage`)).body;
    expect(await total('gb')).toMatchObject({ total: 10.1, records: 5, aggregation: 'sum' });
    expect(await total('calls')).toMatchObject({ total: 5, records: 5, aggregation: 'count' });
    expect(await total('peak')).toMatchObject({ total: 7, aggregation: 'max' });
    expect(await total('users')).toMatchObject({ total: 4, records: 5, aggregation: 'unique_count' });
    expect(await total('gb')).toMatchObject({ totalDecimal: '10.1' });
    expect(await total('peak')).toMatchObject({ totalDecimal: '7' });
  });

  it('give a total past a double’s precision exactly, as totalDecimal, by bucket and customer too', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Exact' });
    const api = client(sandboxKey);
    await api('POST', '/v1/ui/meters', { name: 'bytes', aggregation: 'sum' });
    await withCustomers(api, 'c');
    // Each value is recorded as written (a double's shortest text); their sum has 25 significant
    // digits, which no double holds.
    const values = [1e15, 1e15, 0.000000003];
    const records = values.map((value) => ({ customerRef: 'c', meterName: 'bytes', value }));
    expect((await api('POST', '/v1/sdk/meter-events/bulk', { records })).status).toBe(202);
    await settled();
    const body = (await api('GET', '/ui/meters/bytes/usage?granularity=day')).body;
    expect(body.totalDecimal).toBe('2000000000000000.000000003');
    expect(body.total).toBe(Number('2000000000000000.000000003'));
    const day = body.buckets.find((b: Json) => b.records > 0);
    expect(day.totalDecimal).toBe('2000000000000000.000000003');
    expect(body.buckets.filter((b: Json) => b.records === 0).every((b: Json) => b.totalDecimal === '0')).toBe(
      true,
    );
    const top = (await api('GET', '/ui/meters/bytes/customers')).body;
    expect(top.data).toEqual([
      {
        customerRef: expect.any(String),
        total: Number('2000000000000000.000000003'),
        totalDecimal: '2000000000000000.000000003',
        records: 3,
      },
    ]);
  });
});

describe('bulk and generic usage endpoints', () => {
  it('accept up to 1000 records with their references, under records or events', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Bulk' });
    const api = client(sandboxKey);
    const ids = await withCustomers(api, ...Array.from({ length: 10 }, (_, i) => `c${i}`));
    const records = Array.from({ length: 1000 }, (_, i) => ({
      customerRef: `c${i % 10}`,
      value: 1,
      id: `b-${i}`,
    }));
    const first = await api('POST', '/v1/sdk/meter-events/bulk', { records });
    expect(first.status).toBe(202);
    expect(first.body.accepted).toBe(1000);
    // Kept under the customer's id, whichever alias was sent.
    expect(first.body.records[999]).toMatchObject({
      id: 'b-999',
      customerRef: ids.c9,
      meterName: 'requests',
    });
    // The same ids sent again, under the spec's other name, count once.
    expect((await api('POST', '/v1/sdk/meter-events/bulk', { events: records.slice(0, 500) })).status).toBe(
      202,
    );
    await settled();
    expect((await api('GET', '/ui/meters/requests/usage')).body).toMatchObject({
      total: 1000,
      records: 1000,
    });
  });

  it('refuse a request over the cap with 413, and a request with one bad record whole, naming it', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Bulk bad' });
    const api = client(sandboxKey);
    const tooMany = await api('POST', '/v1/sdk/meter-events/bulk', {
      records: Array.from({ length: 1001 }, () => ({ customerRef: 'c' })),
    });
    expect(tooMany.status).toBe(413);
    expect(tooMany.body).toMatchObject({ code: 'too_many_records', maxRecords: 1000 });

    const records = [
      { customerRef: 'a' },
      { customerRef: 'b' },
      { customerRef: 'c' },
      { customerRef: 'd', value: -3 },
    ];
    const oneBad = await api('POST', '/v1/sdk/meter-events/bulk', { records });
    expect(oneBad.status).toBe(400);
    expect(oneBad.body.errors).toEqual([
      { path: '/records/3/value', message: 'must be between 0 and 1000000000000000', location: 'body' },
    ]);
    const unknownMeter = await api('POST', '/v1/sdk/meter-events/bulk', {
      events: [{ customerRef: 'a', meterName: 'nope' }],
    });
    expect(unknownMeter.body.errors[0].path).toBe('/events/0/meterName');
    // A customer no one created is refused, naming the record, never stored as an orphan.
    await withCustomers(api, 'a');
    const orphan = await api('POST', '/v1/sdk/meter-events/bulk', {
      records: [{ customerRef: 'a' }, { customerRef: 'ghost' }],
    });
    expect(orphan.status).toBe(404);
    expect(orphan.body).toMatchObject({
      code: 'customer_not_found',
      errors: [{ path: '/records/1/customerRef', message: 'no customer ghost' }],
    });
    expect((await api('POST', '/v1/sdk/meter-events', { customerRef: 'ghost' })).status).toBe(404);
    expect((await api('POST', '/v1/sdk/meter-events/bulk', { records: [] })).status).toBe(400);
    expect(
      (await api('POST', '/v1/sdk/meter-events/bulk', { records: [{ customerRef: 'a' }], events: [] }))
        .status,
    ).toBe(400);
    await settled();
    expect((await api('GET', '/ui/meters/requests/usage')).body).toMatchObject({ total: 0, records: 0 });
  });

  it('POST /v1/sdk/usages records units on the requests meter, tagged with action, outcome and product', async () => {
    const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Usages' });
    const api = client(sandboxKey);
    await api('POST', '/v1/ui/products', { name: 'Search', reference: 'search' });
    const { buyer } = await withCustomers(api, 'buyer', 'c');
    const response = await api('POST', '/v1/sdk/usages', {
      customerRef: 'buyer',
      productRef: 'search',
      actionType: 'query',
      units: 3,
      outcome: 'success',
    });
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({ meterName: 'requests', customerRef: buyer, value: 3 });
    expect((await api('POST', '/v1/sdk/usages', { customerRef: 'c', productRef: 'nope' })).body.code).toBe(
      'product_not_found',
    );
    expect(
      (await api('POST', '/v1/sdk/usages', { customerRef: 'c', productRef: 'search', units: 'many' })).status,
    ).toBe(400);
    await settled();
    // One identity: the same usage read by the customer's id or by its externalRef.
    for (const ref of [buyer, 'buyer'])
      expect((await api('GET', `/ui/meters/requests/usage?customerRef=${ref}`)).body).toMatchObject({
        customerRef: buyer,
        total: 3,
        records: 1,
      });
    expect((await api('GET', '/ui/meters/requests/usage?customerRef=nobody')).status).toBe(404);
    const { rows } = await store.client
      .query({
        query: `SELECT properties FROM mcpmeter.usage_records_sandbox WHERE id = {id:String}`,
        query_params: { id: response.body.id },
        format: 'JSONEachRow',
      })
      .then((r) => r.json<{ properties: string }>())
      .then((rows) => ({ rows }));
    expect(JSON.parse(rows[0]?.properties ?? '{}')).toEqual({
      productRef: 'search',
      productId: expect.stringMatching(/^prd_/),
      actionType: 'query',
      outcome: 'success',
    });
  });
});

describe('usage queries', () => {
  it('bucket by hour and day with every bucket present, and answer usage by customer and per day', async () => {
    const { sandboxKey, liveKey } = await controlPlane.providers.create({ displayName: 'Query' });
    const api = client(sandboxKey);
    const ids = await withCustomers(api, 'big', 'small', 'mid');
    const records = [
      { customerRef: 'big', value: 10, timestamp: hoursAgo(30) },
      { customerRef: 'big', value: 5, timestamp: hoursAgo(2) },
      { customerRef: 'small', value: 1, timestamp: hoursAgo(2) },
      { customerRef: 'mid', value: 4, timestamp: hoursAgo(1) },
    ];
    await api('POST', '/v1/sdk/meter-events/bulk', { records });
    await settled();
    const to = new Date();
    const from = new Date(to.getTime() - 48 * 3600_000);
    const range = `from=${from.toISOString()}&to=${to.toISOString()}`;

    const hourly = (await api('GET', `/ui/meters/requests/usage?${range}&granularity=hour`)).body;
    expect(hourly).toMatchObject({ total: 20, records: 4, granularity: 'hour' });
    expect(hourly.buckets.length).toBeGreaterThanOrEqual(48);
    expect(hourly.buckets.reduce((s: number, b: Json) => s + b.total, 0)).toBe(20);
    expect(hourly.buckets.filter((b: Json) => b.records > 0).map((b: Json) => b.total)).toEqual([10, 6, 4]);
    const daily = (await api('GET', `/ui/meters/requests/usage?${range}&granularity=day`)).body;
    expect(daily.buckets.reduce((s: number, b: Json) => s + b.total, 0)).toBe(20);
    const monthly = (await api('GET', '/ui/meters/requests/usage?granularity=month&from=2026-01-01')).body;
    expect(monthly.buckets[0].start).toBe('2026-01-01T00:00:00.000Z');
    const tooFine = await api('GET', '/ui/meters/requests/usage?granularity=hour&from=2020-01-01');
    expect(tooFine.body.errors[0].path).toBe('/granularity');

    const customers = (await api('GET', `/ui/meters/requests/customers?${range}&limit=2`)).body;
    expect(customers.data).toEqual([
      { customerRef: ids.big, total: 15, totalDecimal: '15', records: 2 },
      { customerRef: ids.mid, total: 4, totalDecimal: '4', records: 1 },
    ]);
    const days = (await api('GET', `/ui/analytics/daily?${range}`)).body.data;
    expect(days.reduce((s: number, d: Json) => s + d.records, 0)).toBe(4);
    expect(Math.max(...days.map((d: Json) => d.customers))).toBeGreaterThanOrEqual(2);

    // Live sees none of it, in any view.
    const live = client(liveKey);
    expect((await live('GET', `/ui/meters/requests/usage?${range}&granularity=hour`)).body).toMatchObject({
      total: 0,
      records: 0,
    });
    expect((await live('GET', `/ui/meters/requests/customers?${range}`)).body.data).toEqual([]);
    expect(
      (await live('GET', `/ui/analytics/daily?${range}`)).body.data.every((d: Json) => d.records === 0),
    ).toBe(true);
  });

  it('another provider cannot query a meter by its id', async () => {
    const owner = await controlPlane.providers.create({ displayName: 'Owner' });
    const other = await controlPlane.providers.create({ displayName: 'Other' });
    const meter = (await client(owner.sandboxKey)('GET', '/v1/ui/meters/requests')).body;
    for (const path of [
      `/ui/meters/${meter.id}/usage`,
      `/ui/meters/${meter.id}/customers`,
      `/v1/ui/meters/${meter.id}`,
    ]) {
      expect((await client(other.sandboxKey)('GET', path)).status).toBe(404);
    }
  });

  it('answer 503 usage_store_unavailable while ClickHouse cannot be read, never stale data', async () => {
    const down: UsageReader = {
      total: () => Promise.reject(new Error('connection refused')),
      buckets: () => Promise.reject(new Error('connection refused')),
      byCustomer: () => Promise.reject(new Error('connection refused')),
      daily: () => Promise.reject(new Error('connection refused')),
      limitUsage: () => Promise.reject(new Error('connection refused')),
      limitCount: () => Promise.reject(new Error('connection refused')),
      countByProperty: () => Promise.reject(new Error('connection refused')),
      creditUsage: () => Promise.reject(new Error('connection refused')),
    };
    const outage = await build(down);
    try {
      const { sandboxKey } = await controlPlane.providers.create({ displayName: 'Outage' });
      const api = client(sandboxKey, () => outage.app);
      for (const path of [
        '/ui/meters/requests/usage',
        '/ui/meters/requests/customers',
        '/ui/analytics/daily',
      ]) {
        const response = await api('GET', path);
        expect(response.status).toBe(503);
        expect(response.body.code).toBe('usage_store_unavailable');
        expect(JSON.stringify(response.body)).not.toContain('connection refused');
      }
    } finally {
      await outage.app.close();
    }
  });
});
