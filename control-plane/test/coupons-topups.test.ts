import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Coupons on credit top-ups (docs/coupons.md): a top-up checkout takes a coupon or a typed
 * promotion code as a plan's does, once (a top-up is one payment), and not one limited to
 * products. The coupon is redeemed in the payment's transaction before the charge, given back
 * when the card is refused, and the credits are the pack's whole. Real PostgreSQL.
 */
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

const card = (number: string) => ({ card: { number, expMonth: 12, expYear: 2035, cvc: '123' } });

async function seller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  /** The hosted page's HTML, as a customer's browser gets it (no key). */
  const page = async (id: string) => (await harness.controlPlane.app.inject({ url: `/checkout/${id}` })).body;
  const customer = async (ref: string) => {
    const made = (await api('POST', '/v1/sdk/customers', { externalRef: ref })).body.reference as string;
    expect(
      (await api('POST', `/v1/sdk/customers/${made}/payment-methods`, card(SANDBOX_CARDS.succeeds))).status,
    ).toBe(201);
    return made;
  };
  const coupon = async (terms: Json) => {
    const made = await api('POST', '/v1/sdk/coupons', { duration: 'once', ...terms });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    return made.body;
  };
  const redeemed = async (id: string) =>
    (await api('GET', `/v1/sdk/coupons/${id}`)).body.timesRedeemed as number;
  const credits = async (ref: string) =>
    (await api('GET', `/v1/sdk/customers/${ref}/balance`)).body.credits as number;
  const payments = async (ref: string) =>
    (
      await harness.pool.query<{ amount: number; status: string }>(
        "SELECT amount::int, status FROM payments WHERE customer_id = $1 AND reason = 'topup' ORDER BY created_at",
        [ref],
      )
    ).rows.map((p) => [p.amount, p.status]);
  return { api, page, customer, coupon, redeemed, credits, payments };
}

describe('coupons on credit top-ups', () => {
  it('takes a coupon off a top-up once, redeemed when paid and given back when refused', async () => {
    const s = await seller('Top-up coupons');
    const product = (await s.api('POST', '/v1/ui/products', { name: 'Maps' })).body;
    const launch = await s.coupon({ name: 'Launch', code: 'TOPUP20', percentOff: 20, duration: 'forever' });
    await s.coupon({ name: 'Maps only', code: 'MAPSONLY', percentOff: 10, productIds: [product.id] });
    await s.coupon({ name: 'Euros', code: 'EUROS', amountOff: 500, currency: 'eur' });
    await s.coupon({
      name: 'Big',
      code: 'BIGONLY',
      percentOff: 10,
      minimumAmount: 2000,
      minimumAmountCurrency: 'usd',
    });
    const ref = await s.customer('tess');
    const topup = { credits: 1000, amount: 1250, currency: 'usd' };

    const session = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ref,
      topup,
      coupon: 'topup20',
    });
    expect(session.status).toBe(201);
    expect(session.body).toMatchObject({
      kind: 'topup',
      credits: 1000,
      amount: 1000,
      amountSubtotal: 1250,
      amountDiscount: 250,
      coupon: launch.id,
    });
    const created = await harness.pool.query<{ payload: Json }>(
      "SELECT payload FROM outbox_events WHERE type = 'checkout_session.created' AND payload->'data'->'object'->>'id' = $1",
      [session.body.id],
    );
    expect(created.rows[0]?.payload.data.object).toMatchObject({
      kind: 'topup',
      credits: 1000,
      coupon: launch.id,
      amount: 1000,
      amount_subtotal: 1250,
      amount_discount: 250,
    });
    const page = await s.page(session.body.id);
    expect(page).toContain('$12.50, less Launch (20% off)');
    expect(page).toContain('$10.00 due today');
    expect(await s.redeemed(launch.id)).toBe(0);

    // Refused: the coupon is given back, nothing credited, the session still open.
    const refused = await s.api(
      'POST',
      `/checkout/${session.body.id}/pay`,
      card(SANDBOX_CARDS.failsLater),
      null,
    );
    expect(refused.status).toBe(402);
    expect(await s.redeemed(launch.id)).toBe(0);
    expect(await s.credits(ref)).toBe(0);
    const paid = await s.api('POST', `/checkout/${session.body.id}/pay`, card(SANDBOX_CARDS.succeeds), null);
    expect(paid.status).toBe(200);
    expect(await s.credits(ref)).toBe(1000);
    expect(await s.payments(ref)).toEqual([
      [1000, 'failed'],
      [1000, 'succeeded'],
    ]);
    expect(await s.redeemed(launch.id)).toBe(1);

    // What does not fit a top-up says why, and makes no session.
    const why = async (code: string) => {
      const answer = await s.api('POST', '/v1/sdk/checkout-sessions', {
        customerRef: ref,
        topup,
        coupon: code,
      });
      expect([answer.status, answer.body.code]).toEqual([409, 'coupon_not_redeemable']);
      return answer.body.detail as string;
    };
    expect(await why('MAPSONLY')).toContain('not to credit top-ups');
    expect(await why('EUROS')).toContain('EUR off');
    expect(await why('BIGONLY')).toContain('at least $20.00, and this one comes to $12.50');
    const setup = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ref,
      setup: true,
      coupon: 'TOPUP20',
    });
    expect([setup.status, setup.body.errors?.[0]?.path]).toEqual([400, '/coupon']);

    // Typed on the page: applied, taken off again, and one that does not fit refused.
    const open = (
      await s.api('POST', '/v1/sdk/checkout-sessions', { customerRef: ref, topup, allowPromotionCodes: true })
    ).body;
    expect(open).toMatchObject({ amount: 1250, amountSubtotal: 1250, amountDiscount: 0, coupon: null });
    const typed = (code: string | null) =>
      s.api('POST', `/checkout/${open.id}/promotion-code`, { code }, null);
    expect((await typed('TOPUP20')).body).toEqual({ amount: 1000, currency: 'usd' });
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${open.id}`)).body).toMatchObject({
      amount: 1000,
      amountSubtotal: 1250,
      amountDiscount: 250,
    });
    expect(await s.page(open.id)).toContain('Remove the promotion code');
    expect((await typed(null)).body).toEqual({ amount: 1250, currency: 'usd' });
    expect((await typed('MAPSONLY')).body.code).toBe('coupon_not_redeemable');
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${open.id}`)).body).toMatchObject({
      amount: 1250,
      coupon: null,
    });
  });

  it('charges nothing for a top-up fully off, and gives its one redemption to one of many payers at once', async () => {
    const s = await seller('Free credits');
    const free = await s.coupon({ name: 'On the house', code: 'FREE', percentOff: 100, maxRedemptions: 1 });
    const refs = await Promise.all(Array.from({ length: 6 }, (_, i) => s.customer(`free-${i}`)));
    const sessions = await Promise.all(
      refs.map(
        async (ref) =>
          (
            await s.api('POST', '/v1/sdk/checkout-sessions', {
              customerRef: ref,
              topup: { credits: 500, amount: 900, currency: 'usd' },
              coupon: 'FREE',
            })
          ).body,
      ),
    );
    expect(sessions.map((x) => x.amount)).toEqual([0, 0, 0, 0, 0, 0]);
    const answers = await Promise.all(
      sessions.map((x) => s.api('POST', `/checkout/${x.id}/pay`, card(SANDBOX_CARDS.succeeds), null)),
    );
    const outcomes = answers.map((a) => (a.status === 200 ? 'paid' : a.body.code));
    expect(outcomes.filter((o) => o === 'paid')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'coupon_not_redeemable')).toHaveLength(5);
    const winner = refs[outcomes.indexOf('paid')] as string;
    // The winner's session paid eight more times at once: closed, nothing more credited or redeemed.
    const winning = sessions[outcomes.indexOf('paid')] as Json;
    const again = await Promise.all(
      Array.from({ length: 8 }, () =>
        s.api('POST', `/checkout/${winning.id}/pay`, card(SANDBOX_CARDS.succeeds), null),
      ),
    );
    expect(again.map((a) => a.body.code)).toEqual(Array(8).fill('checkout_session_closed'));
    // A loser's session paid eight times at once: one payer gets to the coupon, which is used up.
    const contested = sessions[outcomes.lastIndexOf('coupon_not_redeemable')] as Json;
    const racing = await Promise.all(
      Array.from({ length: 8 }, () =>
        s.api('POST', `/checkout/${contested.id}/pay`, card(SANDBOX_CARDS.succeeds), null),
      ),
    );
    expect(racing.every((a) => a.status === 409)).toBe(true);
    expect(racing.map((a) => a.body.code)).toContain('coupon_not_redeemable');
    for (const ref of refs) {
      expect(await s.credits(ref)).toBe(ref === winner ? 500 : 0);
      // Nothing to charge: no payment, not even a failed attempt.
      expect(await s.payments(ref)).toEqual([]);
    }
    expect(await s.redeemed(free.id)).toBe(1);
    // The others' sessions stay open, to be paid without the coupon's discount only by a new session.
    const loser = sessions[outcomes.indexOf('coupon_not_redeemable')] as Json;
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${loser.id}`)).body.status).toBe('active');
  });

  it("offers the promotion-code field on the paywall's top-up when the product says so, reused while open", async () => {
    const s = await seller('Paywall top-ups');
    const product = (await s.api('POST', '/v1/ui/products', { name: 'Search' })).body;
    await s.api('PATCH', `/v1/ui/products/${product.id}`, { paywallPromotionCodes: true });
    const plan = (
      await s.api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Pay as you go',
        type: 'usage-based',
        billingModel: 'pre-paid',
        creditsPerUnit: 1,
        topUp: { credits: 30, amount: 500 },
      })
    ).body;
    const ref = await s.customer('paige');
    await s.api('POST', `/v1/sdk/customers/${ref}/credits`, { kind: 'grant', amount: 1 });
    expect(
      (await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: plan.id })).body.status,
    ).toBe('activated');
    await s.coupon({ name: 'Refill', code: 'REFILL', percentOff: 20 });
    const check = async () =>
      (await s.api('POST', '/v1/sdk/limits', { customerRef: ref, productRef: product.id, consume: true }))
        .body;
    expect((await check()).withinLimits).toBe(true);
    const wall = await check();
    expect(wall).toMatchObject({ withinLimits: false, reason: 'credits_exhausted' });
    const id = wall.checkoutSessionId as string;
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${id}`)).body).toMatchObject({
      kind: 'topup',
      amount: 500,
      allowPromotionCodes: true,
    });
    const typed = await s.api('POST', `/checkout/${id}/promotion-code`, { code: 'refill' }, null);
    expect(typed.body).toEqual({ amount: 400, currency: 'usd' });
    // The next refusal finds the same pack's session, its code still applied.
    expect((await check()).checkoutSessionId).toBe(id);
    expect((await s.api('POST', `/checkout/${id}/pay`, card(SANDBOX_CARDS.succeeds), null)).status).toBe(200);
    const ledger = (await s.api('GET', `/v1/sdk/customers/${ref}/credits?limit=100`)).body.data as Json[];
    expect(ledger.filter((m) => m.kind === 'top_up').map((m) => m.amount)).toEqual([30]);
    expect(await s.payments(ref)).toEqual([[400, 'succeeded']]);
    expect((await check()).withinLimits).toBe(true);
  });
});
