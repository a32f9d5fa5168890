import { callRecord } from '@mcp-meter/contracts/usage-record';
import { describe, expect, it } from 'vitest';
import { hiddenField, portalSuite } from '../../test/helpers/portal-shop';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * What a customer changes in the portal (issue 64), on real PostgreSQL and the usage store: the
 * plan, with the proration previewed and charged exactly on confirming minutes later; cancelling
 * now with the refund shown and made; cards added through checkout in setup mode, made default
 * and removed; and the usage chart by day and tool, as the usage analytics API answers it.
 */
const { clock, harnessOf, get, post, shop } = portalSuite(new Date('2026-03-01T00:00:00.000Z'));

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

describe('changing plans in the portal', () => {
  it('previews the proration, and charges exactly it when confirmed ten minutes later', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Switch Co');
    await s.customer('ada');
    const first = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: s.basic })).body;
    clock.set(new Date('2026-03-11T00:00:00.000Z'));
    const { cookie, csrf } = await s.signIn('ada');

    const portal = (await get('/portal', cookie)).body;
    expect(portal).toContain(`href="/portal/change/${first.purchaseRef}"`);
    const choices = await get(`/portal/change/${first.purchaseRef}`, cookie);
    expect(choices.statusCode).toBe(200);
    expect(choices.body).toContain('Pro</a>: $60,000.00 per month');
    const preview = await get(`/portal/change/${first.purchaseRef}?plan=${s.pro}`, cookie);
    expect(preview.statusCode).toBe(200);
    // 3,000,000 × 21/31 = 2,032,258.06 → 2,032,258 credited; 6,000,000 − 2,032,258 = 3,967,742 due.
    // Ten minutes later the credit would be 672 cents less.
    expect(preview.body).toContain('<td>Pro (2026-03-11 – 2026-04-11)</td><td class="n">$60,000.00</td>');
    expect(preview.body).toContain(
      '<td>Unused time on Basic (2026-03-11 – 2026-04-01)</td><td class="n">-$20,322.58</td>',
    );
    expect(preview.body).toContain('Charged now: <strong>$39,677.42</strong>');
    const prorationDate = hiddenField(preview.body, 'prorationDate');
    expect(prorationDate).toBe('2026-03-11T00:00:00.000Z');

    clock.advance(10 * 60_000);
    const confirmed = await post(
      '/portal/change',
      { csrf, purchaseRef: first.purchaseRef, planRef: s.pro, prorationDate },
      cookie,
    );
    expect([confirmed.statusCode, confirmed.headers.location]).toEqual([303, '/portal?done=changed']);
    const purchases = (await s.api('GET', '/v1/sdk/purchases?customerRef=ada')).body.data as Json[];
    const now = purchases.find((p) => p.status === 'active');
    expect(now?.planRef).toBe(s.pro);
    const [invoice] = (await s.api('GET', `/v1/sdk/invoices?purchaseRef=${now?.reference}`)).body
      .data as Json[];
    expect(invoice).toMatchObject({ total: 3_967_742, amountPaid: 3_967_742, status: 'paid' });
    // The next invoice, whole, as the upcoming invoice API answers it.
    const upcoming = (await s.api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${now?.reference}`)).body;
    expect(upcoming.amountDue).toBe(6_000_000);
    expect((await get('/portal', cookie)).body).toContain(
      'Next invoice on 2026-04-11 (Weather, Pro): <strong>$60,000.00</strong>, $60,000.00 for the next period</p>',
    );

    // A tampered date, another customer's purchase, a plan of nothing here: refused with a page.
    await s.customer('bob');
    const bobs = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'bob', planRef: s.basic })).body
      .purchaseRef as string;
    const refusals: Array<[Record<string, string>, number, string]> = [
      [
        { csrf, purchaseRef: now?.reference, planRef: s.basic, prorationDate: '2026-03-01T00:00:00.000Z' },
        400,
        'prorationDate must be a preview',
      ],
      [{ csrf, purchaseRef: bobs, planRef: s.pro, prorationDate }, 404, `No purchase ${bobs}`],
      [
        { csrf: 'stale', purchaseRef: now?.reference, planRef: s.basic, prorationDate },
        403,
        'reload the page',
      ],
    ];
    for (const [form, status, text] of refusals) {
      const answer = await post('/portal/change', form, cookie);
      expect([answer.statusCode, answer.body.includes(text)], JSON.stringify(form)).toEqual([status, true]);
    }
    expect((await get(`/portal/change/${bobs}`, cookie)).statusCode).toBe(404);
    expect((await get(`/portal/change/${now?.reference}?plan=pln_nope`, cookie)).statusCode).toBe(400);
    expect((await s.api('GET', `/v1/sdk/purchases/${bobs}`)).body.planRef).toBe(s.basic);
  });

  it('sends a customer without a card through checkout, back to the portal', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Cardless Co');
    // A free plan to start from, so the customer holds a purchase without a card.
    const held = await s.cardlessOnFreePlan('cy');
    const { cookie, csrf } = await s.signIn('cy');
    const preview = (await get(`/portal/change/${held}?plan=${s.pro}`, cookie)).body;
    expect(preview).toContain('You have no card on file');
    expect(preview).toContain('Continue to checkout');
    const go = await post(
      '/portal/change',
      { csrf, purchaseRef: held, planRef: s.pro, prorationDate: hiddenField(preview, 'prorationDate') },
      cookie,
    );
    expect(go.statusCode).toBe(303);
    const session = /\/checkout\/(cs_[A-Za-z0-9]+)$/.exec(String(go.headers.location))?.[1];
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${session}`)).body).toMatchObject({
      kind: 'plan',
      planRef: s.pro,
      successUrl: expect.stringMatching(/\/portal\?done=changed$/),
    });
    // One checkout, the portal's: none left behind by an activation that needed a card.
    const { rowCount } = await harnessOf().pool.query(
      'SELECT 1 FROM checkout_sessions WHERE customer_id = $1',
      [(await s.api('GET', '/v1/sdk/customers/cy')).body.id],
    );
    expect(rowCount).toBe(1);
  });
});

describe('cancelling now in the portal', () => {
  it('shows the refund of the unused time and makes exactly it', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Cancel Co');
    await s.customer('di');
    const held = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'di', planRef: s.pro })).body
      .purchaseRef as string;
    clock.set(new Date('2026-03-21T00:00:00.000Z'));
    const { cookie, csrf } = await s.signIn('di');
    const page = await get(`/portal/cancel/${held}`, cookie);
    expect(page.statusCode).toBe(200);
    // 6,000,000 × 11/31 = 2,129,032.26 → 2,129,032 (five minutes later: 672 cents less).
    expect(page.body).toContain(
      'The unused time you paid for, <strong>$21,290.32</strong>, is refunded to your card.',
    );
    expect(page.body).toContain('Keep using Pro until 2026-04-01');
    // The customer may say why, in Stripe's choices: one not offered, or a long comment, is 400.
    expect(page.body).toContain('<option value="too_expensive">It’s too expensive</option>');
    const prorationDate = hiddenField(page.body, 'prorationDate');
    for (const [form, text] of [
      [{ feedback: 'bored' }, 'feedback is not one of the reasons offered'],
      [{ comment: 'x'.repeat(501) }, 'comment is longer than 500 characters'],
      [{ comment: 'a\u0007b' }, 'comment must not hold control characters'],
    ] as const) {
      const refused = await post(
        '/portal/cancel-now',
        { csrf, purchaseRef: held, prorationDate, ...form },
        cookie,
      );
      expect([refused.statusCode, refused.body.includes(text)], text).toEqual([400, true]);
    }
    expect((await s.api('GET', `/v1/sdk/purchases/${held}`)).body.status).toBe('active');
    clock.advance(5 * 60_000);
    const ended = await post(
      '/portal/cancel-now',
      {
        csrf,
        purchaseRef: held,
        prorationDate,
        feedback: 'too_expensive',
        comment: 'Too dear\r\nfor a small team',
      },
      cookie,
    );
    expect(ended.headers.location).toBe('/portal?done=ended');
    expect((await s.api('GET', `/v1/sdk/purchases/${held}`)).body).toMatchObject({
      status: 'cancelled',
      cancellationDetails: {
        reason: 'cancellation_requested',
        feedback: 'too_expensive',
        comment: 'Too dear\nfor a small team',
      },
    });
    const { rows } = await harnessOf().pool.query(
      `SELECT r.amount, r.source FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.purchase_id = $1`,
      [held],
    );
    expect(rows).toEqual([{ amount: 2_129_032, source: 'proration' }]);
    // Ended: no second refund, and the page is gone for it.
    expect(
      (await post('/portal/cancel-now', { csrf, purchaseRef: held, prorationDate: '' }, cookie)).statusCode,
    ).toBe(404);
    expect((await get(`/portal/cancel/${held}`, cookie)).statusCode).toBe(404);
  });
});

describe('cards in the portal', () => {
  it('adds a card through checkout in setup mode, makes another the default, and keeps the last one a plan needs', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Cards Co');
    await s.customer('el');
    await s.api('POST', '/v1/sdk/activate', { customerRef: 'el', planRef: s.basic });
    const { cookie, csrf } = await s.signIn('el');
    expect((await get('/portal', cookie)).body).toMatch(/visa ending 4242, expires 12\/2035 \(default\)/i);

    const add = await post('/portal/cards', { csrf }, cookie);
    expect(add.statusCode).toBe(303);
    const session = /\/checkout\/(cs_[A-Za-z0-9]+)$/.exec(String(add.headers.location))?.[1] ?? '';
    const paid = await harnessOf().controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${session}/pay`,
      payload: { card: { number: '5555555555554444', expMonth: 1, expYear: 2031, cvc: '123' } },
    });
    expect(paid.json().redirectUrl).toMatch(/\/portal\?done=card&session_id=/);
    const cards = (await s.api('GET', '/v1/sdk/customers/el/payment-methods')).body.data as Json[];
    expect(cards.map((c) => [c.last4, c.isDefault])).toEqual([
      ['4242', false],
      ['4444', true],
    ]);
    const visa = cards[0]?.id as string;
    const mastercard = cards[1]?.id as string;
    expect((await post('/portal/cards/default', { csrf, id: visa }, cookie)).headers.location).toBe(
      '/portal?done=default',
    );
    expect((await post('/portal/cards/remove', { csrf, id: mastercard }, cookie)).headers.location).toBe(
      '/portal?done=removed',
    );
    // The last card pays the Basic plan: kept, with why.
    const kept = await post('/portal/cards/remove', { csrf, id: visa }, cookie);
    expect(kept.statusCode).toBe(409);
    expect(kept.body).toContain('add another card before removing it');
    // Another customer's card is not this customer's to touch.
    await s.customer('fy');
    const fys = ((await s.api('GET', '/v1/sdk/customers/fy/payment-methods')).body.data as Json[])[0]?.id;
    expect((await post('/portal/cards/remove', { csrf, id: fys }, cookie)).statusCode).toBe(404);

    // A spend alert is money in the customer's currency, kept in cents exactly.
    const spend = await post('/portal/alerts', { csrf, kind: 'spend_amount', threshold: '25.50' }, cookie);
    expect(spend.headers.location).toBe('/portal?done=alert');
    expect((await s.api('GET', '/v1/sdk/alerts?customerRef=el')).body.data).toMatchObject([
      { kind: 'spend_amount', threshold: 2550 },
    ]);
    expect((await get('/portal', cookie)).body).toContain('When I have spent $25.50 in a period');
    for (const threshold of ['2.555', '-1', '1e3', '12,00'])
      expect(
        (await post('/portal/alerts', { csrf, kind: 'spend_amount', threshold }, cookie)).statusCode,
        threshold,
      ).toBe(400);
    expect((await s.api('GET', '/v1/sdk/customers/fy/payment-methods')).body.data).toHaveLength(1);
  });
});

describe('paying an open invoice in the portal', () => {
  it('offers Pay now on an open invoice, tells a declined card, and pays once a card works', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Owed Co');
    await s.customer('gi');
    const purchase = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'gi', planRef: s.basic })).body
      .purchaseRef as string;
    // The card starts failing before the renewal.
    await s.api('POST', '/v1/sdk/customers/gi/payment-methods', {
      card: { number: SANDBOX_CARDS.failsLater, expMonth: 12, expYear: 2035, cvc: '123' },
    });
    clock.set(new Date('2026-04-01T00:06:00.000Z'));
    await harnessOf().controlPlane.scheduler.runDue();
    const open = ((await s.api('GET', '/v1/sdk/invoices?customerRef=gi&status=open')).body.data as Json[])[0];
    expect(open).toMatchObject({ status: 'open', total: 3_000_000 });
    const { cookie, csrf } = await s.signIn('gi');
    const portal = (await get('/portal', cookie)).body;
    expect(portal).toContain(
      `aria-label="Pay now: invoice ${open?.id}, with your default card">Pay now</button>`,
    );

    // The card still fails: the portal again, with why, and the invoice open.
    const declined = await post('/portal/invoices/pay', { csrf, id: open?.id }, cookie);
    expect(declined.statusCode).toBe(402);
    expect(declined.body).toContain('Not done: The card was declined');
    // Another customer's invoice is not this customer's to pay.
    await s.customer('hu');
    const other = await s.signIn('hu');
    expect(
      (await post('/portal/invoices/pay', { csrf: other.csrf, id: open?.id }, other.cookie)).statusCode,
    ).toBe(404);
    // A card that works, and Pay now pays it: the plan runs on.
    await s.api('POST', '/v1/sdk/customers/gi/payment-methods', {
      card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
    });
    const paid = await post('/portal/invoices/pay', { csrf, id: open?.id }, cookie);
    expect(paid.headers.location).toBe('/portal?done=paid');
    expect((await get('/portal?done=paid', cookie)).body).toContain('Thank you: the invoice is paid.');
    expect((await s.api('GET', `/v1/sdk/invoices/${open?.id}`)).body).toMatchObject({ status: 'paid' });
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-04-01T00:00:00.000Z',
    });
    expect((await get('/portal', cookie)).body).not.toContain('Pay now');
  });
});

describe('the usage chart', () => {
  it('draws calls by day and tool this period, as the usage analytics API counts them', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await shop('Chart Co');
    const id = await s.customer('gi');
    await s.api('POST', '/v1/sdk/activate', { customerRef: 'gi', planRef: s.basic });
    const meter = {
      providerId: s.provider.id,
      environment: 'sandbox' as const,
      meterRef: (await s.api('GET', '/v1/ui/meters/requests')).body.id as string,
      meterName: 'requests',
    };
    const call = (day: number, tool: string) =>
      callRecord(meter, id, `2026-03-0${day}T10:00:00.000Z`, {
        outcome: 'success',
        admitted: true,
        productId: s.product,
        tool,
      });
    await harnessOf().store.store.insert([
      ...Array.from({ length: 4 }, () => call(2, 'forecast')),
      ...Array.from({ length: 2 }, () => call(3, 'forecast')),
      ...Array.from({ length: 3 }, () => call(3, 'history')),
    ]);
    clock.set(new Date('2026-03-04T12:00:00.000Z'));
    const { cookie } = await s.signIn('gi');
    const page = (await get('/portal', cookie)).body;
    const analytics = (
      await s.api(
        'GET',
        `/v1/ui/analytics/usage?customerRef=gi&groupBy=tool&grain=day&from=2026-03-01T00:00:00.000Z`,
      )
    ).body;
    expect(analytics.totals.calls).toBe(9);
    expect(page).toContain(
      `<p id="usage-total">${analytics.totals.calls} calls from 2026-03-01 to 2026-03-04`,
    );
    expect(page).toContain('forecast: 6</li>');
    expect(page).toContain('history: 3</li>');
    expect(page).toContain('<tr><th scope="row">2026-03-03</th><td>2</td><td>3</td></tr>');
    expect(page).toContain('<title>2026-03-02: 4 calls of forecast</title>');
  });
});
