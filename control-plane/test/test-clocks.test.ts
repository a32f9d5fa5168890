import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Sandbox test clocks on real PostgreSQL and ClickHouse (chdb): customers on a clock live at its
 * frozen time, the scheduler's ordinary passes leave them alone, and advancing the clock closes
 * their periods, converts their trials and bills their usage.
 */
let harness: TestControlPlane;

beforeAll(async () => {
  // The real clock: the test clock's months lie in the past, so an ordinary pass would bill them.
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

async function seller(name: string) {
  const keys = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, keys.sandboxKey);
  const live = injectClient(harness.controlPlane, keys.liveKey);
  const product = (await api('POST', '/v1/ui/products', { name: `${name} tools` })).body;
  const events = async (customer: string) => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1
         AND (payload->'data'->'object'->>'customer' = $2 OR payload->'data'->'object'->>'id' = $2)
       ORDER BY created_at, id`,
      [keys.provider.id, customer],
    );
    return rows.map((r) => ({
      type: r.type,
      created: r.payload.created as number,
      object: r.payload.data.object,
    }));
  };
  return { api, live, product, events };
}

const unix = (iso: string) => Date.parse(iso) / 1000;

describe('sandbox test clocks', () => {
  it('exist in sandbox only, and a customer is created on one that exists', async () => {
    const { api, live } = await seller('Clocks');
    const refused = await live('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-06-01T00:00:00Z' });
    expect([refused.status, refused.body.code]).toEqual([404, 'sandbox_only']);
    expect((await api('POST', '/v1/sdk/test-clocks', { frozenTime: 'soon' })).status).toBe(400);
    const clock = await api('POST', '/v1/sdk/test-clocks', { frozenTime: unix('2026-06-01T00:00:00Z') });
    expect(clock.status).toBe(201);
    expect(clock.body).toMatchObject({ frozenTime: '2026-06-01T00:00:00.000Z', status: 'ready' });
    expect((await api('GET', `/v1/sdk/test-clocks/${clock.body.id}`)).body.id).toBe(clock.body.id);
    const missing = await api('POST', '/v1/sdk/customers', { testClock: 'tc_nope' });
    expect([missing.status, missing.body.code]).toEqual([404, 'test_clock_not_found']);
    const liveCustomer = await live('POST', '/v1/sdk/customers', { testClock: clock.body.id });
    expect(liveCustomer.status).toBe(400);
    const customer = await api('POST', '/v1/sdk/customers', { testClock: clock.body.id });
    expect(customer.body).toMatchObject({ testClock: clock.body.id, createdAt: '2026-06-01T00:00:00.000Z' });
    // Only forward, and a bounded step at a time.
    for (const frozenTime of ['2026-05-31T00:00:00Z', '2027-06-03T00:00:00Z']) {
      const bad = await api('POST', `/v1/sdk/test-clocks/${clock.body.id}/advance`, { frozenTime });
      expect(bad.status).toBe(400);
      expect(JSON.stringify(bad.body)).toContain('/frozenTime');
    }
  });

  it('gives a clock’s customer a checkout session that lives in real time, paid at the clock’s time', async () => {
    const { api, product, events } = await seller('Clock checkout');
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, { name: 'Pro', type: 'recurring', price: 900 })
    ).body;
    // A clock months in the past: a session dated by it would be expired before anyone saw it.
    const clock = (await api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-01-01T00:00:00Z' })).body;
    const customer = (await api('POST', '/v1/sdk/customers', { testClock: clock.id })).body;
    const before = Date.now();
    const session = await api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: customer.reference,
      planRef: plan.id,
      expiresInMinutes: 30,
    });
    expect(session.status).toBe(201);
    const expiresAt = Date.parse(session.body.expiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 30 * 60_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 30 * 60_000);
    const page = await harness.controlPlane.app.inject({
      method: 'GET',
      url: `/checkout/${session.body.id}`,
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Pay');
    // The expiry job, in real time, leaves it open.
    await harness.controlPlane.scheduler.runDue();
    expect((await api('GET', `/v1/sdk/checkout-sessions/${session.body.id}`)).body.status).toBe('active');

    // Paid on the hosted page: the purchase it starts, its invoice and events are the clock's.
    const paid = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${session.body.id}/pay`,
      payload: { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
    });
    expect(paid.statusCode, paid.body).toBe(200);
    const purchases = (await api('GET', `/v1/sdk/purchases?customerRef=${customer.reference}`)).body.data;
    expect(purchases).toHaveLength(1);
    expect(purchases[0]).toMatchObject({
      status: 'active',
      periodStart: '2026-01-01T00:00:00.000Z',
      periodEnd: '2026-02-01T00:00:00.000Z',
    });
    const invoices = (await api('GET', `/v1/sdk/invoices?customerRef=${customer.reference}`)).body
      .data as Json[];
    expect(invoices.map((i) => [i.total, i.status, i.createdAt])).toEqual([
      [900, 'paid', '2026-01-01T00:00:00.000Z'],
    ]);
    const completed = (await events(session.body.id)).find((e) => e.type === 'checkout_session.completed');
    expect(completed?.created).toBe(unix('2026-01-01T00:00:00Z'));
    // Advancing the clock a month renews it, as for a purchase the API started.
    await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-02-01T00:00:00Z' });
    expect((await api('GET', `/v1/sdk/purchases/${purchases[0].id}`)).body.periodStart).toBe(
      '2026-02-01T00:00:00.000Z',
    );
  });

  it('bills a usage period and converts a trial when the clock is advanced, and not before', async () => {
    const { api, product, events } = await seller('Clockwork');
    const clock = (await api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-06-01T00:00:00Z' })).body;
    const metered = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Metered',
        type: 'usage-based',
        billingCycle: 'monthly',
        price: 2,
        freeUnits: 10,
      })
    ).body;
    const trial = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Pro trial',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 900,
        trialDays: 7,
      })
    ).body;
    const onClock = async (planRef: string) => {
      const customer = (await api('POST', '/v1/sdk/customers', { testClock: clock.id })).body
        .reference as string;
      const card = await api('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
        card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
      });
      expect(card.status).toBe(201);
      const activation = await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef });
      expect(activation.body.status).toBe('activated');
      return { customer, purchase: activation.body.purchaseRef as string };
    };
    const usage = await onClock(metered.id);
    const trialing = await onClock(trial.id);
    const purchase = (await api('GET', `/v1/sdk/purchases/${usage.purchase}`)).body;
    expect(purchase).toMatchObject({
      periodStart: '2026-06-01T00:00:00.000Z',
      periodEnd: '2026-07-01T00:00:00.000Z',
    });
    expect((await api('GET', `/v1/sdk/purchases/${trialing.purchase}`)).body.status).toBe('trialing');

    // 25 units at the clock's time (June 2026, long past for the real clock).
    const recorded = await api('POST', '/v1/sdk/usages', {
      customerRef: usage.customer,
      productRef: product.id,
      units: 25,
    });
    expect(recorded.status).toBe(202);
    await harness.settled();

    // Ordinary passes run on the real clock, months after these periods ended: they touch nothing.
    await harness.controlPlane.scheduler.runDue();
    expect((await api('GET', `/v1/sdk/purchases/${usage.purchase}`)).body.periodStart).toBe(
      '2026-06-01T00:00:00.000Z',
    );
    expect((await api('GET', `/v1/sdk/purchases/${trialing.purchase}`)).body.status).toBe('trialing');

    const advanced = await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, {
      frozenTime: '2026-07-02T00:00:00Z',
    });
    expect(advanced.body).toMatchObject({ frozenTime: '2026-07-02T00:00:00.000Z', status: 'ready' });

    // The trial converted on its last day, charged 9.00.
    const converted = await events(trialing.customer);
    expect(converted.find((e) => e.type === 'payment.succeeded')).toMatchObject({
      created: unix('2026-06-08T00:00:00Z'),
      object: { amount: 900 },
    });
    expect((await api('GET', `/v1/sdk/purchases/${trialing.purchase}`)).body.status).toBe('active');

    // The usage period closed: (25 − 10 free) × 2¢ = 30¢, in arrears, at the clock's time.
    const renewed = (await api('GET', `/v1/sdk/purchases/${usage.purchase}`)).body;
    expect(renewed).toMatchObject({ periodStart: '2026-07-01T00:00:00.000Z', status: 'active' });
    const invoices = (await api('GET', `/v1/sdk/invoices?purchaseRef=${usage.purchase}`)).body.data as Json[];
    const closed = invoices.find((i) => i.billingReason === 'renewal');
    expect(closed).toMatchObject({
      total: 30,
      status: 'paid',
      usage: { periodEnd: '2026-07-01T00:00:00.000Z', units: 25, freeUnits: 10, billableUnits: 15 },
      // Drafted when the period ended, finalized once the lateness allowance had passed.
      createdAt: '2026-07-01T00:00:00.000Z',
      finalizedAt: '2026-07-02T00:00:00.000Z',
    });
    const billing = (await events(usage.customer)).filter((e) =>
      ['usage.charged', 'payment.succeeded', 'purchase.renewed', 'usage.reset'].includes(e.type),
    );
    expect(billing.map((e) => e.type)).toEqual([
      'usage.charged',
      'payment.succeeded',
      'purchase.renewed',
      'usage.reset',
    ]);
    expect(billing.every((e) => e.created === unix('2026-07-02T00:00:00Z'))).toBe(true);

    // Two advances at once: one runs, the other is told to wait.
    const both = await Promise.all([
      api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-07-20T00:00:00Z' }),
      api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-07-21T00:00:00Z' }),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(both.find((r) => r.status === 409)?.body.code).toBe('test_clock_advancing');
  });

  it('voids the invoice dunning is collecting: retries stop and the purchase is active again', async () => {
    const { api, product, events } = await seller('Void');
    const clock = (await api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-03-01T00:00:00Z' })).body;
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Monthly',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 1500,
      })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', { testClock: clock.id })).body
      .reference as string;
    // Paid at first, refused from the renewal on.
    const card = (number: string) =>
      api('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
        card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
      });
    expect((await card(SANDBOX_CARDS.succeeds)).status).toBe(201);
    const activation = await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(activation.body.status).toBe('activated');
    const purchase = activation.body.purchaseRef as string;
    // The card on file from now on is refused.
    expect((await card(SANDBOX_CARDS.failsLater)).status).toBe(201);
    await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-04-01T12:00:00Z' });
    expect((await api('GET', `/v1/sdk/purchases/${purchase}`)).body.status).toBe('past_due');
    const invoices = (await api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}`)).body.data as Json[];
    const open = invoices.find((i) => i.status === 'open');
    const paid = invoices.find((i) => i.status === 'paid');
    expect(open).toMatchObject({ billingReason: 'renewal', total: 1500, attemptCount: 1 });

    // A paid invoice cannot be voided.
    const refused = await api('POST', `/v1/sdk/invoices/${paid?.id}/void`);
    expect([refused.status, refused.body.code]).toEqual([409, 'invoice_not_open']);
    // Voided five times at once: each answer is the void invoice, the purchase moves once.
    const voids = await Promise.all(
      Array.from({ length: 5 }, () => api('POST', `/v1/sdk/invoices/${open?.id}/void`)),
    );
    expect(voids.map((v) => v.status)).toEqual([200, 200, 200, 200, 200]);
    expect(voids[0]?.body).toMatchObject({
      status: 'void',
      amountDue: 0,
      closedAt: '2026-04-01T12:00:00.000Z',
    });
    // The period the invoice billed is forgiven: the purchase moves on to the next one, active.
    expect((await api('GET', `/v1/sdk/purchases/${purchase}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-04-01T00:00:00.000Z',
      periodEnd: '2026-05-01T00:00:00.000Z',
    });
    const moved = (await events(customer)).filter((e) =>
      ['purchase.updated', 'usage.reset'].includes(e.type),
    );
    expect(moved.map((e) => e.type)).toEqual(['purchase.updated', 'usage.reset']);
    expect(moved[0]?.object).toMatchObject({ id: purchase, status: 'active' });

    // Past every dunning retry: nothing more is charged for the voided period.
    const attempts = async () =>
      (await harness.pool.query('SELECT count(*)::int AS n FROM payments WHERE purchase_id = $1', [purchase]))
        .rows[0].n as number;
    const before = await attempts();
    await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-04-20T00:00:00Z' });
    expect(await attempts()).toBe(before);
    expect((await api('GET', `/v1/sdk/purchases/${purchase}`)).body.status).toBe('active');
  });

  it('drafts a usage invoice while late records may arrive, then finalizes it once', async () => {
    const { api, product, events } = await seller('Drafts');
    const clock = (await api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-06-01T00:00:00Z' })).body;
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Metered',
        type: 'usage-based',
        billingCycle: 'monthly',
        price: 2,
        freeUnits: 10,
      })
    ).body;
    const subscribe = async () => {
      const customer = (await api('POST', '/v1/sdk/customers', { testClock: clock.id })).body
        .reference as string;
      await api('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
        card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
      });
      const activation = await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
      expect(activation.body.status).toBe('activated');
      const used = await api('POST', '/v1/sdk/usages', {
        customerRef: customer,
        productRef: product.id,
        units: 25,
      });
      expect(used.status).toBe(202);
      return { customer, purchase: activation.body.purchaseRef as string };
    };
    const first = await subscribe();
    const second = await subscribe();
    await harness.settled();
    const invoiceOf = async (purchase: string) => {
      const list = (
        (await api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}`)).body.data as Json[]
      ).filter((i) => i.billingReason === 'renewal');
      expect(list).toHaveLength(1);
      return list[0] as Json;
    };

    // Two minutes after June ends, inside the 5-minute lateness allowance: a draft of the bill.
    await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-07-01T00:02:00Z' });
    const draft = await invoiceOf(first.purchase);
    expect(draft).toMatchObject({
      status: 'draft',
      billingReason: 'renewal',
      usage: { units: 25, freeUnits: 10, billableUnits: 15 },
      total: 30,
      amountDue: 30,
      finalizedAt: null,
      hostedUrl: null,
      pdfUrl: null,
    });
    expect((await api('GET', `/v1/sdk/purchases/${first.purchase}`)).body.periodStart).toBe(
      '2026-06-01T00:00:00.000Z',
    );
    expect((await events(first.customer)).some((e) => e.type === 'usage.charged')).toBe(false);
    const voided = await api('POST', `/v1/sdk/invoices/${draft.id}/void`);
    expect([voided.status, voided.body.code]).toEqual([409, 'invoice_not_open']);

    // A record of June arrives late; the next pass recounts the same draft.
    const late = await api('POST', '/v1/sdk/usages', {
      customerRef: first.customer,
      productRef: product.id,
      units: 5,
      timestamp: '2026-06-30T23:59:00Z',
    });
    expect(late.status).toBe(202);
    await harness.settled();
    await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-07-01T00:03:00Z' });
    expect(await invoiceOf(first.purchase)).toMatchObject({
      id: draft.id,
      status: 'draft',
      usage: { units: 30 },
      total: 40,
    });

    // Finalized now, five times at once: the period closes once, (30 − 10) × 2¢ = 40¢ is paid.
    const finalized = await Promise.all(
      Array.from({ length: 5 }, () => api('POST', `/v1/sdk/invoices/${draft.id}/finalize`)),
    );
    expect(finalized.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    for (const r of finalized) expect(r.body).toMatchObject({ id: draft.id, status: 'paid', total: 40 });
    const paid = await invoiceOf(first.purchase);
    expect(paid).toMatchObject({ finalizedAt: '2026-07-01T00:03:00.000Z', amountPaid: 40 });
    expect(paid.hostedUrl).toMatch(/\/invoice\/[0-9a-f]{64}$/);
    expect((await api('GET', `/v1/sdk/purchases/${first.purchase}`)).body.periodStart).toBe(
      '2026-07-01T00:00:00.000Z',
    );
    const billed = (await events(first.customer)).filter((e) =>
      ['usage.charged', 'payment.succeeded', 'purchase.renewed'].includes(e.type),
    );
    expect(billed.map((e) => e.type)).toEqual(['usage.charged', 'payment.succeeded', 'purchase.renewed']);
    expect(billed[0]?.object).toMatchObject({ invoice: draft.id, quantity: 30, amount: 40 });

    // The other purchase's draft is finalized by the scheduler once the allowance has passed.
    const other = await invoiceOf(second.purchase);
    expect(other.status).toBe('draft');
    await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime: '2026-07-01T00:10:00Z' });
    expect(await invoiceOf(second.purchase)).toMatchObject({ id: other.id, status: 'paid', total: 30 });
  });
});
