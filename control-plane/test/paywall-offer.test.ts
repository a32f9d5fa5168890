import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';

/**
 * What the paywall offers past a limit, through the SDK limit check (the proxy asks the same
 * question): only a plan on sale with a higher limit than the one reached, the cheapest first,
 * and no checkout at all when none exists.
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field
type Json = Record<string, any>;

/**
 * A provider with one product and a customer: `plan` makes monthly recurring plans of the product
 * (name, limit, price, any other field), `check` consumes one call of the customer's limit.
 */
async function seller(displayName: string, productName: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName });
  const call = injectClient(harness.controlPlane, sandboxKey);
  const product = (await call('POST', '/v1/ui/products', { name: productName })).body;
  const plan = async (name: string, limit: number, price: number, extra: Json = {}) =>
    (
      await call('POST', `/v1/ui/products/${product.id}/plans`, {
        name,
        type: 'recurring',
        billingCycle: 'monthly',
        price,
        limit,
        ...extra,
      })
    ).body;
  const customer = (await call('POST', '/v1/sdk/customers', {})).body;
  const check = () =>
    call('POST', '/v1/sdk/limits', {
      customerRef: customer.reference,
      productRef: product.id,
      consume: true,
    });
  return { call, plan, customer, check, product };
}

describe('the paywall offer', () => {
  it('offers the cheapest plan with a higher limit, never a lower one, and nothing when none is higher', async () => {
    const { call, plan, customer, check } = await seller('Offers', 'Tiers');
    await plan('Free', 2, 0, { default: true });
    const mid = await plan('Mid', 3, 0);
    const big = await plan('Big', 6, 900);

    // On the free default plan: past 2 calls, the cheapest higher plan (Mid), not Free again.
    await check();
    await check();
    const onFree = await check();
    expect(onFree.body).toMatchObject({ withinLimits: false, offeredPlanId: mid.id });

    // On Mid (limit 3): Big is offered; Free, cheaper and lower, never is.
    expect(
      (await call('POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef: mid.id })).body
        .status,
    ).toBe('activated');
    for (let i = 0; i < 3; i++) expect((await check()).body.withinLimits).toBe(true);
    expect((await check()).body).toMatchObject({ withinLimits: false, offeredPlanId: big.id });

    // Big off sale: nothing is higher than Mid, so the refusal carries no checkout.
    expect((await call('POST', `/v1/ui/plans/${big.id}/archive`)).status).toBe(200);
    const nothing = await check();
    expect(nothing.status).toBe(200);
    expect(nothing.body.withinLimits).toBe(false);
    expect(nothing.body.checkoutUrl).toBeUndefined();
    expect(nothing.body.offeredPlanId).toBeUndefined();
  });

  it('answers many refusals at once with one checkout session, never starving the connection pool', async () => {
    // Each refusal's paywall takes an advisory lock on a pooled connection; were the session
    // then created on other pooled connections, 10 refusals waiting for the lock would hold the
    // whole pool while the lock's holder waited for an eleventh (5 s, then a 503).
    const { plan, check } = await seller('Crowd', 'Crowded');
    await plan('Free', 1, 0, { default: true });
    const more = await plan('More', 100, 0);
    expect((await check()).body.withinLimits).toBe(true);
    const refusals = await Promise.all(Array.from({ length: 40 }, check));
    for (const refusal of refusals) {
      expect(refusal.status).toBe(200);
      expect(refusal.body).toMatchObject({
        withinLimits: false,
        reason: 'limit_reached',
        offeredPlanId: more.id,
      });
    }
    expect(new Set(refusals.map((r) => r.body.checkoutSessionId)).size).toBe(1);
  });

  it('offers a promotion-code field when the product says so, and a code then discounts the upgrade', async () => {
    const { call, plan, customer, check, product } = await seller('Codes', 'Coded');
    await plan('Free', 1, 0, { default: true });
    const pro = await plan('Pro', 100, 2000);
    expect((await check()).body.withinLimits).toBe(true);
    const plain = (await check()).body;
    expect(plain).toMatchObject({ withinLimits: false, offeredPlanId: pro.id });
    expect((await call('GET', `/v1/sdk/checkout-sessions/${plain.checkoutSessionId}`)).body).toMatchObject({
      allowPromotionCodes: false,
    });

    // Turned on: the next refusal opens a session with the field (the open one lacks it).
    const turned = await call('PATCH', `/v1/ui/products/${product.id}`, { paywallPromotionCodes: true });
    expect(turned.status).toBe(200);
    expect(turned.body.paywallPromotionCodes).toBe(true);
    expect(
      (await call('PATCH', `/v1/ui/products/${product.id}`, { paywallPromotionCodes: 'yes' })).status,
    ).toBe(400);
    const coded = (await check()).body;
    expect(coded.checkoutSessionId).not.toBe(plain.checkoutSessionId);
    expect((await call('GET', `/v1/sdk/checkout-sessions/${coded.checkoutSessionId}`)).body).toMatchObject({
      allowPromotionCodes: true,
      planRef: pro.id,
    });
    // Refusals while it is open share it.
    expect((await check()).body.checkoutSessionId).toBe(coded.checkoutSessionId);

    // The customer types a code on the paywall's page: the first invoice is discounted.
    await call('POST', '/v1/sdk/coupons', {
      name: 'Upgrade',
      code: 'UP25',
      percentOff: 25,
      duration: 'once',
    });
    const page = await harness.controlPlane.app.inject({
      method: 'GET',
      url: `/checkout/${coded.checkoutSessionId}`,
    });
    expect(page.body).toContain('Promotion code');
    const applied = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${coded.checkoutSessionId}/promotion-code`,
      payload: { code: 'up25' },
    });
    expect(applied.statusCode, applied.body).toBe(200);
    const paid = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${coded.checkoutSessionId}/pay`,
      payload: { card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' } },
    });
    expect(paid.statusCode, paid.body).toBe(200);
    const invoices = (await call('GET', `/v1/sdk/invoices?customerRef=${customer.reference}`)).body
      .data as Json[];
    expect(invoices.map((i) => i.total)).toEqual([1500]);
    expect((await check()).body.withinLimits).toBe(true);
  });
});
