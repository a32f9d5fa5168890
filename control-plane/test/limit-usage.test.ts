import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';

/**
 * Plan limits count usage on the requests meter from every source (spec rule 1d): calls the
 * limit check or the proxy admitted, and usage the provider reports through the usage API.
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

async function seller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const call = injectClient(harness.controlPlane, sandboxKey);
  const product = (await call('POST', '/v1/ui/products', { name: 'Metered', reference: 'metered' })).body;
  const other = (await call('POST', '/v1/ui/products', { name: 'Other', reference: 'other' })).body;
  for (const p of [product, other])
    await call('POST', `/v1/ui/products/${p.id}/plans`, {
      name: 'Free',
      type: 'recurring',
      billingCycle: 'monthly',
      price: 0,
      limit: 10,
      default: true,
    });
  const customer = (await call('POST', '/v1/sdk/customers', { externalRef: 'metered-user' })).body;
  const check = (productRef = 'metered', consume = false) =>
    call('POST', '/v1/sdk/limits', { customerRef: 'metered-user', productRef, consume });
  return { call, customer, check, key: sandboxKey };
}

describe('plan limits and reported usage', () => {
  it('finds the customer, product and governing plan a check names, by id or reference', async () => {
    const { call, customer, check } = await seller('Lookup');
    const products = (await call('GET', '/v1/ui/products')).body.data as Array<{
      id: string;
      reference: string;
    }>;
    const metered = products.find((p) => p.reference === 'metered');
    // By externalRef or id, by reference or id: the same counter.
    expect((await check('metered', true)).body).toMatchObject({ withinLimits: true, limit: 10, used: 1 });
    expect(
      (await call('POST', '/v1/sdk/limits', { customerRef: customer.id, productRef: metered?.id })).body,
    ).toMatchObject({ limit: 10, used: 2 });
    // A purchase governs over the default plan: its plan's limit counts.
    const paid = (
      await call('POST', `/v1/ui/products/${metered?.id}/plans`, {
        name: 'Bigger',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 0,
        limit: 50,
      })
    ).body;
    expect(
      (await call('POST', '/v1/sdk/activate', { customerRef: 'metered-user', planRef: paid.id })).body,
    ).toMatchObject({ status: 'activated' });
    expect((await check('metered')).body).toMatchObject({ limit: 50, planId: paid.id });
    // What names nothing is a 404 with its own code; a deleted customer names nothing.
    expect((await check('no-such-product')).body).toMatchObject({ status: 404, code: 'product_not_found' });
    expect(
      (await call('POST', '/v1/sdk/limits', { customerRef: 'nobody', productRef: 'metered' })).body,
    ).toMatchObject({ status: 404, code: 'customer_not_found' });
    const gone = (await call('POST', '/v1/sdk/customers', { externalRef: 'gone-user' })).body;
    expect((await call('DELETE', `/v1/sdk/customers/${gone.id}`)).status).toBeLessThan(300);
    expect(
      (await call('POST', '/v1/sdk/limits', { customerRef: 'gone-user', productRef: 'metered' })).body,
    ).toMatchObject({ status: 404, code: 'customer_not_found' });
    // A product with no purchase and no default plan: no plan governs, and with none on sale
    // there is no checkout to offer either.
    const bare = (await call('POST', '/v1/ui/products', { name: 'Bare', reference: 'bare' })).body;
    expect(bare.id).toBeDefined();
    expect((await check('bare')).body).toMatchObject({ status: 404, code: 'plan_not_found' });
  });

  it('adds usage reported through the API to a running counter, for the product named or every product', async () => {
    const { call, check } = await seller('Live counter');
    // The counter starts here (one admitted call).
    expect((await check('metered', true)).body).toMatchObject({ withinLimits: true, used: 1 });
    expect((await check('other', true)).body).toMatchObject({ used: 1 });
    // 3 units for the named product, 2 for no product (every product), 4 on another meter (none).
    expect(
      (await call('POST', '/v1/sdk/usages', { customerRef: 'metered-user', productRef: 'metered', units: 3 }))
        .status,
    ).toBe(202);
    expect(
      (await call('POST', '/v1/sdk/meter-events', { customerRef: 'metered-user', value: 2 })).status,
    ).toBe(202);
    await call('POST', '/v1/ui/meters', { name: 'tokens', aggregation: 'sum' });
    expect(
      (
        await call('POST', '/v1/sdk/meter-events', {
          customerRef: 'metered-user',
          meterName: 'tokens',
          value: 4,
        })
      ).status,
    ).toBe(202);
    expect((await check('metered')).body).toMatchObject({ used: 6, remaining: 4 });
    expect((await check('other')).body).toMatchObject({ used: 3, remaining: 7 });
    // Reported usage can exhaust the limit: the next call is refused.
    await call('POST', '/v1/sdk/meter-events/bulk', {
      records: [
        {
          customerRef: 'metered-user',
          value: 2.5,
          properties: { productId: (await call('GET', '/v1/ui/products/metered')).body.id },
        },
      ],
    });
    expect((await check('metered')).body).toMatchObject({ used: 9 });
    expect((await check('metered', true)).body.withinLimits).toBe(true);
    expect((await check('metered', true)).body.withinLimits).toBe(false);
    expect((await check('metered')).body).not.toHaveProperty('overLimit');
    // Usage reported past the limit is shown as such, not hidden in a used of 10.
    await call('POST', '/v1/sdk/usages', { customerRef: 'metered-user', productRef: 'metered', units: 3 });
    expect((await check('metered')).body).toMatchObject({ used: 10, remaining: 0, overLimit: 3 });
  });

  it('rounds reported usage up once over the period, running or started again from ClickHouse', async () => {
    const { call, check, key } = await seller('Fractions');
    expect((await check('metered', true)).body).toMatchObject({ used: 1 });
    const report = (values: number[]) =>
      call('POST', '/v1/sdk/meter-events/bulk', {
        records: values.map((value) => ({ customerRef: 'metered-user', value })),
      });
    // Exactly 3 (as numbers, 3.0000000000000004): 3 units, not 4.
    expect((await report([0.1, 0.1, 2.2, 0.6])).status).toBe(202);
    expect((await check('metered')).body).toMatchObject({ used: 4 });
    // Two halves one by one are one unit, not two; then a quarter starts the next.
    for (const value of [0.5, 0.5, 0.25]) expect((await report([value])).status).toBe(202);
    expect((await check('metered')).body).toMatchObject({ used: 6 });
    // A counter started again from ClickHouse (a new process, a flushed Redis) counts the same,
    // and keeps the quarter: three more quarters complete its unit.
    await harness.settled();
    const fresh = await harness.build(harness.store.store);
    try {
      const again = injectClient(fresh, key);
      const freshCheck = () =>
        again('POST', '/v1/sdk/limits', {
          customerRef: 'metered-user',
          productRef: 'metered',
          consume: false,
        });
      expect((await freshCheck()).body).toMatchObject({ used: 6 });
      const quarters = await again('POST', '/v1/sdk/meter-events/bulk', {
        records: [0.25, 0.25, 0.25].map((value) => ({ customerRef: 'metered-user', value })),
      });
      expect(quarters.status).toBe(202);
      expect((await freshCheck()).body).toMatchObject({ used: 6 });
    } finally {
      await fresh.limits.close();
      await fresh.app.close();
    }
  });

  it('starts a counter only from stored usage that has caught up with the usage bus', async () => {
    const { call, key } = await seller('Lagging ingest');
    expect(
      (await call('POST', '/v1/sdk/meter-events', { customerRef: 'metered-user', value: 4 })).status,
    ).toBe(202);
    await harness.settled();
    // A control plane whose counters are gone (a new process, a flushed Redis) while ingest lags.
    let caughtUp = false;
    const lagging = await harness.build(harness.store.store, { settled: async () => caughtUp });
    try {
      const check = () =>
        injectClient(lagging, key)('POST', '/v1/sdk/limits', {
          customerRef: 'metered-user',
          productRef: 'metered',
          consume: true,
        });
      const refused = await check();
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: 'usage_store_unavailable' });
      caughtUp = true;
      expect((await check()).body).toMatchObject({ withinLimits: true, used: 5, remaining: 5 });
    } finally {
      await lagging.limits.close();
      await lagging.app.close();
    }
  });

  it('counts reported usage when a counter starts from ClickHouse', async () => {
    const { call, check } = await seller('Seeded counter');
    expect(
      (await call('POST', '/v1/sdk/meter-events', { customerRef: 'metered-user', value: 4 })).status,
    ).toBe(202);
    expect(
      (await call('POST', '/v1/sdk/usages', { customerRef: 'metered-user', productRef: 'other', units: 5 }))
        .status,
    ).toBe(202);
    await harness.settled();
    // No counter existed when the usage arrived: the seed reads it back, without the other product's.
    expect((await check('metered', true)).body).toMatchObject({ used: 5, remaining: 5 });
  });
});
