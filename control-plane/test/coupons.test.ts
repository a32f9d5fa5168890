import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { portalPage } from '../../test/helpers/portal-shop';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Coupons (docs/coupons.md): created and checked at the edge, redeemed under a guard that
 * concurrent activations cannot pass together, and taken off invoices to the cent: a percentage
 * per charge line, an amount spread over the lines, once, for some months or forever; kept
 * across a plan switch, whose credit for unused time is what was paid. Real PostgreSQL and chdb.
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

const at = (iso: string) => clock.set(new Date(iso));
const run = () => harness.controlPlane.scheduler.runDue();

async function seller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const api = async (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    body?: unknown,
    key: string | null = sandboxKey,
  ) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: key === null ? {} : { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    const text = response.body;
    return { status: response.statusCode, body: (text.startsWith('{') ? JSON.parse(text) : text) as Json };
  };
  const product = (await api('POST', '/v1/ui/products', { name: 'Tools' })).body;
  const plan = async (name: string, basePrice: number, extra: Json = {}) =>
    (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name,
        billingCycle: 'monthly',
        type: 'recurring',
        price: basePrice,
        ...extra,
      })
    ).body;
  const customer = async (ref: string, withCard = true) => {
    const created = (
      await api('POST', '/v1/sdk/customers', { externalRef: ref, email: `${ref}@example.com` })
    ).body;
    if (withCard)
      expect(
        (
          await api('POST', `/v1/sdk/customers/${created.reference}/payment-methods`, {
            card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
          })
        ).status,
      ).toBe(201);
    return created.reference as string;
  };
  const invoices = async (purchase: string) =>
    ((await api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}&limit=100`)).body.data as Json[]).filter(
      (invoice) => invoice.status !== 'draft',
    );
  return { api, product, plan, customer, invoices };
}

const lines = (invoice: Json | undefined) =>
  ((invoice?.lines ?? []) as Json[]).map((l) => [l.kind, l.amount, l.discounts ?? null]);

describe('coupons at the edge', () => {
  it('refuses malformed terms whole, keeps one active coupon per code, and renames and archives', async () => {
    const s = await seller('Edge coupons');
    const bad = async (body: Json, path: string) => {
      const answer = await s.api('POST', '/v1/sdk/coupons', body);
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('validation_failed');
      expect(JSON.stringify(answer.body)).toContain(path);
    };
    await bad(
      { name: 'Both', percentOff: 10, amountOff: 100, currency: 'usd', duration: 'once' },
      '/percentOff',
    );
    await bad({ name: 'Neither', duration: 'once' }, '/percentOff');
    await bad({ name: 'No currency', amountOff: 100, duration: 'once' }, '/currency');
    await bad({ name: 'Odd currency', amountOff: 100, currency: 'xyz', duration: 'once' }, '/currency');
    await bad({ name: 'Months', percentOff: 10, duration: 'repeating' }, '/durationInMonths');
    await bad({ name: 'Months', percentOff: 10, duration: 'once', durationInMonths: 3 }, '/durationInMonths');
    await bad({ name: 'Fine', percentOff: 12.345, duration: 'once' }, '/percentOff');
    await bad({ name: 'Over', percentOff: 100.01, duration: 'once' }, '/percentOff');
    await bad({ name: 'Zero', percentOff: 0, duration: 'once' }, '/percentOff');
    await bad({ name: 'Negative', amountOff: -5, currency: 'usd', duration: 'once' }, '/amountOff');
    await bad({ name: 'Huge', amountOff: 1e20, currency: 'usd', duration: 'once' }, '/amountOff');
    await bad(
      { name: 'Past', percentOff: 5, duration: 'once', redeemBy: '2020-01-01T00:00:00Z' },
      '/redeemBy',
    );
    await bad({ name: 'Nul\u0000', percentOff: 5, duration: 'once' }, '/name');
    await bad({ name: 'Where', percentOff: 5, duration: 'once', productIds: ['prd_nope'] }, '/productIds/0');
    await bad({ name: 'Code', percentOff: 5, duration: 'once', code: 'no spaces' }, '/code');
    await bad({ name: 'Code', percentOff: 5, duration: 'once', code: '🎟️🎟️🎟️' }, '/code');
    expect((await s.api('GET', '/v1/sdk/coupons')).body.data).toEqual([]);

    const made = await s.api('POST', '/v1/sdk/coupons', {
      name: 'Launch 🚀',
      code: 'Launch-20',
      percentOff: 12.5,
      duration: 'repeating',
      durationInMonths: 3,
      maxRedemptions: 10,
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      name: 'Launch 🚀',
      code: 'Launch-20',
      percentOff: 12.5,
      amountOff: null,
      duration: 'repeating',
      durationInMonths: 3,
      timesRedeemed: 0,
      status: 'active',
      valid: true,
    });
    expect(made.body.id).toMatch(/^cpn_/);
    const taken = await s.api('POST', '/v1/sdk/coupons', {
      name: 'Again',
      code: 'LAUNCH-20',
      percentOff: 5,
      duration: 'once',
    });
    expect([taken.status, taken.body.code]).toEqual([409, 'coupon_code_taken']);
    expect((await s.api('GET', '/v1/sdk/coupons/launch-20')).body.id).toBe(made.body.id);
    expect((await s.api('GET', '/v1/sdk/coupons?code=LAUNCH-20')).body.data.map((c: Json) => c.id)).toEqual([
      made.body.id,
    ]);
    expect((await s.api('GET', '/v1/sdk/coupons/cpn_nope')).body.code).toBe('coupon_not_found');
    expect((await s.api('PATCH', `/v1/sdk/coupons/${made.body.id}`, { name: 'Spring' })).body).toMatchObject({
      name: 'Spring',
      percentOff: 12.5,
    });
    expect((await s.api('PATCH', `/v1/sdk/coupons/${made.body.id}`, { percentOff: 50 })).status).toBe(400);
    const archived = await s.api('POST', `/v1/sdk/coupons/${made.body.id}/archive`);
    expect(archived.body).toMatchObject({ status: 'archived', valid: false });
    expect((await s.api('POST', `/v1/sdk/coupons/${made.body.id}/archive`)).body.status).toBe('archived');
    // The code is free again; the archived coupon is still found by its id.
    const reused = await s.api('POST', '/v1/sdk/coupons', {
      name: 'New',
      code: 'launch-20',
      percentOff: 5,
      duration: 'once',
    });
    expect(reused.status).toBe(201);
    expect((await s.api('GET', '/v1/sdk/coupons/LAUNCH-20')).body.id).toBe(reused.body.id);
    expect((await s.api('GET', `/v1/sdk/coupons/${made.body.id}`)).body.status).toBe('archived');
    // Each change announced once: created twice, renamed once, archived once (the second archive
    // changed nothing).
    const events = (
      await s.api('GET', '/v1/events?type=coupon.created,coupon.updated,coupon.archived&limit=100')
    ).body.data as Json[];
    expect(events.map((e) => [e.type, e.data.object.id, e.data.previous_attributes])).toEqual([
      ['coupon.created', reused.body.id, null],
      ['coupon.archived', made.body.id, { status: 'active' }],
      ['coupon.updated', made.body.id, { name: 'Launch 🚀' }],
      ['coupon.created', made.body.id, null],
    ]);
    // Another provider's coupon is not this one's.
    const other = await seller('Other coupons');
    expect((await other.api('GET', `/v1/sdk/coupons/${reused.body.id}`)).status).toBe(404);
    expect((await other.api('GET', '/v1/sdk/coupons/launch-20')).status).toBe(404);

    // Two decimals whatever binary floating point makes of them.
    for (const percentOff of [19.99, 0.07, 33.33, 0.01, 100]) {
      const fine = await s.api('POST', '/v1/sdk/coupons', {
        name: `P${percentOff}`,
        percentOff,
        duration: 'once',
      });
      expect([fine.status, fine.body.percentOff]).toEqual([201, percentOff]);
    }
  });
});

describe('coupons on invoices', () => {
  it('takes a percentage off every charge line of every invoice, forever, to the cent', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Forever');
    const plan = await s.plan('Pro', 999, { setupFee: 501 });
    const coupon = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Friends',
        code: 'FRIENDS',
        percentOff: 12.5,
        duration: 'forever',
      })
    ).body;
    const ref = await s.customer('ada');
    const activation = await s.api('POST', '/v1/sdk/activate', {
      customerRef: ref,
      planRef: plan.id,
      coupon: 'friends',
    });
    expect(activation.body.status).toBe('activated');
    const purchase = activation.body.purchaseRef as string;
    const [first] = await s.invoices(purchase);
    // 999 × 12.5 % = 124.875 → 125; 501 × 12.5 % = 62.625 → 63 (half to even on exact halves only).
    expect(lines(first)).toEqual([
      ['base', 999, null],
      ['discount', -125, 'base'],
      ['setup_fee', 501, null],
      ['discount', -63, 'setup_fee'],
    ]);
    expect(first).toMatchObject({ status: 'paid', total: 1312, amountPaid: 1312 });
    expect(first?.lines[1].description).toBe('Friends (12.5% off)');
    expect(first?.lines[1].period).toEqual(first?.lines[0].period);
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.discount).toMatchObject({
      coupon: coupon.id,
      code: 'FRIENDS',
      percentOff: 12.5,
      duration: 'forever',
      start: '2026-03-01T00:00:00.000Z',
      end: null,
    });
    expect((await s.api('GET', `/v1/sdk/coupons/${coupon.id}`)).body.timesRedeemed).toBe(1);

    // What the next invoice will be, in the API and in the customer's portal.
    at('2026-03-20T00:00:00.000Z');
    expect((await s.api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${purchase}`)).body).toMatchObject({
      renewal: { base: 999, setupFee: 0 },
      discount: -125,
      amountDue: 874,
    });
    const portal = await portalPage(harness, s.api, ref);
    expect(portal).toContain('<strong>$8.74</strong>, $9.99 for the next period, less $1.25 discount');
    expect(portal).toContain('<small>Friends: 12.5% off on every invoice</small>');

    at('2026-04-01T00:06:00.000Z');
    await run();
    const [, renewal] = await s.invoices(purchase);
    expect(lines(renewal)).toEqual([
      ['base', 999, null],
      ['discount', -125, 'base'],
    ]);
    expect(renewal).toMatchObject({ billingReason: 'renewal', status: 'paid', total: 874 });
    // MRR is the recurring fee as paid: 874 a month.
    const report = (await s.api('GET', '/v1/ui/analytics/revenue?from=2026-04&to=2026-04')).body;
    expect(report.months[0].mrr.end).toBe(874);
    // April's revenue received is the renewal as charged: the base less its discount.
    expect(report.months[0].revenue.recurring).toBe(874);
  });

  it('spreads an amount off over the lines for the months it lasts, then charges in full', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Repeating');
    const plan = await s.plan('Pro', 700, { setupFee: 500 });
    const coupon = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Ten off',
        amountOff: 1000,
        currency: 'USD',
        duration: 'repeating',
        durationInMonths: 2,
      })
    ).body;
    expect(coupon.currency).toBe('usd');
    const ref = await s.customer('bo');
    const purchase = (
      await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id, coupon: coupon.id })
    ).body.purchaseRef as string;
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.discount.end).toBe(
      '2026-05-01T00:00:00.000Z',
    );
    at('2026-04-01T00:06:00.000Z');
    await run();
    at('2026-05-01T00:06:00.000Z');
    await run();
    const [first, april, may] = await s.invoices(purchase);
    expect(lines(first)).toEqual([
      ['base', 700, null],
      ['discount', -700, 'base'],
      ['setup_fee', 500, null],
      ['discount', -300, 'setup_fee'],
    ]);
    expect(first).toMatchObject({ total: 200, status: 'paid' });
    // What the invoice cannot use is not carried over: 700 of the 1000.
    expect(lines(april)).toEqual([
      ['base', 700, null],
      ['discount', -700, 'base'],
    ]);
    expect(april).toMatchObject({ total: 0, status: 'paid' });
    expect(lines(may)).toEqual([['base', 700, null]]);
    expect(may).toMatchObject({ total: 700, status: 'paid' });
  });

  it('spends a once discount on the first invoice, and counts a trial’s conversion as that', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Once');
    const plan = await s.plan('Trial plan', 2000, { trialDays: 14 });
    await s.api('POST', '/v1/sdk/coupons', { name: 'Half', code: 'HALF', percentOff: 50, duration: 'once' });
    const ref = await s.customer('cy');
    const purchase = (
      await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id, coupon: 'HALF' })
    ).body.purchaseRef as string;
    expect(await s.invoices(purchase)).toEqual([]);
    at('2026-03-15T00:00:01.000Z');
    await run();
    at('2026-04-15T00:06:00.000Z');
    await run();
    const [conversion, renewal] = await s.invoices(purchase);
    expect(conversion).toMatchObject({ billingReason: 'trial_conversion', total: 1000 });
    expect(lines(renewal)).toEqual([['base', 2000, null]]);
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.discount).toMatchObject({
      duration: 'once',
      end: '2026-03-15T00:00:01.000Z',
    });
  });

  it('keeps the discount across a plan switch, crediting unused time at the price paid', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Switch');
    const pro = await s.plan('Pro', 1000);
    const max = await s.plan('Max', 3000);
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Half',
      code: 'HALF',
      percentOff: 50,
      duration: 'forever',
    });
    const ref = await s.customer('di');
    expect(
      (await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: pro.id, coupon: 'HALF' })).body
        .status,
    ).toBe('activated');
    // Half of March's 31 days left: 500 paid × 15.5 ÷ 31 = 250 credited.
    at('2026-03-16T12:00:00.000Z');
    const preview = (await s.api('POST', '/v1/sdk/activate/preview', { customerRef: ref, planRef: max.id }))
      .body;
    expect(preview.lines.map((l: Json) => [l.kind, l.amount])).toEqual([
      ['base', 3000],
      ['discount', -1500],
      ['proration', -250],
    ]);
    expect(preview.dueNow).toBe(1250);
    const switched = await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: max.id });
    expect(switched.body).toMatchObject({ status: 'activated', proration: { credit: 250, refunded: 0 } });
    const [first] = await s.invoices(switched.body.purchaseRef);
    expect(first).toMatchObject({ total: 1250, status: 'paid' });
    expect(
      (await s.api('GET', `/v1/sdk/purchases/${switched.body.purchaseRef}`)).body.discount,
    ).toMatchObject({
      code: 'HALF',
      start: '2026-03-01T00:00:00.000Z',
    });
    // One redemption: the switch kept the discount, it did not redeem the coupon again.
    expect((await s.api('GET', '/v1/sdk/coupons/HALF')).body.timesRedeemed).toBe(1);
  });

  it('leaves an amount off behind on a switch to a plan in another currency', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Currencies');
    const dollars = await s.plan('Dollars', 1000);
    const euros = await s.plan('Euros', 900, { currency: 'eur' });
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Five',
      code: 'FIVE',
      amountOff: 500,
      currency: 'usd',
      duration: 'forever',
    });
    const ref = await s.customer('ike');
    const first = await s.api('POST', '/v1/sdk/activate', {
      customerRef: ref,
      planRef: dollars.id,
      coupon: 'FIVE',
    });
    expect((await s.invoices(first.body.purchaseRef)).map((i) => i.total)).toEqual([500]);
    const preview = (await s.api('POST', '/v1/sdk/activate/preview', { customerRef: ref, planRef: euros.id }))
      .body;
    expect(preview.lines.map((l: Json) => l.kind)).not.toContain('discount');
    const switched = await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: euros.id });
    expect(switched.body.status).toBe('activated');
    expect((await s.api('GET', `/v1/sdk/purchases/${switched.body.purchaseRef}`)).body.discount).toBeNull();
  });

  it('redeems at checkout what the activation offered, and sets and removes a purchase’s discount', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Checkout coupons');
    const plan = await s.plan('Pro', 1000);
    const coupon = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Quarter',
        code: 'Q25',
        percentOff: 25,
        duration: 'forever',
      })
    ).body;
    const ref = await s.customer('eve', false);
    const offered = (
      await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id, coupon: 'q25' })
    ).body;
    expect(offered.status).toBe('payment_required');
    const session = (await s.api('GET', `/v1/sdk/checkout-sessions/${offered.checkoutSessionId}`)).body;
    expect(session.amount).toBe(750);
    const page = await s.api('GET', `/checkout/${offered.checkoutSessionId}`, undefined, null);
    expect(page.body).toContain('Quarter (25% off), on every invoice');
    expect(page.body).toContain('$7.50 due today');
    // Checked, not redeemed, until it is paid.
    expect((await s.api('GET', `/v1/sdk/coupons/${coupon.id}`)).body.timesRedeemed).toBe(0);
    const paid = await s.api(
      'POST',
      `/checkout/${offered.checkoutSessionId}/pay`,
      { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
      null,
    );
    expect(paid.status).toBe(200);
    const purchase = (await s.api('GET', `/v1/sdk/checkout-sessions/${offered.checkoutSessionId}`)).body
      .purchaseRef;
    const [first] = await s.invoices(purchase);
    expect(first).toMatchObject({ total: 750, amountPaid: 750 });
    expect((await s.api('GET', `/v1/sdk/coupons/${coupon.id}`)).body.timesRedeemed).toBe(1);

    // Removed: the next renewal is charged in full. Set again: the one after is discounted.
    expect((await s.api('DELETE', `/v1/sdk/purchases/${purchase}/discount`)).body.discount).toBeNull();
    const [removed] = (await s.api('GET', '/v1/events?type=purchase.updated&limit=1')).body.data as Json[];
    expect(removed?.data.object).toMatchObject({ id: purchase, discount: null });
    expect(removed?.data.previous_attributes.discount).toMatchObject({ coupon: coupon.id, percentOff: 25 });
    const [created] = (await s.api('GET', '/v1/events?type=purchase.created&limit=1')).body.data as Json[];
    expect(created?.data.object.discount).toMatchObject({ coupon: coupon.id, code: 'Q25' });
    at('2026-04-01T00:06:00.000Z');
    await run();
    const tenOff = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Ten',
        amountOff: 1000,
        currency: 'eur',
        duration: 'once',
      })
    ).body;
    const wrongCurrency = await s.api('POST', `/v1/sdk/purchases/${purchase}/discount`, {
      coupon: tenOff.id,
    });
    expect([wrongCurrency.status, wrongCurrency.body.code]).toEqual([409, 'coupon_not_redeemable']);
    const set = await s.api('POST', `/v1/sdk/purchases/${purchase}/discount`, { coupon: 'Q25' });
    expect(set.body.discount).toMatchObject({ coupon: coupon.id, start: '2026-04-01T00:06:00.000Z' });
    at('2026-05-01T00:06:00.000Z');
    await run();
    const [, april, may] = await s.invoices(purchase);
    expect(april?.total).toBe(1000);
    expect(may?.total).toBe(750);
    expect((await s.api('POST', `/v1/sdk/purchases/pur_nope/discount`, { coupon: 'Q25' })).status).toBe(404);
  });

  it('takes a promotion code typed on the hosted checkout page, codes only, ten misses at most', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Promotion codes');
    const plan = await s.plan('Pro', 2000);
    const idOnly = (
      await s.api('POST', '/v1/sdk/coupons', { name: 'Secret', percentOff: 90, duration: 'forever' })
    ).body;
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Spring',
      code: 'SPRING',
      amountOff: 500,
      currency: 'usd',
      duration: 'once',
    });
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Euros',
      code: 'EUROS',
      amountOff: 500,
      currency: 'eur',
      duration: 'once',
    });
    const ref = await s.customer('gil', false);
    const created = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ref,
      planRef: plan.id,
      allowPromotionCodes: true,
    });
    expect(created.body).toMatchObject({ amount: 2000, coupon: null, allowPromotionCodes: true });
    const id = created.body.id as string;
    const code = (value: string | null) =>
      s.api('POST', `/checkout/${id}/promotion-code`, { code: value }, null);
    expect((await s.api('GET', `/checkout/${id}`, undefined, null)).body).toContain(
      '<label for="code">Promotion code</label>',
    );
    // A coupon's id is not a code; a code in another currency does not fit the plan.
    expect((await code(idOnly.id)).body.code).toBe('coupon_not_found');
    expect((await code('EUROS')).body.code).toBe('coupon_not_redeemable');
    expect(await code('spring')).toMatchObject({ status: 200, body: { amount: 1500, currency: 'usd' } });
    const page = (await s.api('GET', `/checkout/${id}`, undefined, null)).body as unknown as string;
    expect(page).toContain('Spring ($5.00 off), on the first invoice');
    expect(page).toContain('$15.00 due today');
    expect(page).toContain('Remove the promotion code');
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${id}`)).body.amount).toBe(1500);
    expect((await code(null)).body.amount).toBe(2000);
    expect((await code('SPRING')).body.amount).toBe(1500);
    // Guessing stops after ten codes that match nothing (one was the id above).
    for (let i = 0; i < 9; i++) expect((await code(`GUESS${i}`)).status).toBe(404);
    expect(await code('SPRING')).toMatchObject({ status: 429, body: { code: 'too_many_attempts' } });
    // Pay: the code's coupon is redeemed with the purchase, the invoice as the page said.
    const paid = await s.api(
      'POST',
      `/checkout/${id}/pay`,
      { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
      null,
    );
    expect(paid.status).toBe(200);
    const purchase = (await s.api('GET', `/v1/sdk/checkout-sessions/${id}`)).body.purchaseRef as string;
    expect((await s.invoices(purchase)).map((invoice) => invoice.total)).toEqual([1500]);
    expect((await s.api('GET', '/v1/sdk/coupons/SPRING')).body.timesRedeemed).toBe(1);
    expect((await code(null)).body.code).toBe('checkout_session_closed');
    // Only plan sessions made with allowPromotionCodes take codes.
    const plain = (await s.api('POST', '/v1/sdk/checkout-sessions', { customerRef: ref, planRef: plan.id }))
      .body;
    const refusedPlain = await s.api(
      'POST',
      `/checkout/${plain.id}/promotion-code`,
      { code: 'SPRING' },
      null,
    );
    expect(refusedPlain.body.code).toBe('promotion_codes_not_allowed');
    expect((await s.api('GET', `/checkout/${plain.id}`, undefined, null)).body).not.toContain(
      '<label for="code">',
    );
    // A card-only session has nothing to take a code off (top-ups do: coupons-topups.test.ts).
    const setup = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ref,
      setup: true,
      allowPromotionCodes: true,
    });
    expect([setup.status, setup.body.errors?.[0]?.path]).toEqual([400, '/allowPromotionCodes']);
    // A session made with a coupon shows it and charges it.
    const withCoupon = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ref,
      planRef: plan.id,
      coupon: 'spring',
    });
    expect(withCoupon.body).toMatchObject({
      amount: 1500,
      amountSubtotal: 2000,
      amountDiscount: 500,
      coupon: expect.stringMatching(/^cpn_/),
    });
    expect(
      (
        await s.api('POST', '/v1/sdk/checkout-sessions', {
          customerRef: ref,
          planRef: plan.id,
          coupon: 'EUROS',
        })
      ).body.code,
    ).toBe('coupon_not_redeemable');
  });

  it('keeps a first-time-only coupon for customers who never paid, and keeps metadata', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('First time');
    const plan = await s.plan('Pro', 1000);
    const other = await s.plan('Max', 3000);
    const made = await s.api('POST', '/v1/sdk/coupons', {
      name: 'Welcome',
      code: 'WELCOME',
      percentOff: 50,
      duration: 'once',
      firstTimeOnly: true,
      metadata: { campaign: 'spring 🌱' },
    });
    expect(made.body).toMatchObject({ firstTimeOnly: true, metadata: { campaign: 'spring 🌱' } });
    const newcomer = await s.customer('new');
    const first = await s.api('POST', '/v1/sdk/activate', {
      customerRef: newcomer,
      planRef: plan.id,
      coupon: 'WELCOME',
    });
    expect(first.body.status).toBe('activated');
    expect((await s.invoices(first.body.purchaseRef)).map((i) => i.total)).toEqual([500]);
    // Paid once now: the same customer's switch may not use it again, nor its preview.
    const again = await s.api('POST', '/v1/sdk/activate', {
      customerRef: newcomer,
      planRef: other.id,
      coupon: 'WELCOME',
    });
    expect([again.status, again.body.code]).toEqual([409, 'coupon_not_redeemable']);
    expect(again.body.detail).toContain('for first-time customers');
    const preview = await s.api('POST', '/v1/sdk/activate/preview', {
      customerRef: newcomer,
      planRef: other.id,
      coupon: 'WELCOME',
    });
    expect(preview.body.code).toBe('coupon_not_redeemable');
    // Metadata changes alone, announced with what it was.
    const patched = await s.api('PATCH', `/v1/sdk/coupons/${made.body.id}`, {
      metadata: { campaign: 'summer' },
    });
    expect(patched.body).toMatchObject({ name: 'Welcome', metadata: { campaign: 'summer' } });
    const [updated] = (await s.api('GET', '/v1/events?type=coupon.updated&limit=1')).body.data as Json[];
    expect(updated?.data.previous_attributes).toEqual({ metadata: { campaign: 'spring 🌱' } });
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    expect((await s.api('PATCH', `/v1/sdk/coupons/${made.body.id}`, { metadata: tooMany })).status).toBe(400);
  });

  it('redeems a coupon with a minimum amount only on purchases in its currency that reach it', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Minimum');
    const small = await s.plan('Small', 1000);
    const withFee = await s.plan('Setup', 800, { setupFee: 300 });
    const euro = await s.plan('Euro', 5000, { currency: 'eur' });
    const terms = { name: 'Big spender', code: 'BIG10', percentOff: 10, duration: 'forever' };
    const bad = async (extra: Json, path: string) => {
      const answer = await s.api('POST', '/v1/sdk/coupons', { ...terms, ...extra });
      expect([answer.status, answer.body.errors?.map((e: Json) => e.path)]).toEqual([
        400,
        expect.arrayContaining([path]),
      ]);
    };
    await bad({ minimumAmount: 1100 }, '/minimumAmountCurrency');
    await bad({ minimumAmountCurrency: 'usd' }, '/minimumAmountCurrency');
    await bad({ minimumAmount: 1100, minimumAmountCurrency: 'XYZ' }, '/minimumAmountCurrency');
    await bad({ minimumAmount: -5, minimumAmountCurrency: 'usd' }, '/minimumAmount');
    await bad({ minimumAmount: 1e20, minimumAmountCurrency: 'usd' }, '/minimumAmount');
    await bad({ minimumAmount: 10.5, minimumAmountCurrency: 'usd' }, '/minimumAmount');
    await bad(
      {
        percentOff: undefined,
        amountOff: 100,
        currency: 'eur',
        minimumAmount: 1100,
        minimumAmountCurrency: 'usd',
      },
      '/minimumAmountCurrency',
    );
    const made = await s.api('POST', '/v1/sdk/coupons', {
      ...terms,
      minimumAmount: 1100,
      minimumAmountCurrency: 'USD',
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ minimumAmount: 1100, minimumAmountCurrency: 'usd', valid: true });

    // $10.00 a month is under the minimum: refused by activation, preview and checkout alike.
    const ref = await s.customer('min');
    const under = await s.api('POST', '/v1/sdk/activate', {
      customerRef: ref,
      planRef: small.id,
      coupon: 'big10',
    });
    expect([under.status, under.body.code]).toEqual([409, 'coupon_not_redeemable']);
    expect(under.body.detail).toContain('at least $11.00, and this one comes to $10.00');
    const preview = await s.api('POST', '/v1/sdk/activate/preview', {
      customerRef: ref,
      planRef: small.id,
      coupon: 'BIG10',
    });
    expect(preview.body.code).toBe('coupon_not_redeemable');
    const session = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ref,
      planRef: small.id,
      coupon: 'BIG10',
    });
    expect(session.body.code).toBe('coupon_not_redeemable');
    // A euro plan does not redeem a coupon whose minimum is in dollars.
    const inEuros = await s.api('POST', '/v1/sdk/activate', {
      customerRef: ref,
      planRef: euro.id,
      coupon: 'BIG10',
    });
    expect([inEuros.body.code, inEuros.body.detail]).toEqual([
      'coupon_not_redeemable',
      expect.stringContaining('a purchase in USD of at least $11.00'),
    ]);
    expect((await s.api('GET', `/v1/sdk/purchases?customerRef=${ref}`)).body.data).toEqual([]);

    // The promotion-code field of a checkout for the small plan refuses the code too.
    const open = (
      await s.api('POST', '/v1/sdk/checkout-sessions', {
        customerRef: ref,
        planRef: small.id,
        allowPromotionCodes: true,
      })
    ).body;
    const typed = await s.api('POST', `/checkout/${open.id}/promotion-code`, { code: 'BIG10' }, null);
    expect([typed.status, typed.body.code]).toEqual([409, 'coupon_not_redeemable']);

    // $8.00 a month with a $3.00 setup fee reaches it: 10 % off the first invoice's $11.00.
    const reached = await s.api('POST', '/v1/sdk/activate', {
      customerRef: ref,
      planRef: withFee.id,
      coupon: 'BIG10',
    });
    expect(reached.body.status).toBe('activated');
    expect((await s.invoices(reached.body.purchaseRef)).map((i) => i.total)).toEqual([990]);

    // Redeemed on a purchase in force, it is measured against that purchase's plan.
    const other = await s.customer('min-other');
    const smallPurchase = (await s.api('POST', '/v1/sdk/activate', { customerRef: other, planRef: small.id }))
      .body.purchaseRef;
    const onSmall = await s.api('POST', `/v1/sdk/purchases/${smallPurchase}/discount`, { coupon: 'BIG10' });
    expect([onSmall.status, onSmall.body.code]).toEqual([409, 'coupon_not_redeemable']);
    expect((await s.api('GET', `/v1/sdk/coupons/${made.body.id}`)).body.timesRedeemed).toBe(1);
  });

  it('keeps a coupon for one customer to that customer, by id or reference', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('One customer');
    const plan = await s.plan('Pro', 1000);
    const ada = await s.customer('ada-one');
    const bob = await s.customer('bob-one');
    const unknown = await s.api('POST', '/v1/sdk/coupons', {
      name: 'Nobody',
      percentOff: 10,
      duration: 'once',
      customerRef: 'no-such-customer',
    });
    expect([unknown.status, unknown.body.errors?.[0]?.path]).toEqual([400, '/customerRef']);
    // Named by the provider's own reference, kept as the customer's id.
    const made = await s.api('POST', '/v1/sdk/coupons', {
      name: 'Just for Ada',
      code: 'ADA50',
      percentOff: 50,
      duration: 'once',
      customerRef: 'ada-one',
    });
    expect(made.body).toMatchObject({ customerRef: ada, valid: true });
    const bobs = await s.api('POST', '/v1/sdk/activate', {
      customerRef: bob,
      planRef: plan.id,
      coupon: 'ADA50',
    });
    expect([bobs.status, bobs.body.code, bobs.body.detail]).toEqual([
      409,
      'coupon_not_redeemable',
      expect.stringContaining('for another customer'),
    ]);
    const bobSession = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: bob,
      topup: { credits: 10, amount: 1000 },
      coupon: 'ADA50',
    });
    expect(bobSession.body.code).toBe('coupon_not_redeemable');
    const adas = await s.api('POST', '/v1/sdk/activate', {
      customerRef: ada,
      planRef: plan.id,
      coupon: 'ada50',
    });
    expect(adas.body.status).toBe('activated');
    expect((await s.invoices(adas.body.purchaseRef)).map((i) => i.total)).toEqual([500]);
  });

  it('refuses coupons that cannot be redeemed, and activates nothing then', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Refusals');
    const plan = await s.plan('Pro', 1000);
    const otherProduct = (await s.api('POST', '/v1/ui/products', { name: 'Elsewhere' })).body;
    const elsewhere = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Else',
        percentOff: 10,
        duration: 'once',
        productIds: [otherProduct.id],
      })
    ).body;
    const late = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Late',
        percentOff: 10,
        duration: 'once',
        redeemBy: '2026-03-02T00:00:00Z',
      })
    ).body;
    const ref = await s.customer('fay');
    const refused = async (coupon: string, code: string) => {
      const answer = await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id, coupon });
      expect([answer.status, answer.body.code]).toEqual([code === 'coupon_not_found' ? 404 : 409, code]);
      const preview = await s.api('POST', '/v1/sdk/activate/preview', {
        customerRef: ref,
        planRef: plan.id,
        coupon,
      });
      expect(preview.body.code).toBe(code);
    };
    await refused('NOPE', 'coupon_not_found');
    await refused(elsewhere.id, 'coupon_not_redeemable');
    at('2026-03-03T00:00:00.000Z');
    await refused(late.id, 'coupon_not_redeemable');
    expect((await s.api('GET', `/v1/sdk/purchases?customerRef=${ref}`)).body.data).toEqual([]);
    expect((await s.api('GET', `/v1/sdk/coupons/${late.id}`)).body).toMatchObject({
      valid: false,
      timesRedeemed: 0,
    });
  });

  it('lets exactly maxRedemptions of many simultaneous activations redeem a coupon', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Race');
    const plan = await s.plan('Pro', 1000);
    const coupon = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Three',
        code: 'THREE',
        percentOff: 30,
        duration: 'forever',
        maxRedemptions: 3,
      })
    ).body;
    const refs = await Promise.all(Array.from({ length: 12 }, (_, i) => s.customer(`racer-${i}`)));
    const answers = await Promise.all(
      refs.map((ref) =>
        s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id, coupon: 'THREE' }),
      ),
    );
    const won = answers.filter((a) => a.status === 200 && a.body.status === 'activated');
    const lost = answers.filter((a) => a.status === 409);
    expect(won).toHaveLength(3);
    expect(lost).toHaveLength(9);
    for (const answer of lost) expect(answer.body.code).toBe('coupon_not_redeemable');
    expect((await s.api('GET', `/v1/sdk/coupons/${coupon.id}`)).body).toMatchObject({
      timesRedeemed: 3,
      valid: false,
    });
    // Only the winners hold a purchase, each charged 700; the others were charged nothing.
    const purchases = (await s.api('GET', '/v1/sdk/purchases?limit=100')).body.data as Json[];
    expect(purchases).toHaveLength(3);
    for (const p of purchases) {
      expect(p.discount.coupon).toBe(coupon.id);
      const [first] = await s.invoices(p.id);
      expect(first).toMatchObject({ total: 700, amountPaid: 700 });
    }
    // The same again, with the same idempotency key, redeems nothing more.
    const again = await s.api('POST', '/v1/sdk/activate', {
      customerRef: refs[0],
      planRef: plan.id,
      coupon: 'THREE',
    });
    expect(again.body.status === 'already_active' || again.body.code === 'coupon_not_redeemable').toBe(true);
    expect((await s.api('GET', `/v1/sdk/coupons/${coupon.id}`)).body.timesRedeemed).toBe(3);
  });
});
