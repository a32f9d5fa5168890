import { entitlementKey } from '@mcp-meter/contracts/snapshots';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';

/** Activation and the purchase lifecycle through the API, on real PostgreSQL. */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// Response bodies are read field by field and each field is asserted, so the type stays loose here.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = Record<string, any>;

async function setup() {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Seller' });
  const api = async (
    method: 'GET' | 'POST',
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}`, ...headers },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
  const product = (await api('POST', '/v1/ui/products', { name: 'Search', reference: 'search' })).body;
  const plan = async (body: Json) =>
    (await api('POST', `/v1/ui/products/${product.id}/plans`, { name: 'P', ...body })).body;
  const customer = (await api('POST', '/v1/sdk/customers', { externalRef: 'u1' })).body;
  const events = async () => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1 AND type LIKE 'purchase.%' ORDER BY created_at, id`,
      [provider.id],
    );
    return rows.map((r) => ({
      type: r.type,
      object: r.payload.data.object,
      previous: r.payload.data.previous_attributes,
    }));
  };
  const snapshot = async () =>
    JSON.parse(
      (await harness.snapshots.get(
        entitlementKey({
          providerId: provider.id,
          environment: 'sandbox',
          customerId: customer.id,
          productId: product.id,
        }),
      )) ?? 'null',
    );
  return { api, product, plan, customer, events, snapshot, provider };
}

describe('activation', () => {
  it('activates a free plan at once, answers already_active after, and switches plans with plan_changed', async () => {
    const { api, plan, customer, events, snapshot, product } = await setup();
    const free = await plan({ type: 'recurring', limit: 100 });
    const other = await plan({ type: 'recurring', limit: 500 });

    const first = await api('POST', '/v1/sdk/activate', {
      customerRef: 'u1',
      planRef: free.reference,
      productRef: 'search',
    });
    expect(first.body).toMatchObject({
      status: 'activated',
      creditBalance: 0,
      creditsPerUnit: 1,
      currency: 'usd',
    });
    const purchase = (await api('GET', `/v1/sdk/purchases/${first.body.purchaseRef}`)).body;
    expect(purchase).toMatchObject({
      status: 'active',
      customerRef: customer.id,
      planRef: free.reference,
      isRecurring: true,
      amount: 0,
    });
    const start = new Date(purchase.periodStart);
    const end = new Date(purchase.periodEnd);
    expect(end.getUTCMonth()).toBe((start.getUTCMonth() + 1) % 12);
    expect(await snapshot()).toMatchObject({
      purchaseId: purchase.id,
      planId: free.reference,
      grantsAccess: true,
      limit: 100,
      meterRef: free.meterRef,
      status: 'active',
    });

    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: customer.id, planRef: free.reference })).body,
    ).toMatchObject({
      status: 'already_active',
      purchaseRef: purchase.id,
    });

    const switched = await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: other.reference });
    expect(switched.body.status).toBe('activated');
    expect((await api('GET', `/v1/sdk/purchases/${purchase.id}`)).body).toMatchObject({ status: 'expired' });
    expect(await snapshot()).toMatchObject({ purchaseId: switched.body.purchaseRef, limit: 500 });
    const written = await events();
    expect(written.map((e) => e.type)).toEqual([
      'purchase.created',
      'purchase.activated',
      'purchase.expired',
      'purchase.created',
      'purchase.activated',
      'purchase.plan_changed',
    ]);
    expect(written[2]?.previous).toEqual({ status: 'active' });
    expect(written[5]?.previous).toEqual({ plan: free.reference });
    expect(written[0]?.object).toMatchObject({
      id: purchase.id,
      reference: purchase.id,
      status: 'active',
      customer: customer.id,
      plan: free.reference,
      product: product.id,
      amount: 0,
      currency: 'usd',
      billingCycle: 'monthly',
      isRecurring: true,
    });
    const list = (await api('GET', '/v1/sdk/purchases?customerRef=u1&status=active')).body.data;
    expect(list.map((p: Json) => p.id)).toEqual([switched.body.purchaseRef]);
  });

  it('asks for payment on a paid plan, starts a trial where the plan has one, and needs credits on a credit plan', async () => {
    const { api, plan, customer, events } = await setup();
    const paid = await plan({ type: 'recurring', price: 900 });
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: paid.reference })).body,
    ).toMatchObject({ status: 'payment_required' });
    expect(await events()).toEqual([]);

    const trial = await plan({ type: 'recurring', price: 900, trialDays: 14 });
    const trialing = await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: trial.reference });
    expect(trialing.body.status).toBe('activated');
    const purchase = (await api('GET', `/v1/sdk/purchases/${trialing.body.purchaseRef}`)).body;
    expect(purchase.status).toBe('trialing');
    expect(new Date(purchase.trialEnd).getTime() - new Date(purchase.periodStart).getTime()).toBe(
      14 * 86_400_000,
    );

    const credits = await plan({
      type: 'usage-based',
      billingModel: 'pre-paid',
      price: 1,
      creditsPerUnit: 5,
    });
    const cancelled = await api('POST', `/v1/sdk/purchases/${purchase.id}/cancel`, {});
    expect(cancelled.body.status).toBe('cancelled');
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: credits.reference })).body,
    ).toMatchObject({
      status: 'topup_required',
      creditBalance: 0,
      creditsPerUnit: 5,
    });
    await api('POST', `/v1/sdk/customers/${customer.id}/credits`, { kind: 'grant', amount: 5 });
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: credits.reference })).body,
    ).toMatchObject({ status: 'activated', creditBalance: 5 });
  });

  it('creates one purchase under 10 concurrent activations, and refuses bad references', async () => {
    const { api, plan } = await setup();
    const free = await plan({ type: 'recurring' });
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: free.reference }),
      ),
    );
    expect(results.filter((r) => r.body.status === 'activated')).toHaveLength(1);
    expect(results.filter((r) => r.body.status === 'already_active')).toHaveLength(9);
    expect((await api('GET', '/v1/sdk/purchases?customerRef=u1')).body.data).toHaveLength(1);

    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'nobody', planRef: free.reference })).body.code,
    ).toBe('customer_not_found');
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: 'pln_nope' })).body.code,
    ).toBe('plan_not_found');
    expect(
      (
        await api('POST', '/v1/sdk/activate', {
          customerRef: 'u1',
          planRef: free.reference,
          productRef: 'other',
        })
      ).body.errors[0].path,
    ).toBe('/productRef');
    expect((await api('POST', '/v1/sdk/activate', { customerRef: 'u1' })).status).toBe(400);
    const archived = await plan({ type: 'recurring' });
    await api('POST', `/v1/ui/plans/${archived.reference}/archive`);
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: archived.reference })).body.status,
    ).toBe('invalid');
    const stranger = await setup();
    const purchaseRef = results.find((r) => r.body.status === 'activated')?.body.purchaseRef;
    expect((await stranger.api('GET', `/v1/sdk/purchases/${purchaseRef}`)).status).toBe(404);
    expect((await stranger.api('POST', `/v1/sdk/purchases/${purchaseRef}/cancel`, {})).status).toBe(404);
  });
});

describe('cancellation', () => {
  it('schedules, reactivates and cancels through the state machine, refusing moves it does not allow', async () => {
    const { api, plan, events, snapshot } = await setup();
    const free = await plan({ type: 'recurring' });
    const ref = (await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: free.reference })).body
      .purchaseRef;

    expect((await api('POST', `/v1/sdk/purchases/${ref}/cancel`, { atPeriodEnd: true })).body).toMatchObject({
      status: 'active',
      cancelAtPeriodEnd: true,
    });
    expect((await api('POST', `/v1/sdk/purchases/${ref}/cancel`, { atPeriodEnd: true })).body.code).toBe(
      'invalid_transition',
    );
    expect((await api('POST', `/v1/sdk/purchases/${ref}/reactivate`)).body).toMatchObject({
      status: 'active',
      cancelAtPeriodEnd: false,
    });
    expect((await api('POST', `/v1/sdk/purchases/${ref}/reactivate`)).body.code).toBe('invalid_transition');
    const cancelled = await api('POST', `/v1/sdk/purchases/${ref}/cancel`, {});
    expect(cancelled.body).toMatchObject({ status: 'cancelled' });
    expect(cancelled.body.endedAt).not.toBeNull();
    expect(await snapshot()).toMatchObject({ purchaseId: ref, status: 'cancelled', grantsAccess: false });
    expect((await api('POST', `/v1/sdk/purchases/${ref}/cancel`, {})).status).toBe(409);

    const written = await events();
    expect(written.map((e) => e.type)).toEqual([
      'purchase.created',
      'purchase.activated',
      'purchase.cancellation_scheduled',
      'purchase.reactivated',
      'purchase.cancelled',
    ]);
    expect(written[2]?.previous).toEqual({ cancelAtPeriodEnd: false });
    expect(written[4]?.previous).toEqual({ status: 'active' });
    expect((await api('POST', `/v1/sdk/purchases/${ref}/cancel`, { now: true })).status).toBe(400);
  });

  it('rebuilds entitlement snapshots from PostgreSQL', async () => {
    const { api, plan, snapshot, customer, product, provider } = await setup();
    const free = await plan({ type: 'recurring', limit: 7 });
    await api('POST', '/v1/sdk/activate', { customerRef: 'u1', planRef: free.reference });
    await harness.snapshots.delete(
      entitlementKey({
        providerId: provider.id,
        environment: 'sandbox',
        customerId: customer.id,
        productId: product.id,
      }),
    );
    expect(await snapshot()).toBeNull();
    expect(await harness.controlPlane.purchases.publishAll()).toBeGreaterThan(0);
    expect(await snapshot()).toMatchObject({ limit: 7, grantsAccess: true });
  });
});
