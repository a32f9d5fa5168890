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
