import { describe, expect, it } from 'vitest';
import { hiddenField, portalSuite } from '../../test/helpers/portal-shop';

/**
 * Promotion codes on a plan change in the customer portal (docs/coupons.md), as Stripe's portal
 * takes them once enabled: on real PostgreSQL, through the portal's own pages. The code's preview
 * is the charge confirmed; codes only, never coupon ids; ten codes that match nothing end the
 * guessing on the session, also when sent at once; a code used up meanwhile changes nothing.
 */
const { clock, get, post, shop } = portalSuite(new Date('2026-03-01T00:00:00.000Z'));

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

/** A shop whose customer `ref` holds Basic since 1 March, seen on 11 March, signed in to the portal. */
async function switching(name: string, ref: string) {
  clock.set(new Date('2026-03-01T00:00:00.000Z'));
  const s = await shop(name);
  await s.customer(ref);
  const held = (await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: s.basic })).body
    .purchaseRef as string;
  clock.set(new Date('2026-03-11T00:00:00.000Z'));
  const launch = (
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Launch',
      code: 'LAUNCH',
      percentOff: 50,
      duration: 'once',
      productIds: [s.product],
    })
  ).body as Json;
  return { s, held, launch, ...(await s.signIn(ref)) };
}

describe('promotion codes on a plan change in the portal', () => {
  it('are offered only where the product takes them', async () => {
    const { s, held, cookie } = await switching('Closed Co', 'ada');
    const preview = await get(`/portal/change/${held}?plan=${s.pro}`, cookie);
    expect(preview.statusCode).toBe(200);
    expect(preview.body).not.toContain('name="code" maxlength');
    const typed = await get(`/portal/change/${held}?plan=${s.pro}&code=LAUNCH`, cookie);
    expect(typed.statusCode).toBe(409);
    expect(typed.body).toContain('This plan change does not take promotion codes');
    // Charged in full, the code never applied.
    expect(typed.body).toContain('Charged now: <strong>$39,677.42</strong>');

    const product = (await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true }))
      .body;
    expect(product).toMatchObject({ portalPromotionCodes: true, paywallPromotionCodes: false });
    const [updated] = (await s.api('GET', '/v1/events?type=product.updated')).body.data as Json[];
    expect(updated?.data).toMatchObject({
      object: { portalPromotionCodes: true },
      previous_attributes: { portalPromotionCodes: false },
    });
    expect((await get(`/portal/change/${held}?plan=${s.pro}`, cookie)).body).toContain(
      '<label for="code">Promotion code</label>',
    );
  });

  it('previews the discounted switch and charges exactly it, the code redeemed once', async () => {
    const { s, held, launch, cookie, csrf } = await switching('Launch Co', 'bo');
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    // Typed as the customer likes it: case and spaces do not matter.
    const preview = await get(`/portal/change/${held}?plan=${s.pro}&code=%20launch%20`, cookie);
    expect(preview.statusCode).toBe(200);
    expect(preview.body).toContain('Promotion code <strong>LAUNCH</strong> applied.');
    // Pro's 6,000,000 less 50 %, less Basic's unused 2,032,258: 967,742 due.
    expect(preview.body).toContain('<td class="n">-$30,000.00</td>');
    expect(preview.body).toContain('Charged now: <strong>$9,677.42</strong>');
    expect(hiddenField(preview.body, 'code')).toBe('LAUNCH');

    clock.advance(5 * 60_000);
    const confirmed = await post(
      '/portal/change',
      {
        csrf,
        purchaseRef: held,
        planRef: s.pro,
        prorationDate: hiddenField(preview.body, 'prorationDate'),
        code: hiddenField(preview.body, 'code'),
      },
      cookie,
    );
    expect([confirmed.statusCode, confirmed.headers.location]).toEqual([303, '/portal?done=changed']);
    const purchases = (await s.api('GET', '/v1/sdk/purchases?customerRef=bo')).body.data as Json[];
    const now = purchases.find((p) => p.status === 'active');
    expect(now).toMatchObject({ planRef: s.pro, discount: { coupon: launch.id, code: 'LAUNCH' } });
    const [invoice] = (await s.api('GET', `/v1/sdk/invoices?purchaseRef=${now?.reference}`)).body
      .data as Json[];
    expect(invoice).toMatchObject({ total: 967_742, amountPaid: 967_742, status: 'paid' });
    expect((await s.api('GET', `/v1/sdk/coupons/${launch.id}`)).body.timesRedeemed).toBe(1);
    // The portal shows the plan's discount from then on.
    expect((await get('/portal', cookie)).body).toContain('Launch');
  });

  it('says why a code is refused, and takes codes only, never coupon ids', async () => {
    const { s, held, launch, cookie } = await switching('Refusing Co', 'cy');
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    await s.customer('dee');
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'For Dee',
      code: 'DEEONLY',
      percentOff: 10,
      duration: 'once',
      customerRef: 'dee',
    });
    const cases: Array<[string, number, string]> = [
      ['NOSUCHCODE', 404, 'No promotion code NOSUCHCODE'],
      [launch.id, 404, `No promotion code ${launch.id}`],
      ['DEEONLY', 409, 'it is for another customer'],
      ['<b>x</b>', 404, 'No promotion code &lt;b&gt;x&lt;/b&gt;'],
    ];
    for (const [code, status, text] of cases) {
      const page = await get(`/portal/change/${held}?plan=${s.pro}&code=${encodeURIComponent(code)}`, cookie);
      expect([page.statusCode, page.body.includes(text)], code).toEqual([status, true]);
      // The preview stands without the code; the field says what was wrong.
      expect(page.body).toContain('Charged now: <strong>$39,677.42</strong>');
      expect(page.body).toContain('aria-describedby="code-error"');
    }
  });

  it('ends the guessing after ten codes that match nothing, also sent at once', async () => {
    const { s, held, cookie } = await switching('Guessing Co', 'eve');
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    // Codes that match a coupon use up no attempt.
    for (let i = 0; i < 12; i++)
      expect((await get(`/portal/change/${held}?plan=${s.pro}&code=LAUNCH`, cookie)).statusCode).toBe(200);
    const answers = await Promise.all(
      Array.from({ length: 15 }, (_, i) =>
        get(`/portal/change/${held}?plan=${s.pro}&code=GUESS${i}`, cookie),
      ),
    );
    const statuses = answers.map((a) => a.statusCode).sort();
    expect(statuses).toEqual([...Array(10).fill(404), ...Array(5).fill(429)]);
    // Ended: the right code too, until the customer signs in again.
    const after = await get(`/portal/change/${held}?plan=${s.pro}&code=LAUNCH`, cookie);
    expect(after.statusCode).toBe(429);
    expect(after.body).toContain('Too many promotion codes were tried');
    const again = await s.signIn('eve');
    expect((await get(`/portal/change/${held}?plan=${s.pro}&code=LAUNCH`, again.cookie)).statusCode).toBe(
      200,
    );
  });

  it('switches once and redeems the code once when the same confirmation is sent eight times at once', async () => {
    const { s, held, launch, cookie, csrf } = await switching('Racing Co', 'ivy');
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    const preview = (await get(`/portal/change/${held}?plan=${s.pro}&code=LAUNCH`, cookie)).body;
    const form = {
      csrf,
      purchaseRef: held,
      planRef: s.pro,
      prorationDate: hiddenField(preview, 'prorationDate'),
      code: hiddenField(preview, 'code'),
    };
    const answers = await Promise.all(Array.from({ length: 8 }, () => post('/portal/change', form, cookie)));
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses.filter((status) => status === 303)).toHaveLength(1);
    // The others find the purchase switched away (404) or the switch in progress (409).
    expect(statuses.every((status) => [303, 404, 409].includes(status))).toBe(true);
    const purchases = (await s.api('GET', '/v1/sdk/purchases?customerRef=ivy')).body.data as Json[];
    expect(purchases.filter((p) => p.status === 'active').map((p) => p.planRef)).toEqual([s.pro]);
    expect((await s.api('GET', `/v1/sdk/coupons/${launch.id}`)).body.timesRedeemed).toBe(1);
    const paid = await s.api('GET', '/v1/sdk/invoices?customerRef=ivy');
    // The first invoice of Basic, and one of the switch: charged once.
    expect((paid.body.data as Json[]).map((i) => i.total).sort((a, b) => a - b)).toEqual([
      967_742, 3_000_000,
    ]);
  });

  it('changes nothing when the code was used up between preview and confirming', async () => {
    const { s, held, cookie, csrf } = await switching('Last One Co', 'fay');
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    await s.api('POST', '/v1/sdk/coupons', {
      name: 'Only one',
      code: 'ONEONLY',
      percentOff: 20,
      duration: 'once',
      maxRedemptions: 1,
    });
    const preview = (await get(`/portal/change/${held}?plan=${s.pro}&code=ONEONLY`, cookie)).body;
    expect(preview).toContain('Promotion code <strong>ONEONLY</strong> applied.');
    await s.customer('gus');
    const other = await s.api('POST', '/v1/sdk/activate', {
      customerRef: 'gus',
      planRef: s.basic,
      coupon: 'ONEONLY',
    });
    expect(other.status).toBe(200);
    const confirmed = await post(
      '/portal/change',
      {
        csrf,
        purchaseRef: held,
        planRef: s.pro,
        prorationDate: hiddenField(preview, 'prorationDate'),
        code: 'ONEONLY',
      },
      cookie,
    );
    expect(confirmed.statusCode).toBe(409);
    expect(confirmed.body).toContain('cannot be used');
    const mine = (await s.api('GET', `/v1/sdk/purchases/${held}`)).body;
    expect(mine).toMatchObject({ planRef: s.basic, status: 'active' });
  });

  it('sends a customer without a card to checkout with the code applied', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Cardless Codes Co');
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    const held = await s.cardlessOnFreePlan('hal');
    const launch = (
      await s.api('POST', '/v1/sdk/coupons', {
        name: 'Launch',
        code: 'LAUNCH',
        percentOff: 50,
        duration: 'once',
      })
    ).body as Json;
    const { cookie, csrf } = await s.signIn('hal');
    const preview = (await get(`/portal/change/${held}?plan=${s.pro}&code=LAUNCH`, cookie)).body;
    expect(preview).toContain('Continue to checkout');
    const go = await post(
      '/portal/change',
      {
        csrf,
        purchaseRef: held,
        planRef: s.pro,
        prorationDate: hiddenField(preview, 'prorationDate'),
        code: 'LAUNCH',
      },
      cookie,
    );
    expect(go.statusCode).toBe(303);
    const session = /\/checkout\/(cs_[A-Za-z0-9]+)$/.exec(String(go.headers.location))?.[1];
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${session}`)).body).toMatchObject({
      kind: 'plan',
      planRef: s.pro,
      coupon: launch.id,
      amount: 3_000_000,
      amountSubtotal: 6_000_000,
    });
  });
});
