import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/** Checkout sessions through the API and the hosted page's pay call, on real PostgreSQL. */
const clock = new MovableClock(new Date('2026-11-22T10:00:00.000Z'));
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    publicUrl: 'https://pay.example.test',
  });
});
afterAll(() => harness?.close());

// Response bodies are read field by field and each field is asserted, so the type stays loose here.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = Record<string, any>;

async function seller() {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({
    displayName: 'Checkout Co',
  });
  const call = async (
    method: 'GET' | 'POST' | 'PATCH',
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
    return {
      status: response.statusCode,
      body: (String(response.headers['content-type']).includes('json') ? JSON.parse(text) : text) as Json,
      headers: response.headers,
    };
  };
  const product = (await call('POST', '/v1/ui/products', { name: 'Search API' })).body;
  const plan = (
    await call('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      type: 'recurring',
      price: 900,
      setupFee: 100,
    })
  ).body;
  const customer = (await call('POST', '/v1/sdk/customers', { externalRef: 'buyer' })).body;
  const events = async () => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1 AND (type LIKE 'checkout_session.%' OR type = 'payment.canceled') ORDER BY created_at, id`,
      [provider.id],
    );
    return rows.map((r) => ({ type: r.type, object: r.payload.data.object }));
  };
  return { call, product, plan, customer, events, provider };
}
const card = (number: string) => ({ card: { number, expMonth: 12, expYear: 2035, cvc: '123' } });

describe('checkout sessions', () => {
  it('are created for a plan (price plus setup fee due) and answered by a paid activation without a card', async () => {
    const { call, plan, customer, events } = await seller();
    const created = await call('POST', '/v1/sdk/checkout-sessions', {
      customerRef: 'buyer',
      planRef: plan.reference,
      successUrl: 'https://shop.example/thanks',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      status: 'active',
      kind: 'plan',
      amount: 1000,
      currency: 'usd',
      customerRef: customer.reference,
    });
    expect(created.body.url).toBe(`https://pay.example.test/checkout/${created.body.id}`);
    expect(created.body.id).toMatch(/^cs_/);
    const activation = (
      await call('POST', '/v1/sdk/activate', { customerRef: 'buyer', planRef: plan.reference })
    ).body;
    expect(activation).toMatchObject({ status: 'payment_required' });
    expect(activation.checkoutUrl).toBe(`https://pay.example.test/checkout/${activation.checkoutSessionId}`);
    const written = await events();
    expect(written.map((e) => e.type)).toEqual(['checkout_session.created', 'checkout_session.created']);
    expect(written[0]?.object).toMatchObject({
      id: created.body.id,
      session_id: created.body.id,
      url: created.body.url,
      status: 'active',
      amount: 1000,
      plan: plan.reference,
    });
  });

  it('refuse bad requests and other providers', async () => {
    const { call, plan } = await seller();
    expect(
      (await call('POST', '/v1/sdk/checkout-sessions', { customerRef: 'buyer' })).body.errors[0].path,
    ).toBe('/planRef');
    expect(
      (
        await call('POST', '/v1/sdk/checkout-sessions', {
          customerRef: 'buyer',
          planRef: plan.reference,
          topup: { credits: 1, amount: 1 },
        })
      ).status,
    ).toBe(400);
    expect(
      (await call('POST', '/v1/sdk/checkout-sessions', { customerRef: 'nobody', planRef: plan.reference }))
        .body.code,
    ).toBe('customer_not_found');
    expect(
      (
        await call('POST', '/v1/sdk/checkout-sessions', {
          customerRef: 'buyer',
          planRef: plan.reference,
          successUrl: 'ftp://x',
        })
      ).status,
    ).toBe(400);
    await call('PATCH', '/v1/sdk/merchant', { defaultCurrency: 'eur', supportedTopupCurrencies: ['eur'] });
    const wrongCurrency = await call('POST', '/v1/sdk/checkout-sessions', {
      customerRef: 'buyer',
      topup: { credits: 10, amount: 500, currency: 'usd' },
    });
    expect(wrongCurrency.body.errors[0].path).toBe('/topup/currency');
    const mine = (
      await call('POST', '/v1/sdk/checkout-sessions', { customerRef: 'buyer', planRef: plan.reference })
    ).body;
    const other = await seller();
    expect((await other.call('GET', `/v1/sdk/checkout-sessions/${mine.id}`)).status).toBe(404);
  });

  it('a top-up paid on the hosted page credits the balance once and cannot be paid twice', async () => {
    const { call, customer, events } = await seller();
    const session = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        topup: { credits: 250, amount: 2000 },
      })
    ).body;
    const page = await call('GET', `/checkout/${session.id}`, undefined, null);
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.body).toContain('Checkout Co');
    expect(page.body).toContain('$20.00 due today');

    const declined = await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.failsLater), null);
    expect(declined.status).toBe(402);
    expect(declined.body.code).toBe('card_declined');
    const paid = await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null);
    expect(paid.status).toBe(200);
    expect(paid.body.redirectUrl).toBe(
      `https://pay.example.test/checkout/${session.id}/complete?session_id=${session.id}`,
    );
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}/balance`)).body.credits).toBe(250);
    expect(
      (await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null)).body.code,
    ).toBe('checkout_session_closed');
    expect((await call('GET', `/checkout/${session.id}`, undefined, null)).status).toBe(410);
    expect((await call('GET', `/v1/sdk/checkout-sessions/${session.id}`)).body.status).toBe('used');
    expect((await events()).map((e) => e.type)).toEqual([
      'checkout_session.created',
      'checkout_session.completed',
    ]);
  });

  it('collect a billing address and a tax ID when asked, onto the customer and the first invoice', async () => {
    const { call, plan, customer } = await seller();
    const session = await call('POST', '/v1/sdk/checkout-sessions', {
      customerRef: 'buyer',
      planRef: plan.reference,
      billingAddressCollection: 'required',
      taxIdCollection: { enabled: true },
    });
    expect(session.status).toBe(201);
    expect(session.body).toMatchObject({
      billingAddressCollection: 'required',
      taxIdCollection: { enabled: true },
    });
    expect(
      (
        await call('POST', '/v1/sdk/checkout-sessions', {
          customerRef: 'buyer',
          planRef: plan.reference,
          billingAddressCollection: 'sometimes',
        })
      ).status,
    ).toBe(400);
    const page = await call('GET', `/checkout/${session.body.id}`, undefined, null);
    expect(page.body).toContain('id="billing-address"');
    expect(page.body).toContain('buying as a business');
    const pay = (body: Json) =>
      call('POST', `/checkout/${session.body.id}/pay`, { ...card(SANDBOX_CARDS.succeeds), ...body }, null);

    // Refused, naming each missing part; nothing charged, the session still open.
    const bare = await pay({});
    expect(bare.status).toBe(400);
    expect(bare.body.errors.map((e: Json) => e.path)).toEqual([
      '/billing/address/line1',
      '/billing/address/city',
      '/billing/address/country',
    ]);
    const badCountry = await pay({ billing: { address: { line1: 'Rue 1', city: 'Paris', country: 'XX' } } });
    expect(badCountry.body.errors.map((e: Json) => e.path)).toEqual(['/billing/address/country']);
    const badVat = await pay({
      billing: {
        address: { line1: 'Rue 1', city: 'Paris', country: 'FR' },
        taxId: { type: 'eu_vat', value: 'nope' },
      },
    });
    expect(badVat.body.errors.map((e: Json) => e.path)).toEqual(['/billing/taxId/value']);
    const control = await pay({
      billing: { address: { line1: 'Rue\u0000 1', city: 'Paris', country: 'FR' } },
    });
    expect(control.status).toBe(400);
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}`)).body.address).toBeNull();
    expect((await call('GET', `/v1/sdk/checkout-sessions/${session.body.id}`)).body.status).toBe('active');

    const paid = await pay({
      billing: {
        address: { line1: ' 5 Rue de Rivoli ', city: 'Paris', postalCode: '75001', country: 'fr' },
        taxId: { type: 'eu_vat', value: 'FR 12 345678901' },
      },
    });
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    const after = (await call('GET', `/v1/sdk/customers/${customer.reference}`)).body;
    expect(after.address).toEqual({
      line1: '5 Rue de Rivoli',
      line2: null,
      city: 'Paris',
      state: null,
      postalCode: '75001',
      country: 'FR',
    });
    expect(after.taxIds).toEqual([{ type: 'eu_vat', value: 'FR12345678901', verification: null }]);
    const invoices = (await call('GET', '/v1/sdk/invoices?customerRef=buyer')).body.data as Json[];
    expect(invoices).toHaveLength(1);
    expect(invoices[0]?.customerAddress).toMatchObject({ line1: '5 Rue de Rivoli', country: 'FR' });
    expect(invoices[0]?.customerTaxIds).toEqual([{ type: 'eu_vat', value: 'FR12345678901' }]);

    // The same details sent with many payments of one session at once: one pays, one tax ID kept.
    const again = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        topup: { credits: 10, amount: 1000 },
        taxIdCollection: { enabled: true },
      })
    ).body;
    const racing = await Promise.all(
      Array.from({ length: 8 }, () =>
        call(
          'POST',
          `/checkout/${again.id}/pay`,
          { ...card(SANDBOX_CARDS.succeeds), billing: { taxId: { type: 'gb_vat', value: 'GB123456789' } } },
          null,
        ),
      ),
    );
    expect(racing.filter((r) => r.status === 200)).toHaveLength(1);
    expect(racing.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}`)).body.taxIds).toEqual([
      { type: 'eu_vat', value: 'FR12345678901', verification: null },
      { type: 'gb_vat', value: 'GB123456789', verification: null },
    ]);
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}/balance`)).body.credits).toBe(10);

    // A session that asks for neither takes neither.
    const plain = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        topup: { credits: 5, amount: 500 },
      })
    ).body;
    expect(plain).toMatchObject({ billingAddressCollection: 'auto', taxIdCollection: { enabled: false } });
    const unasked = await call(
      'POST',
      `/checkout/${plain.id}/pay`,
      { ...card(SANDBOX_CARDS.succeeds), billing: { taxId: { type: 'eu_vat', value: 'FR12345678901' } } },
      null,
    );
    expect([unasked.status, unasked.body.errors?.[0]?.path]).toEqual([400, '/billing/taxId']);
    expect((await call('GET', `/checkout/${plain.id}`, undefined, null)).body).not.toContain(
      'id="billing-address"',
    );
  });

  it('require a tax ID of a customer who has none when the session says so', async () => {
    const { call, plan } = await seller();
    const refused = await call('POST', '/v1/sdk/checkout-sessions', {
      customerRef: 'buyer',
      planRef: plan.reference,
      taxIdCollection: { enabled: false, required: 'if_supported' },
    });
    expect([refused.status, refused.body.errors?.[0]?.path]).toEqual([400, '/taxIdCollection/required']);
    const ask = { enabled: true, required: 'if_supported' };
    const session = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        planRef: plan.reference,
        taxIdCollection: ask,
      })
    ).body;
    expect(session.taxIdCollection).toEqual(ask);
    // The fields are shown and required, with no "buying as a business" box to tick.
    const page = String((await call('GET', `/checkout/${session.id}`, undefined, null)).body);
    expect(page).toContain('<div id="tax-id-fields" data-required="1">');
    expect(page).not.toContain('buying as a business');
    const pay = (body: Json) =>
      call('POST', `/checkout/${session.id}/pay`, { ...card(SANDBOX_CARDS.succeeds), ...body }, null);
    const without = await pay({});
    expect([without.status, without.body.errors?.[0]?.path]).toEqual([400, '/billing/taxId']);
    expect((await call('GET', `/v1/sdk/checkout-sessions/${session.id}`)).body.status).toBe('active');
    expect((await pay({ billing: { taxId: { type: 'gb_vat', value: 'GB 123 456 789' } } })).status).toBe(200);
    expect((await call('GET', '/v1/sdk/customers/buyer')).body.taxIds).toEqual([
      { type: 'gb_vat', value: 'GB123456789', verification: null },
    ]);
    // The next such checkout of the same customer, who has one now, leaves it optional.
    const next = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        topup: { credits: 5, amount: 500 },
        taxIdCollection: ask,
      })
    ).body;
    expect((await call('GET', `/checkout/${next.id}`, undefined, null)).body).toContain(
      'buying as a business',
    );
    expect((await call('POST', `/checkout/${next.id}/pay`, card(SANDBOX_CARDS.succeeds), null)).status).toBe(
      200,
    );
    // Asked with the address: the country given decides (Stripe's if_supported). A business in
    // Germany must give one; in Mexico, where no kind is taken, it need not.
    await call('POST', '/v1/sdk/customers', { externalRef: 'nomad' });
    const both = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'nomad',
        planRef: plan.reference,
        billingAddressCollection: 'required',
        taxIdCollection: ask,
      })
    ).body;
    const bothPage = String((await call('GET', `/checkout/${both.id}`, undefined, null)).body);
    expect(bothPage).toMatch(/<div id="tax-id-fields" hidden data-required-in="AE AT AU [A-Z ]+ ZA">/);
    expect(bothPage).toContain('buying as a business');
    const at = (country: string) => ({ line1: '1 Main St', city: 'Town', postalCode: '12345', country });
    const german = await call(
      'POST',
      `/checkout/${both.id}/pay`,
      { ...card(SANDBOX_CARDS.succeeds), billing: { address: at('DE') } },
      null,
    );
    expect([german.status, german.body.errors?.[0]?.message]).toEqual([
      400,
      'is required for a business in DE',
    ]);
    const mexican = await call(
      'POST',
      `/checkout/${both.id}/pay`,
      { ...card(SANDBOX_CARDS.succeeds), billing: { address: at('MX') } },
      null,
    );
    expect(mexican.status).toBe(200);
    // Not asked with the address: the customer's own country decides, so Mexico's sees the box.
    const again = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'nomad',
        topup: { credits: 5, amount: 500 },
        taxIdCollection: ask,
      })
    ).body;
    const againPage = String((await call('GET', `/checkout/${again.id}`, undefined, null)).body);
    expect(againPage).toContain('buying as a business');
    expect(againPage).not.toContain('data-required');
    expect((await call('POST', `/checkout/${again.id}/pay`, card(SANDBOX_CARDS.succeeds), null)).status).toBe(
      200,
    );
  });

  it('wear the provider’s brand colour, which only ever reaches the page as a colour', async () => {
    const { call } = await seller();
    for (const brandColor of ['red', '#fff', '#12345g', '#123456;}body{display:none', 'url(x)', '#1234567'])
      expect({
        brandColor,
        status: (await call('PATCH', '/v1/sdk/merchant', { brandColor })).status,
      }).toEqual({
        brandColor,
        status: 400,
      });
    const set = await call('PATCH', '/v1/sdk/merchant', { brandColor: '#FFD700' });
    expect(set.status).toBe(200);
    expect(set.body.brandColor).toBe('#ffd700');
    expect((await call('GET', '/v1/sdk/merchant')).body.brandColor).toBe('#ffd700');
    const session = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        topup: { credits: 5, amount: 500 },
      })
    ).body;
    const page = await call('GET', `/checkout/${session.id}`, undefined, null);
    // Gold is light: the button's text is dark, and links fall back to ink to stay readable.
    expect(page.body).toContain(':root{--brand:#ffd700;--on-brand:#1d1d1f;--brand-text:#1d1d1f}');
    expect((await call('PATCH', '/v1/sdk/merchant', { brandColor: null })).body.brandColor).toBeUndefined();
    const plain = await call('GET', `/checkout/${session.id}`, undefined, null);
    expect(plain.body).toContain(':root{--brand:#2d5bff;--on-brand:#ffffff;--brand-text:#2d5bff}');
  });

  it('expire after their time with checkout_session.expired and payment.canceled, and cannot be paid then', async () => {
    const { call, plan, events } = await seller();
    const session = (
      await call('POST', '/v1/sdk/checkout-sessions', {
        customerRef: 'buyer',
        planRef: plan.reference,
        expiresInMinutes: 30,
      })
    ).body;
    clock.advance(31 * 60_000);
    expect(
      (await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null)).body.code,
    ).toBe('checkout_session_closed');
    await harness.controlPlane.scheduler.runDue();
    expect((await call('GET', `/v1/sdk/checkout-sessions/${session.id}`)).body.status).toBe('expired');
    expect((await events()).map((e) => e.type)).toEqual([
      'checkout_session.created',
      'checkout_session.expired',
      'payment.canceled',
    ]);
    expect((await events()).at(-1)).toMatchObject({
      object: {
        id: session.id,
        checkout_session: session.id,
        amount: session.amount,
        cancellation_reason: 'abandoned',
      },
    });
    expect((await call('GET', '/v1/sdk/purchases?customerRef=buyer')).body.data).toEqual([]);
  });
});
