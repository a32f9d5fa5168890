import { describe, expect, it } from 'vitest';
import { hiddenField, portalSuite } from '../../test/helpers/portal-shop';

/**
 * A product's retention offer (docs/portal.md), as Stripe's portal offers a coupon on its
 * cancellation flow: on real PostgreSQL, through the portal's own pages. The offer is shown to a
 * purchase without a discount while the coupon can be redeemed on it; taking it redeems the coupon
 * on the purchase instead of cancelling, once, also when customers take a last redemption at once.
 */
const { clock, get, post, shop } = portalSuite(new Date('2026-03-01T00:00:00.000Z'));

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

describe('a retention offer on the portal’s cancel page', () => {
  it('is set on the product by coupon, shown to a purchase without a discount, and taken instead of cancelling', async () => {
    const s = await shop('Retain Co');
    // Unknown and archived coupons are refused, nothing set.
    expect(
      (await s.api('PATCH', `/v1/ui/products/${s.product}`, { retentionCoupon: 'cpn_nothing' })).status,
    ).toBe(404);
    const old = (await s.api('POST', '/v1/sdk/coupons', { name: 'Old', percentOff: 5, duration: 'once' }))
      .body;
    await s.api('POST', `/v1/sdk/coupons/${old.id}/archive`);
    expect((await s.api('PATCH', `/v1/ui/products/${s.product}`, { retentionCoupon: old.id })).status).toBe(
      409,
    );
    const stay = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Stay',
        code: 'STAY20',
        percentOff: 20,
        duration: 'repeating',
        durationInMonths: 3,
      })
    ).body;
    // Named by its code, kept as its id.
    const product = (await s.api('PATCH', `/v1/ui/products/${s.product}`, { retentionCoupon: 'stay20' }))
      .body;
    expect(product.retentionCoupon).toBe(stay.id);

    await s.customer('ada');
    const held = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: s.pro })).body
      .purchaseRef as string;
    const { cookie, csrf } = await s.signIn('ada');
    const page = (await get(`/portal/cancel/${held}`, cookie)).body;
    expect(page).toContain(
      'Keep your plan and get <strong>Stay (20% off), on invoices for 3 months</strong>.',
    );
    const kept = await post('/portal/retention', { csrf, purchaseRef: held }, cookie);
    expect([kept.statusCode, kept.headers.location]).toEqual([303, '/portal?done=retained']);
    const purchase = (await s.api('GET', `/v1/sdk/purchases/${held}`)).body;
    expect(purchase).toMatchObject({
      status: 'active',
      cancelAtPeriodEnd: false,
      cancellationDetails: null,
      discount: { coupon: stay.id },
    });
    expect((await s.api('GET', `/v1/sdk/coupons/${stay.id}`)).body.timesRedeemed).toBe(1);
    // With a discount now, no offer, and taking it again is refused.
    expect((await get(`/portal/cancel/${held}`, cookie)).body).not.toContain('Before you go');
    const again = await post('/portal/retention', { csrf, purchaseRef: held }, cookie);
    expect([again.statusCode, again.body.includes('has a discount already')]).toEqual([409, true]);
    expect((await s.api('GET', `/v1/sdk/coupons/${stay.id}`)).body.timesRedeemed).toBe(1);
    // A stale form, and another customer's purchase, change nothing.
    expect((await post('/portal/retention', { csrf: 'stale', purchaseRef: held }, cookie)).statusCode).toBe(
      403,
    );
    await s.customer('bo');
    const bos = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'bo', planRef: s.basic })).body
      .purchaseRef as string;
    expect((await post('/portal/retention', { csrf, purchaseRef: bos }, cookie)).statusCode).toBe(404);
    // Cleared, no offer.
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { retentionCoupon: null });
    const bo = await s.signIn('bo');
    expect((await get(`/portal/cancel/${bos}`, bo.cookie)).body).not.toContain('Before you go');
    expect((await post('/portal/retention', { csrf: bo.csrf, purchaseRef: bos }, bo.cookie)).statusCode).toBe(
      409,
    );
  });

  it('gives a coupon’s last redemption to one of the customers taking it at once', async () => {
    const s = await shop('Last Offer Co');
    const last = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Last',
        percentOff: 50,
        duration: 'once',
        maxRedemptions: 1,
      })
    ).body;
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { retentionCoupon: last.id });
    const takers = await Promise.all(
      ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'].map(async (ref) => {
        await s.customer(ref);
        const held = (await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: s.pro })).body
          .purchaseRef as string;
        const { cookie } = await s.signIn(ref);
        const page = (await get(`/portal/cancel/${held}`, cookie)).body;
        expect(page).toContain('Before you go');
        return { held, cookie, csrf: hiddenField(page, 'csrf') };
      }),
    );
    const answers = await Promise.all(
      takers.map((t) => post('/portal/retention', { csrf: t.csrf, purchaseRef: t.held }, t.cookie)),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([303, 409, 409, 409, 409, 409]);
    expect((await s.api('GET', `/v1/sdk/coupons/${last.id}`)).body.timesRedeemed).toBe(1);
    const discounted = await Promise.all(
      takers.map(
        async (t) => (await s.api('GET', `/v1/sdk/purchases/${t.held}`)).body.discount as Json | null,
      ),
    );
    expect(discounted.filter((d) => d !== null)).toHaveLength(1);
    // Used up: the offer is no longer shown.
    const rest = takers.find((_, i) => discounted[i] === null);
    expect((await get(`/portal/cancel/${rest?.held}`, rest?.cookie ?? '')).body).not.toContain(
      'Before you go',
    );
  });
  it('is taken once when its form is sent many times at once, and counted in the cancellation report', async () => {
    const s = await shop('Counted Offer Co');
    const offer = (await s.api('POST', '/v1/sdk/coupons', { name: 'Stay', percentOff: 10, duration: 'once' }))
      .body;
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { retentionCoupon: offer.id });
    // A moment later each time: the window ends at now, exclusive.
    const report = async () => {
      clock.advance(1000);
      return (await s.api('GET', '/v1/ui/analytics/cancellations')).body as Json;
    };
    expect((await report()).retentionSaves).toBe(0);
    await s.customer('eve');
    const held = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'eve', planRef: s.pro })).body
      .purchaseRef as string;
    const { cookie, csrf } = await s.signIn('eve');
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post('/portal/retention', { csrf, purchaseRef: held }, cookie)),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([303, 409, 409, 409, 409, 409, 409, 409]);
    expect((await s.api('GET', `/v1/sdk/coupons/${offer.id}`)).body.timesRedeemed).toBe(1);
    expect(await report()).toMatchObject({ total: 0, retentionSaves: 1 });
    // The same coupon redeemed through the API is not an offer taken.
    await s.customer('fay');
    const api = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'fay', planRef: s.pro })).body
      .purchaseRef as string;
    expect((await s.api('POST', `/v1/sdk/purchases/${api}/discount`, { coupon: offer.id })).status).toBe(200);
    expect((await report()).retentionSaves).toBe(1);
    // Another product's report, and a window before it, count none.
    const other = (await s.api('POST', '/v1/ui/products', { name: 'Other tools' })).body;
    expect(
      (await s.api('GET', `/v1/ui/analytics/cancellations?productRef=${other.id}`)).body.retentionSaves,
    ).toBe(0);
    expect(
      (
        await s.api(
          'GET',
          '/v1/ui/analytics/cancellations?from=2026-01-01T00:00:00.000Z&to=2026-02-01T00:00:00.000Z',
        )
      ).body.retentionSaves,
    ).toBe(0);
  });
});
