import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  startTestControlPlane,
  TEST_SECRET_KEY,
  type TestControlPlane,
} from '../../test/helpers/control-plane';
import { pollUntil } from '../../test/helpers/poll';
import { root } from '../../test/helpers/processes';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import {
  activatedPurchase,
  cardHolders,
  connect,
  eventMaker,
  type Json,
  liveSeller,
  payingCustomer,
  SIGNING_SECRET,
  stripeSignature,
} from '../../test/helpers/stripe-seller';
import { MovableClock } from '../src/clock';
import { Ledger } from '../src/modules/ledger/service';

/**
 * Live payments through a provider's Stripe account. Every request the service makes goes to
 * stripe-mock (Stripe's OpenAPI-driven mock, installed by `go install`), through a relay that
 * records it, so each test sees what reached "Stripe": path, form and idempotency key. The state
 * stripe-mock cannot hold (it is stateless) arrives as Stripe would send it: events built from
 * stripe-mock's own fixtures, signed with the SDK's test-header helper, posted to the endpoint.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let fixtures: Record<string, Json> = {};
const event = eventMaker(clock, () => fixtures);

describe('live payments through Stripe, payments succeeding', () => {
  let harness: TestControlPlane;
  let mock: StripeMock;

  beforeAll(async () => {
    mock = await startStripeMock({ payments: 'succeed', refunds: 'pending' });
    fixtures = mock.fixtures;
    harness = await startTestControlPlane({
      bodyLimitBytes: 1024 * 1024,
      clock,
      stripeApiUrl: mock.url,
      payouts: { schedule: 'daily', delayDays: 2 },
    });
  }, 600_000);
  afterAll(async () => {
    await harness?.close();
    await mock?.close();
  });
  /** A live seller connected to Stripe (stripe-mock) with one recurring plan on sale. */
  const sellingPlan = async (name: string, price: number) => {
    const s = await liveSeller(harness, name);
    await connect(s);
    const product = (await s.live('POST', '/v1/ui/products', { name: 'Atlas' })).body;
    const plan = (
      await s.live('POST', `/v1/ui/products/${product.id}/plans`, { name: 'Team', type: 'recurring', price })
    ).body;
    return { s, plan };
  };
  /** The Stripe customer (cus_…) made by a request after the `from`th. */
  const stripeCustomerMade = (from: number) =>
    mock.requests.slice(from).find((r) => r.method === 'POST' && r.path === '/v1/customers')?.answered;

  it('connects with the live key only, keeps the keys sealed, shows the last 4, disconnects', async () => {
    const s = await liveSeller(harness, 'Connecting');
    // Before a connection, live cards are refused as before.
    const before = await s.live('POST', '/v1/sdk/customers', {});
    const refused = await s.live('POST', `/v1/sdk/customers/${before.body.reference}/payment-methods`, {
      paymentMethod: 'pm_card_visa',
    });
    expect(refused.body).toMatchObject({ status: 409, code: 'payments_not_configured' });

    const keys = { secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc', webhookSigningSecret: SIGNING_SECRET };
    expect((await s.sandbox('PUT', '/v1/ui/processors/stripe', keys)).body).toMatchObject({
      status: 403,
      code: 'forbidden',
    });
    const bad = await s.live('PUT', '/v1/ui/processors/stripe', { ...keys, secretKey: 'pk_live_notasecret' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('/secretKey');
    expect((await s.live('GET', '/v1/ui/processors/stripe')).body).toEqual({ connected: false });

    const connected = await connect(s);
    expect(connected).toMatchObject({ connected: true, last4: 'p7dc', mode: 'test' });
    expect(connected.account).toMatch(/^acct_/);
    expect(JSON.stringify(connected)).not.toContain('sk_test_4eC39');
    expect((await s.live('GET', '/v1/ui/processors/stripe')).body).toEqual(connected);
    const { rows } = await harness.pool.query(
      'SELECT secret_key_sealed, webhook_secret_sealed FROM processor_connections WHERE provider_id = $1',
      [s.provider.id],
    );
    expect(JSON.stringify(rows)).not.toContain('4eC39HqLyjWDarjtT1zdp7dc');
    expect(JSON.stringify(rows)).not.toContain('testsigningsecret');
    // The key was tried on Stripe before it was kept.
    expect(mock.requests.some((r) => r.method === 'GET' && r.path === '/v1/account')).toBe(true);

    expect((await s.live('DELETE', '/v1/ui/processors/stripe')).body).toEqual({ connected: false });
    expect(
      (
        await s.live('POST', `/v1/sdk/customers/${before.body.reference}/payment-methods`, {
          paymentMethod: 'pm_card_visa',
        })
      ).body.code,
    ).toBe('payments_not_configured');
  });

  it('stores a Stripe payment method on one Stripe customer and charges it off-session with our key', async () => {
    const s = await liveSeller(harness, 'Charging');
    await connect(s);
    const from = mock.requests.length;
    const { plan, customer, card } = await payingCustomer(s);
    expect(card).toMatchObject({ brand: 'visa', last4: '4242', isDefault: true });
    // Card numbers never come in live mode.
    const raw = await s.live('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    expect(raw.status).toBe(400);
    expect(JSON.stringify(raw.body)).toContain('/card');
    // A second card goes to the same Stripe customer: no second customer is made.
    expect(
      (
        await s.live('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
          paymentMethod: 'pm_card_mastercard',
        })
      ).status,
    ).toBe(201);

    const activated = await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(activated.body).toMatchObject({ status: 'activated' });
    const purchase = activated.body.purchaseRef as string;

    const sent = mock.requests.slice(from);
    // Stripe's own mock accepted every request the service sent.
    expect(sent.filter((r) => r.status !== 200)).toEqual([]);
    const customers = sent.filter((r) => r.method === 'POST' && r.path === '/v1/customers');
    expect(customers).toHaveLength(1);
    expect(customers[0]).toMatchObject({
      idempotencyKey: `customer:${customer}`,
      params: { 'metadata[customer]': customer },
    });
    // The email goes on after: the key's parameters are our id alone. The second card sends it
    // again with the new default card (a change Stripe missed would arrive so).
    expect(
      sent.filter(
        (r) => r.path === `/v1/customers/${customers[0]?.answered}` && r.params.email !== undefined,
      ),
    ).toMatchObject([
      { method: 'POST', params: { email: 'ada@example.com' }, status: 200 },
      {
        method: 'POST',
        params: {
          email: 'ada@example.com',
          'invoice_settings[default_payment_method]': 'pm_card_mastercard',
        },
        status: 200,
      },
    ]);
    expect(sent.filter((r) => r.path === '/v1/payment_methods/pm_card_visa/attach')).toHaveLength(1);
    const charges = sent.filter((r) => r.path === '/v1/payment_intents');
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({
      idempotencyKey: `charge:${purchase}:first:0`,
      params: {
        amount: '1000',
        currency: 'usd',
        confirm: 'true',
        off_session: 'true',
        payment_method: 'pm_card_mastercard',
        'allowed_payment_method_types[0]': 'card',
        'metadata[purchase]': purchase,
        'metadata[customer]': customer,
        'metadata[reason]': 'first_payment',
      },
    });
    expect(charges[0]?.params.customer).toMatch(/^cus_/);
    const { rows } = await harness.pool.query(
      `SELECT processor, processor_payment_intent, status, amount FROM payments WHERE purchase_id = $1`,
      [purchase],
    );
    expect(rows).toEqual([
      {
        processor: 'stripe',
        processor_payment_intent: expect.stringMatching(/^pi_/),
        status: 'succeeded',
        amount: 1000,
      },
    ]);
    expect((await s.events('payment.')).map((e) => e.type)).toEqual(['payment.succeeded']);
    expect(await s.ledger('payment')).toContainEqual(['processor_balance', 1000]);
  });

  it('keeps one Stripe customer when the first card failed after it was made and the email changed since', async () => {
    const s = await liveSeller(harness, 'Email changed');
    await connect(s);
    const customer = (await s.live('POST', '/v1/sdk/customers', { email: 'ada@example.com' })).body
      .reference as string;
    const from = mock.requests.length;
    // Stripe makes the customer, then refuses the card: nothing of it is kept here.
    mock.refuseNext('/v1/payment_methods/pm_card_visa/attach', 'resource_missing', 'No such PaymentMethod');
    const refused = await s.live('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
      paymentMethod: 'pm_card_visa',
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('/paymentMethod');
    const patched = await s.live('PATCH', `/v1/sdk/customers/${customer}`, { email: 'grace@example.com' });
    expect(patched.status).toBe(200);
    const stored = await s.live('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
      paymentMethod: 'pm_card_visa',
    });
    expect(stored.status).toBe(201);
    const sent = mock.requests.slice(from);
    const made = sent.filter((r) => r.method === 'POST' && r.path === '/v1/customers');
    // Asked twice under one key with the same parameters: Stripe answers the customer it made.
    expect(made.map((r) => [r.idempotencyKey, r.status])).toEqual([
      [`customer:${customer}`, 200],
      [`customer:${customer}`, 200],
    ]);
    expect(
      sent
        .filter((r) => r.path === `/v1/customers/${made[0]?.answered}` && r.params.email !== undefined)
        .map((r) => r.params.email),
    ).toEqual(['ada@example.com', 'grace@example.com']);
  });

  it('sends a changed email and name to the Stripe customer, and with the next card when Stripe refused it', async () => {
    const s = await liveSeller(harness, 'Details');
    await connect(s);
    const before = mock.requests.length;
    const { customer } = await payingCustomer(s);
    const stripeCustomer = stripeCustomerMade(before);
    expect(stripeCustomer).toMatch(/^cus_/);
    const toStripe = (from: number) =>
      mock.requests
        .slice(from)
        .filter((r) => r.path === `/v1/customers/${stripeCustomer}`)
        .map((r) => ({ email: r.params.email, name: r.params.name, status: r.status }));
    const patch = (body: Json) => s.live('PATCH', `/v1/sdk/customers/${customer}`, body);

    let from = mock.requests.length;
    expect((await patch({ email: 'grace@example.com', name: 'Grace Hopper' })).status).toBe(200);
    expect(toStripe(from)).toEqual([{ email: 'grace@example.com', name: 'Grace Hopper', status: 200 }]);
    // A removed email is removed at Stripe too; a change of anything else asks Stripe nothing.
    from = mock.requests.length;
    expect((await patch({ email: null })).status).toBe(200);
    expect((await patch({ telephone: '+14155550100', metadata: { tier: 'gold' } })).status).toBe(200);
    expect(toStripe(from)).toEqual([{ email: '', name: 'Grace Hopper', status: 200 }]);
    // A billing address goes on as Stripe's address, and a removed one is removed there; tax ids
    // go on as its tax ids (the test below).
    from = mock.requests.length;
    const moved = await patch({
      address: { line1: '1 Main St', city: 'Springfield', postalCode: '62701', country: 'us' },
      taxIds: [{ type: 'us_ein', value: '12-3456789' }],
    });
    expect(moved.status).toBe(200);
    expect((await patch({ address: null })).status).toBe(200);
    const addresses = mock.requests
      .slice(from)
      .filter((r) => r.path === `/v1/customers/${stripeCustomer}`)
      .map((r) => Object.fromEntries(Object.entries(r.params).filter(([key]) => key.startsWith('address'))));
    expect(addresses).toEqual([
      {
        'address[line1]': '1 Main St',
        'address[line2]': '',
        'address[city]': 'Springfield',
        'address[state]': '',
        'address[postal_code]': '62701',
        'address[country]': 'US',
      },
      { address: '' },
    ]);
    const taxIds = mock.requests
      .slice(from)
      .filter((r) => r.method === 'POST' && r.path === `/v1/customers/${stripeCustomer}/tax_ids`);
    expect(taxIds.map((r) => [r.params.type, r.params.value, r.status])[0]).toEqual([
      'us_ein',
      '12-3456789',
      200,
    ]);
    // Stripe refuses the change: ours stands, and the next card stored sends it again.
    from = mock.requests.length;
    mock.refuseNext(`/v1/customers/${stripeCustomer}`, 'resource_missing', 'No such customer');
    const refused = await patch({ email: 'ada.l@example.com' });
    expect(refused.status).toBe(200);
    expect(refused.body.email).toBe('ada.l@example.com');
    const card = await s.live('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
      paymentMethod: 'pm_card_mastercard',
    });
    expect(card.status).toBe(201);
    expect(toStripe(from)).toEqual([
      { email: 'ada.l@example.com', name: 'Grace Hopper', status: 400 },
      { email: 'ada.l@example.com', name: 'Grace Hopper', status: 200 },
    ]);
  });

  it('sends Stripe a customer’s changed details one change at a time, the latest last', async () => {
    const s = await liveSeller(harness, 'Racing details');
    await connect(s);
    const before = mock.requests.length;
    const { customer } = await payingCustomer(s);
    const stripeCustomer = stripeCustomerMade(before);
    const from = mock.requests.length;
    const patch = (email: string) => s.live('PATCH', `/v1/sdk/customers/${customer}`, { email });
    const email = async () => (await s.live('GET', `/v1/sdk/customers/${customer}`)).body.email;
    // Stripe stalls on the first change's update. A second change commits meanwhile; its update
    // waits for the first's to be answered (unlocked, it was read and sent at once, and could
    // reach Stripe first, leaving Stripe the older address).
    mock.hold(true);
    const first = patch('ada.first@example.com');
    await pollUntil(
      async () => mock.held,
      (held) => held === 1,
      { what: 'the first update at Stripe' },
    );
    const second = patch('ada.second@example.com');
    await pollUntil(email, (e) => e === 'ada.second@example.com', { what: 'the second change committed' });
    const sentEarly = await pollUntil(
      async () => mock.held,
      (held) => held > 1,
      { timeoutMs: 1000, what: 'a second update sent while the first is unanswered' },
    ).then(
      () => true,
      () => false,
    );
    expect(sentEarly).toBe(false);
    mock.hold(false);
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    const sent = mock.requests.slice(from).filter((r) => r.path === `/v1/customers/${stripeCustomer}`);
    // The first sync read its own change, the second the latest: what Stripe took last is ours now.
    expect(sent.map((r) => r.params.email)).toEqual(['ada.first@example.com', 'ada.second@example.com']);

    // Eight changes at once: every one is sent, the last the address the customer has now.
    const at = mock.requests.length;
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => patch(`ada.${i}@example.com`)));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const eight = mock.requests.slice(at).filter((r) => r.path === `/v1/customers/${stripeCustomer}`);
    expect(eight).toHaveLength(8);
    expect(eight.at(-1)?.params.email).toBe(await email());
  });

  it("makes the Stripe customer hold the customer's tax IDs, as its name and address follow ours", async () => {
    const s = await liveSeller(harness, 'Tax IDs at Stripe');
    await connect(s);
    const before = mock.requests.length;
    const { customer } = await payingCustomer(s);
    const stripeCustomer = stripeCustomerMade(before);
    const taxCalls = (from: number) =>
      mock.requests
        .slice(from)
        .filter((r) => r.path.startsWith(`/v1/customers/${stripeCustomer}/tax_ids`))
        .map((r) => [
          r.method,
          r.path.slice(`/v1/customers/${stripeCustomer}`.length),
          r.params.type,
          r.params.value,
          r.status,
        ]);
    // Stripe holds DE123456789 already (stripe-mock's answer to every list): only the new one is added.
    let from = mock.requests.length;
    const patched = await s.live('PATCH', `/v1/sdk/customers/${customer}`, {
      taxIds: [
        { type: 'gb_vat', value: 'GB 123 456 789' },
        { type: 'eu_vat', value: 'de123456789' },
      ],
    });
    expect(patched.status).toBe(200);
    expect(taxCalls(from)).toEqual([
      ['GET', '/tax_ids', undefined, undefined, 200],
      ['POST', '/tax_ids', 'gb_vat', 'GB123456789', 200],
    ]);
    // Cleared here, cleared there.
    from = mock.requests.length;
    expect((await s.live('PATCH', `/v1/sdk/customers/${customer}`, { taxIds: [] })).status).toBe(200);
    expect(taxCalls(from)).toEqual([
      ['GET', '/tax_ids', undefined, undefined, 200],
      ['DELETE', expect.stringMatching(/^\/tax_ids\/txi_/), undefined, undefined, 200],
    ]);
    // Every sync of the details compares them again (stripe-mock lists its DE123456789 every time).
    from = mock.requests.length;
    expect(
      (await s.live('PATCH', `/v1/sdk/customers/${customer}`, { email: 'ada@new.example' })).status,
    ).toBe(200);
    expect(taxCalls(from).map((c) => c[0])).toEqual(['GET', 'DELETE']);
  });

  it("charges thirty customers at once, each charge on its own transaction's connection", async () => {
    // Each first payment charges Stripe inside its purchase's transaction. Looking up the
    // provider's Stripe key there on another pooled connection starved the pool (ten
    // connections): ten transactions each waited for an eleventh until the connect timeout.
    const s = await liveSeller(harness, 'Busy');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    const customers = [customer, ...(await cardHolders(s, 29))];
    const answers = await Promise.all(
      customers.map((customerRef) => s.live('POST', '/v1/sdk/activate', { customerRef, planRef: plan.id })),
    );
    expect(answers.map((a) => `${a.status} ${a.body.status}`)).toEqual(customers.map(() => '200 activated'));
    const { rows } = await harness.pool.query<{ id: string }>(
      `SELECT id FROM payments WHERE provider_id = $1 AND status = 'succeeded'`,
      [s.provider.id],
    );
    expect(rows).toHaveLength(30);
    // Refunds call Stripe inside their payment's transaction the same way.
    const refunds = await Promise.all(
      rows.map(({ id }) =>
        s.live('POST', '/v1/ui/transactions/refunds', { originalTransactionId: id, refundAmount: 100 }),
      ),
    );
    expect(refunds.map((r) => `${r.status} ${r.body.status}`)).toEqual(rows.map(() => '202 pending'));
  });

  it('keeps the rest of the API answering while Stripe hangs, and finishes the charges once it is back', async () => {
    // A charge waits on Stripe inside its transaction. When the payment services shared the
    // API's pool, ten charges waiting on a Stripe that had stopped answering held all ten
    // connections, and every other request answered 503 after the 5 s connect timeout.
    const s = await liveSeller(harness, 'Stalled');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    const customers = [customer, ...(await cardHolders(s, 11))];
    mock.hold(true);
    let answers: Array<{ status: number; body: Json }> = [];
    try {
      const activations = Promise.all(
        customers.map((customerRef) => s.live('POST', '/v1/sdk/activate', { customerRef, planRef: plan.id })),
      );
      // Every connection of the payments pool is in a transaction waiting on Stripe.
      await pollUntil(
        async () => mock.held,
        (held) => held >= 10,
        { timeoutMs: 30_000, what: 'ten charges waiting on Stripe' },
      );
      const products = await s.live('GET', '/v1/ui/products');
      expect(products.status).toBe(200);
      const created = await s.live('POST', '/v1/sdk/customers', {});
      expect(created.status).toBe(201);
      // Another customer's limit check (one whose purchase is being paid waits for that payment).
      const check = await s.live('POST', '/v1/sdk/limits', {
        customerRef: created.body.reference,
        productRef: plan.productId,
      });
      expect(check.status).toBe(200);
      mock.hold(false);
      answers = await activations;
    } finally {
      mock.hold(false);
    }
    expect(answers.map((a) => `${a.status} ${a.body.status}`)).toEqual(customers.map(() => '200 activated'));
    const { rows } = await harness.pool.query<{ count: string }>(
      `SELECT count(*) FROM payments WHERE provider_id = $1 AND status = 'succeeded'`,
      [s.provider.id],
    );
    expect(Number(rows[0]?.count)).toBe(12);
  });

  it('sends a live checkout to Stripe Checkout; its completion stores the card, charges and activates, once', async () => {
    const s = await liveSeller(harness, 'Checking out');
    await connect(s);
    const product = (await s.live('POST', '/v1/ui/products', { name: 'Maps' })).body;
    const plan = (
      await s.live('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Team',
        type: 'recurring',
        price: 2500,
      })
    ).body;
    const customer = (await s.live('POST', '/v1/sdk/customers', {})).body.reference;
    const offered = await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(offered.body).toMatchObject({ status: 'payment_required' });
    const session = offered.body.checkoutSessionId as string;

    // The hosted checkout URL sends the customer on to Stripe's page for this session.
    const from = mock.requests.length;
    const page = await harness.controlPlane.app.inject({
      method: 'GET',
      url: new URL(offered.body.checkoutUrl).pathname,
    });
    expect(page.statusCode).toBe(303);
    expect(page.headers.location).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const made = mock.requests.slice(from).filter((r) => r.path === '/v1/checkout/sessions');
    expect(made).toEqual([
      expect.objectContaining({
        status: 200,
        idempotencyKey: `checkout:${session}`,
        params: expect.objectContaining({
          mode: 'setup',
          client_reference_id: session,
          'metadata[checkout_session]': session,
          currency: 'usd',
          customer: expect.stringMatching(/^cus_/),
        }),
      }),
    ]);
    expect(made[0]?.params.success_url).toContain(`session_id=${session}`);
    expect(made[0]?.params['custom_text[submit][message]']).toContain('$25.00');

    // Stripe reports the completed session, three times at once: paid and activated once.
    const completed = event('checkout.session.completed', 'checkout.session', {
      id: 'cs_test_completed',
      mode: 'setup',
      status: 'complete',
      client_reference_id: session,
      setup_intent: 'seti_test_1',
      payment_intent: null,
    });
    const answers = await Promise.all([s.post(completed), s.post(completed), s.post(completed)]);
    const outcomes = answers.map((a) => (a.status === 200 ? a.body.outcome : a.body.code));
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
    // The others were a redelivery (acknowledged) or arrived while it was paying (409: Stripe retries).
    expect(outcomes.every((o) => ['applied', 'duplicate', 'checkout_session_in_progress'].includes(o))).toBe(
      true,
    );
    expect((await s.post(completed)).body.outcome).toBe('duplicate');

    const purchases = (await s.live('GET', `/v1/sdk/purchases?customerRef=${customer}`)).body.data as Json[];
    expect(purchases).toEqual([expect.objectContaining({ planRef: plan.id, status: 'active' })]);
    const charges = mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents');
    expect(charges).toHaveLength(1);
    expect(charges[0]?.params).toMatchObject({
      amount: '2500',
      payment_method: 'pm_card_visa',
      off_session: 'true',
    });
    expect((await s.live('GET', `/v1/sdk/checkout-sessions/${session}`)).body).toMatchObject({
      status: 'used',
    });
    expect((await s.events('checkout_session.completed')).length).toBe(1);
    expect((await s.events('payment.succeeded')).map((e) => e.object.amount)).toEqual([2500]);
  });

  it('has Stripe Checkout collect a required billing address, saved on the customer when it completes', async () => {
    const { s, plan } = await sellingPlan('Addressed', 1500);
    const customer = (await s.live('POST', '/v1/sdk/customers', {})).body.reference;
    const session = (
      await s.live('POST', '/v1/sdk/checkout-sessions', {
        customerRef: customer,
        planRef: plan.id,
        billingAddressCollection: 'required',
      })
    ).body;
    const from = mock.requests.length;
    const page = await harness.controlPlane.app.inject({ method: 'GET', url: new URL(session.url).pathname });
    expect(page.statusCode).toBe(303);
    const made = mock.requests.slice(from).filter((r) => r.path === '/v1/checkout/sessions');
    expect(made).toHaveLength(1);
    expect(made[0]?.status).toBe(200);
    expect(made[0]?.params.billing_address_collection).toBe('required');

    const completed = event('checkout.session.completed', 'checkout.session', {
      id: 'cs_test_addressed',
      mode: 'setup',
      status: 'complete',
      client_reference_id: session.id,
      setup_intent: 'seti_test_2',
      payment_intent: null,
      customer_details: {
        email: null,
        name: 'Ada',
        address: {
          line1: 'Kungsgatan 1\u0007',
          line2: null,
          city: 'Stockholm',
          state: null,
          postal_code: '111 43',
          country: 'SE',
        },
      },
    });
    expect((await s.post(completed)).body.outcome).toBe('applied');
    expect((await s.live('GET', `/v1/sdk/customers/${customer}`)).body.address).toEqual({
      line1: 'Kungsgatan 1',
      line2: null,
      city: 'Stockholm',
      state: null,
      postalCode: '111 43',
      country: 'SE',
    });
    const invoices = (await s.live('GET', `/v1/sdk/invoices?customerRef=${customer}`)).body.data as Json[];
    expect(invoices.map((i) => [i.total, i.customerAddress?.city])).toEqual([[1500, 'Stockholm']]);
  });

  it("has Stripe Checkout take a business's tax ID, saved with its name on the customer when it completes", async () => {
    const { s, plan } = await sellingPlan('Taxed', 1500);
    const customer = (await s.live('POST', '/v1/sdk/customers', { name: 'Ada' })).body.reference;
    const session = (
      await s.live('POST', '/v1/sdk/checkout-sessions', {
        customerRef: customer,
        planRef: plan.id,
        taxIdCollection: { enabled: true, required: 'if_supported' },
      })
    ).body;
    const from = mock.requests.length;
    const page = await harness.controlPlane.app.inject({ method: 'GET', url: new URL(session.url).pathname });
    expect(page.statusCode).toBe(303);
    const made = mock.requests.slice(from).filter((r) => r.path === '/v1/checkout/sessions');
    expect(made).toHaveLength(1);
    expect(made[0]?.status).toBe(200);
    // Stripe refuses tax ID collection for a customer it has unless it may write the name.
    expect(made[0]?.params).toMatchObject({
      'tax_id_collection[enabled]': 'true',
      // The customer has no tax ID: Stripe asks one where their country has them.
      'tax_id_collection[required]': 'if_supported',
      'customer_update[name]': 'auto',
    });
    expect(made[0]?.params.billing_address_collection).toBeUndefined();

    const completed = (id: string, details: Json) =>
      event('checkout.session.completed', 'checkout.session', {
        id,
        mode: 'setup',
        status: 'complete',
        client_reference_id: session.id,
        setup_intent: 'seti_test_3',
        payment_intent: null,
        customer_details: details,
      });
    const details = {
      email: null,
      name: 'Ada',
      individual_name: null,
      business_name: 'Ada Lovelace AB\u0000',
      // Stripe reports the card's country whatever was asked; the session did not ask an address.
      address: { line1: null, line2: null, city: null, state: null, postal_code: null, country: 'SE' },
      tax_ids: [
        { type: 'unknown', value: '123' },
        { type: 'eu_vat', value: 'se 5566-7788.9901' },
      ],
    };
    expect((await s.post(completed('cs_test_taxed', details))).body.outcome).toBe('applied');
    const saved = (await s.live('GET', `/v1/sdk/customers/${customer}`)).body;
    expect(saved).toMatchObject({
      name: 'Ada Lovelace AB',
      address: null,
      taxIds: [{ type: 'eu_vat', value: 'SE556677889901' }],
    });
    const invoices = (await s.live('GET', `/v1/sdk/invoices?customerRef=${customer}`)).body.data as Json[];
    expect(invoices.map((i) => [i.total, i.customerName, i.customerTaxIds])).toEqual([
      [1500, 'Ada Lovelace AB', [{ type: 'eu_vat', value: 'SE556677889901' }]],
    ]);
    // A redelivery changes nothing: the session is paid, the tax ID kept once.
    expect((await s.post(completed('cs_test_taxed', details))).body.outcome).toBe('duplicate');
    expect((await s.live('GET', `/v1/sdk/customers/${customer}`)).body.taxIds).toHaveLength(1);
  });

  it("shows a live session that takes promotion codes on our page first, then Stripe's for what is due", async () => {
    const { s, plan } = await sellingPlan('Coded', 2000);
    const coupon = (
      await s.live('POST', '/v1/sdk/coupons', {
        name: 'Live',
        code: 'LIVE25',
        percentOff: 25,
        duration: 'once',
      })
    ).body;
    const customer = (await s.live('POST', '/v1/sdk/customers', {})).body.reference;
    const session = (
      await s.live('POST', '/v1/sdk/checkout-sessions', {
        customerRef: customer,
        planRef: plan.id,
        allowPromotionCodes: true,
      })
    ).body;
    const path = new URL(session.url).pathname;
    const inject = (method: 'GET' | 'POST', url: string, payload?: object) =>
      harness.controlPlane.app.inject({ method, url, ...(payload === undefined ? {} : { payload }) });
    const from = mock.requests.length;
    // Our page, with the code field and the way on; no card form, no Stripe session yet.
    const ours = await inject('GET', path);
    expect(ours.statusCode).toBe(200);
    expect(ours.body).toContain('<label for="code">Promotion code</label>');
    expect(ours.body).toContain(`href="/checkout/${session.id}/card"`);
    expect(ours.body).not.toContain('id="number"');
    expect(ours.body).toContain('$20.00 due today');
    expect(mock.requests.slice(from).filter((r) => r.path === '/v1/checkout/sessions')).toEqual([]);

    const typed = await inject('POST', `/checkout/${session.id}/promotion-code`, { code: 'live25' });
    expect(typed.json()).toEqual({ amount: 1500, currency: 'usd' });
    const onward = await inject('GET', `/checkout/${session.id}/card`);
    expect(onward.statusCode).toBe(303);
    expect(onward.headers.location).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const made = mock.requests.slice(from).filter((r) => r.path === '/v1/checkout/sessions');
    // A page of its own for the coupon: Stripe would refuse the first key with another text.
    expect(made.map((r) => [r.status, r.idempotencyKey])).toEqual([
      [200, `checkout:${session.id}:${coupon.id}`],
    ]);
    expect(made[0]?.params['custom_text[submit][message]']).toContain('$15.00 due today');

    const charged = mock.requests.length;
    const completed = event('checkout.session.completed', 'checkout.session', {
      id: 'cs_test_coded',
      mode: 'setup',
      status: 'complete',
      client_reference_id: session.id,
      setup_intent: 'seti_test_4',
      payment_intent: null,
    });
    expect((await s.post(completed)).body.outcome).toBe('applied');
    const charges = mock.requests.slice(charged).filter((r) => r.path === '/v1/payment_intents');
    expect(charges.map((r) => r.params.amount)).toEqual(['1500']);
    expect((await s.live('GET', `/v1/sdk/coupons/${coupon.id}`)).body.timesRedeemed).toBe(1);
    // Paid: both ways in say so.
    expect((await inject('GET', path)).statusCode).toBe(410);
    expect((await inject('GET', `/checkout/${session.id}/card`)).headers.location).toBe(path);
  });

  it('refunds through Stripe a charge whose transaction rolled back, once no retry recorded it', async () => {
    const s = await liveSeller(harness, 'Unrecorded');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    // The activation's transaction fails after Stripe charged the card.
    const failing = vi
      .spyOn(Ledger.prototype, 'recordPayment')
      .mockRejectedValueOnce(new Error('commit lost'));
    const from = mock.requests.length;
    try {
      const answer = await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
      expect(answer.status).toBeGreaterThanOrEqual(500);
    } finally {
      failing.mockRestore();
    }
    const charged = mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents');
    expect(charged).toHaveLength(1);
    const journal = async () =>
      (
        await harness.pool.query(
          'SELECT idempotency_key, status, processor_payment_intent FROM processor_charges WHERE customer_id = $1',
          [customer],
        )
      ).rows;
    const [unrecorded] = await journal();
    expect(unrecorded).toMatchObject({
      status: 'unrecorded',
      processor_payment_intent: expect.stringMatching(/^pi_/),
    });
    expect(
      (await harness.pool.query('SELECT id FROM payments WHERE customer_id = $1', [customer])).rows,
    ).toEqual([]);

    await harness.pool.query(
      "UPDATE processor_charges SET created_at = created_at - interval '2 hours' WHERE customer_id = $1",
      [customer],
    );
    const before = mock.requests.length;
    await harness.controlPlane.chargeJournal.runDue();
    expect(mock.requests.slice(before).filter((r) => r.path === '/v1/refunds')).toEqual([
      expect.objectContaining({
        status: 200,
        idempotencyKey: `refund:unrecorded:${unrecorded.idempotency_key}`,
        params: expect.objectContaining({ payment_intent: unrecorded.processor_payment_intent }),
      }),
    ]);
    // stripe-mock keeps the refund pending: the next pass asks again and leaves it so.
    expect((await journal())[0]?.status).toBe('refunding');
    await harness.controlPlane.chargeJournal.runDue();
    expect((await journal())[0]?.status).toBe('refunding');
  });

  it('refunds through Stripe: pending until Stripe says; a failed refund brings the money back, once', async () => {
    const s = await liveSeller(harness, 'Refunding');
    const { payment } = await activatedPurchase(harness, s);
    const from = mock.requests.length;
    const refund = await s.live('POST', '/v1/ui/transactions/refunds', {
      originalTransactionId: payment,
      refundAmount: 400,
    });
    expect(refund.status).toBe(202);
    expect(refund.body).toMatchObject({ status: 'pending', refundAmount: 400 });
    const sent = mock.requests.slice(from).filter((r) => r.path === '/v1/refunds');
    expect(sent).toEqual([
      expect.objectContaining({
        status: 200,
        idempotencyKey: `refund:${refund.body.id}`,
        params: expect.objectContaining({ amount: '400', payment_intent: expect.stringMatching(/^pi_/) }),
      }),
    ]);
    const processorRefund = (
      await harness.pool.query('SELECT processor_refund FROM refunds WHERE id = $1', [refund.body.id])
    ).rows[0].processor_refund as string;

    // The scheduler asks Stripe; stripe-mock still says pending, so it stays pending.
    await harness.controlPlane.scheduler.runDue();
    expect(
      (await harness.pool.query('SELECT status FROM refunds WHERE id = $1', [refund.body.id])).rows[0].status,
    ).toBe('pending');

    // Stripe's refund.updated says it failed, delivered ten times at once: applied once.
    const failed = event('refund.updated', 'refund', {
      id: processorRefund,
      status: 'failed',
      failure_reason: 'expired_or_canceled_card',
      amount: 400,
    });
    const answers = await Promise.all(Array.from({ length: 10 }, () => s.post(failed)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(answers.filter((a) => a.body.outcome === 'applied')).toHaveLength(1);
    expect(answers.filter((a) => a.body.outcome === 'duplicate')).toHaveLength(9);
    expect((await s.events('payment.refund')).map((e) => e.type)).toEqual([
      'payment.refund_pending',
      'payment.refund_failed',
    ]);
    expect((await s.events('payment.refund_failed'))[0]?.object).toMatchObject({
      failure_reason: 'expired_or_canceled_card',
      amount: 400,
    });
    expect(await s.ledger('refund')).toEqual([
      ['processor_balance', -400],
      ['refunds', 400],
    ]);
    expect(await s.ledger('refund_reversal')).toEqual([
      ['processor_balance', 400],
      ['refunds', -400],
    ]);
    // A later "succeeded" for the settled refund changes nothing.
    expect(
      (await s.post(event('refund.updated', 'refund', { id: processorRefund, status: 'succeeded' }))).body,
    ).toMatchObject({ outcome: 'applied' });
    expect((await s.events('payment.refund')).map((e) => e.type)).toHaveLength(2);
  });

  it('maps disputes: opened then lost, and a close that arrives before its opening', async () => {
    const s = await liveSeller(harness, 'Disputed');
    const { intent } = await activatedPurchase(harness, s);

    const base = {
      id: 'du_test_lost',
      payment_intent: intent,
      amount: 1000,
      currency: 'usd',
      reason: 'fraudulent',
    };
    expect(
      (await s.post(event('charge.dispute.created', 'dispute', { ...base, status: 'needs_response' }))).body
        .outcome,
    ).toBe('applied');
    expect((await s.live('GET', '/v1/ui/disputes')).body.data).toEqual([
      expect.objectContaining({ processorDispute: 'du_test_lost', amount: 1000, status: 'needs_response' }),
    ]);
    await s.post(event('charge.dispute.updated', 'dispute', { ...base, status: 'under_review' }));
    await s.post(event('charge.dispute.closed', 'dispute', { ...base, status: 'lost' }));
    expect((await s.live('GET', '/v1/ui/disputes')).body.data[0]).toMatchObject({ status: 'lost' });
    expect((await s.events('payment.disput')).map((e) => e.type)).toEqual([
      'payment.disputed',
      'payment.dispute_closed',
    ]);
    expect(await s.ledger('dispute')).toEqual([
      ['disputes', 1000],
      ['processor_balance', -1000],
    ]);
    expect(await s.ledger('dispute_reversal')).toEqual([]);

    // Another payment's dispute: won, with the close delivered first.
    const second = await payingCustomer(s);
    const other = (
      await s.live('POST', '/v1/sdk/activate', { customerRef: second.customer, planRef: second.plan.id })
    ).body.purchaseRef as string;
    const otherIntent = (
      await harness.pool.query('SELECT processor_payment_intent FROM payments WHERE purchase_id = $1', [
        other,
      ])
    ).rows[0].processor_payment_intent as string;
    const won = {
      id: 'du_test_won',
      payment_intent: otherIntent,
      amount: 300,
      currency: 'usd',
      reason: 'general',
    };
    expect(
      (await s.post(event('charge.dispute.closed', 'dispute', { ...won, status: 'won' }))).body.outcome,
    ).toBe('applied');
    expect(
      (await s.post(event('charge.dispute.created', 'dispute', { ...won, status: 'needs_response' }))).body,
    ).toMatchObject({ outcome: 'applied' });
    const disputes = (await s.live('GET', '/v1/ui/disputes')).body.data as Json[];
    expect(disputes.find((d) => d.processorDispute === 'du_test_won')).toMatchObject({
      status: 'won',
      amount: 300,
    });
    expect(await s.ledger('dispute_reversal')).toEqual([
      ['disputes', -300],
      ['processor_balance', 300],
    ]);
    // A dispute of a charge that is not ours is acknowledged and noted.
    expect(
      (
        await s.post(
          event('charge.dispute.created', 'dispute', { ...won, id: 'du_x', payment_intent: 'pi_unknown' }),
        )
      ).body.outcome,
    ).toBe('unmatched:payment');
  });

  it('applies a dispute once when its opening, review and close arrive at the same moment', async () => {
    const s = await liveSeller(harness, 'Disputed at once');
    const { intent } = await activatedPurchase(harness, s);
    const base = {
      id: 'du_test_race',
      payment_intent: intent,
      amount: 600,
      currency: 'usd',
      reason: 'fraudulent',
    };
    const deliveries = [
      event('charge.dispute.created', 'dispute', { ...base, status: 'needs_response' }),
      event('charge.dispute.updated', 'dispute', { ...base, status: 'under_review' }),
      event('charge.dispute.closed', 'dispute', { ...base, status: 'lost' }),
    ];
    // Each event twice, all six at once.
    const answers = await Promise.all([...deliveries, ...deliveries].map((e) => s.post(e)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
    expect(answers.filter((a) => a.body.outcome === 'duplicate')).toHaveLength(3);
    expect(answers.every((a) => ['applied', 'duplicate'].includes(a.body.outcome))).toBe(true);
    expect((await s.live('GET', '/v1/ui/disputes')).body.data).toEqual([
      expect.objectContaining({ processorDispute: 'du_test_race', amount: 600, status: 'lost' }),
    ]);
    expect((await s.events('payment.disput')).map((e) => e.type)).toEqual([
      'payment.disputed',
      'payment.dispute_closed',
    ]);
    expect(await s.ledger('dispute')).toEqual([
      ['disputes', 600],
      ['processor_balance', -600],
    ]);
  });

  it('records Stripe payouts from their events in any order, and leaves the balance to Stripe', async () => {
    const s = await liveSeller(harness, 'Paid out');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    const payout = { id: 'po_test_1', amount: 700, currency: 'usd', arrival_date: 1_780_000_000 };
    expect((await s.post(event('payout.paid', 'payout', { ...payout, status: 'paid' }))).body.outcome).toBe(
      'applied',
    );
    expect(
      (await s.post(event('payout.created', 'payout', { ...payout, status: 'pending' }))).body.outcome,
    ).toBe('applied');
    const listed = (await s.live('GET', '/v1/ui/payouts')).body.data as Json[];
    expect(listed).toEqual([
      expect.objectContaining({
        processorPayout: 'po_test_1',
        amount: 700,
        status: 'paid',
        automatic: false,
      }),
    ]);
    expect((await s.events('payout.')).map((e) => e.type)).toEqual(['payout.paid']);
    expect(await s.ledger('payout')).toEqual([
      ['bank', 700],
      ['processor_balance', -700],
    ]);
    // A failed payout: the money comes back to the balance.
    const failed = { id: 'po_test_2', amount: 200, currency: 'usd', arrival_date: 1_780_000_000 };
    await s.post(
      event('payout.failed', 'payout', { ...failed, status: 'failed', failure_code: 'account_closed' }),
    );
    expect((await s.events('payout.failed'))[0]?.object).toMatchObject({
      amount: 200,
      failure_reason: 'account_closed',
    });
    expect(await s.ledger('payout_reversal')).toEqual([
      ['bank', -200],
      ['processor_balance', 200],
    ]);
    // The daily payout run leaves a Stripe-connected live balance (300 here) to Stripe.
    clock.set(new Date(clock.now().getTime() + 86_400_000));
    await harness.controlPlane.scheduler.runDue();
    expect(
      ((await s.live('GET', '/v1/ui/payouts')).body.data as Json[]).map((p) => p.processorPayout).sort(),
    ).toEqual(['po_test_1', 'po_test_2']);
  });

  it('reconciles the ledger with Stripe balance transactions, reporting differences, by API and admin command', async () => {
    const s = await liveSeller(harness, 'Reconciled');
    const { intent } = await activatedPurchase(harness, s);
    const from = new Date(clock.now().getTime() - 3_600_000).toISOString();
    const to = new Date(clock.now().getTime() + 3_600_000).toISOString();
    const before = mock.requests.length;
    const report = await s.live('GET', `/v1/ui/processors/stripe/reconciliation?from=${from}&to=${to}`);
    expect(report.status).toBe(200);
    const asked = mock.requests.slice(before).filter((r) => r.path === '/v1/balance_transactions');
    expect(asked).toEqual([expect.objectContaining({ method: 'GET', status: 200 })]);
    // stripe-mock's one balance transaction is a charge of another PaymentIntent: both sides are
    // reported, nothing is matched by guess.
    expect(report.body).toMatchObject({
      matched: 0,
      balanced: false,
      missingAtStripe: [{ kind: 'payment', stripeId: intent, amount: 1000, currency: 'usd' }],
      missingHere: [
        expect.objectContaining({ kind: 'payment', amount: 100, ref: expect.stringMatching(/^txn_/) }),
      ],
      stripeFees: { usd: 0 },
    });
    expect(
      (await s.live('GET', `/v1/ui/processors/stripe/reconciliation?from=${to}&to=${from}`)).body,
    ).toMatchObject({ status: 400, code: 'validation_failed' });
    expect(
      (await s.sandbox('GET', `/v1/ui/processors/stripe/reconciliation?from=${from}&to=${to}`)).body,
    ).toMatchObject({ status: 403 });

    // The same report from the admin command, against the same database.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--import',
        './deploy/loader.mjs',
        'control-plane/src/admin/cli.ts',
        'reconcile',
        '--provider',
        s.provider.id,
        '--from',
        from,
        '--to',
        to,
      ],
      {
        cwd: root,
        env: {
          ...process.env,
          DATABASE_URL: harness.databaseUrl,
          SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
          STRIPE_API_URL: mock.url,
        },
      },
    );
    expect(JSON.parse(stdout)).toEqual(report.body);
  });

  it('refuses a wrong signature, an unknown provider, and acknowledges events it does not use', async () => {
    const s = await liveSeller(harness, 'Signed');
    await connect(s);
    const unused = event('customer.created', 'customer', {});
    expect((await s.post(unused)).body).toMatchObject({ received: true, outcome: 'ignored' });
    expect((await s.post(unused)).body).toMatchObject({ outcome: 'duplicate' });
    // Signed but not well formed: acknowledged as refused, nothing recorded.
    for (const amount of ['lots', -5, 2 ** 60, null])
      expect(
        (await s.post(event('payout.paid', 'payout', { id: `po_bad_${String(amount)}`, amount }))).body,
      ).toMatchObject({ received: true, outcome: 'refused:malformed' });
    expect(
      (await s.post({ ...event('charge.dispute.created', 'dispute', {}), data: { object: null } })).body
        .outcome,
    ).toBe('refused:malformed');
    const forged = await s.post(
      event('payout.paid', 'payout', { id: 'po_forged' }),
      'whsec_someoneelse0123456789',
    );
    expect(forged.body).toMatchObject({ status: 400, code: 'invalid_signature' });
    const tampered = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/v1/processors/stripe/webhooks/${s.provider.id}`,
      headers: {
        'content-type': 'application/json',
        'stripe-signature': stripeSignature(JSON.stringify(event('payout.paid', 'payout', { amount: 1 }))),
      },
      payload: JSON.stringify(event('payout.paid', 'payout', { amount: 999_999 })),
    });
    expect(tampered.json()).toMatchObject({ code: 'invalid_signature' });
    const unsigned = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/v1/processors/stripe/webhooks/${s.provider.id}`,
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(unsigned.json()).toMatchObject({ status: 400, code: 'invalid_signature' });
    const nobody = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/processors/stripe/webhooks/prv_nobody',
      headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=00' },
      payload: '{}',
    });
    expect(nobody.statusCode).toBe(404);
    expect((await s.live('GET', '/v1/ui/payouts')).body.data).toEqual([]);
  });

  it('a refused renewal puts the purchase past due; the dunning retry through Stripe recovers it', async () => {
    const s = await liveSeller(harness, 'Dunning');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    const purchase = (await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id }))
      .body.purchaseRef as string;
    const periodEnd = new Date((await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body.periodEnd);

    // The card is refused at renewal.
    mock.payments('refused');
    const from = mock.requests.length;
    clock.set(new Date(periodEnd.getTime() + 60_000));
    await harness.controlPlane.scheduler.runDue();
    expect((await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body).toMatchObject({ status: 'past_due' });
    // Every purchase of this file renews here; this one's charges carry its id.
    const charges = () =>
      mock.requests
        .slice(from)
        .filter((r) => r.path === '/v1/payment_intents' && r.params['metadata[purchase]'] === purchase);
    const renewal = charges();
    expect(renewal).toEqual([
      expect.objectContaining({
        status: 200,
        idempotencyKey: `charge:${purchase}:${periodEnd.toISOString()}:0`,
        params: expect.objectContaining({ amount: '1000', 'metadata[reason]': 'renewal' }),
      }),
    ]);
    const failed = (await s.events('payment.failed')).map((e) => e.object);
    expect(failed).toEqual([
      expect.objectContaining({ amount: 1000, failure_reason: 'requires_payment_method' }),
    ]);
    expect((await s.events('purchase.past_due')).length).toBe(1);
    // Stripe's own event for that attempt agrees with what was recorded.
    const intent = failed[0]?.processor_payment_intent as string;
    expect(
      (
        await s.post(
          event('payment_intent.payment_failed', 'payment_intent', {
            id: intent,
            status: 'requires_payment_method',
          }),
        )
      ).body.outcome,
    ).toBe('applied');

    // A day later the customer's card works again: the retry succeeds and the purchase renews.
    mock.payments('succeed');
    clock.set(new Date(periodEnd.getTime() + 25 * 3_600_000));
    await harness.controlPlane.scheduler.runDue();
    const recovered = (await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body;
    expect(recovered).toMatchObject({ status: 'active' });
    expect(new Date(recovered.periodStart).getTime()).toBe(periodEnd.getTime());
    const retry = charges();
    expect(retry.map((r) => r.idempotencyKey)).toEqual([
      `charge:${purchase}:${periodEnd.toISOString()}:0`,
      `charge:${purchase}:${periodEnd.toISOString()}:1`,
    ]);
    expect(retry[1]?.params['metadata[reason]']).toBe('dunning_retry');
    expect((await s.events('payment.succeeded')).map((e) => e.object.amount)).toEqual([1000, 1000]);
    expect((await s.events('purchase.renewed')).length).toBe(1);
    const invoices = (await s.live('GET', `/v1/sdk/invoices?customerRef=${customer}`)).body.data as Json[];
    expect(invoices.map((i) => i.status)).toEqual(['paid', 'paid']);
  });
});

describe('live payments through Stripe, cards refused', () => {
  let harness: TestControlPlane;
  let mock: StripeMock;

  beforeAll(async () => {
    // stripe-mock's own PaymentIntent fixture: requires_payment_method, the state of a refusal.
    mock = await startStripeMock({ payments: 'refused' });
    harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
  }, 600_000);
  afterAll(async () => {
    await harness?.close();
    await mock?.close();
  });

  it('keeps nothing of a refused first payment and tells the customer to pay again', async () => {
    const s = await liveSeller(harness, 'Refused');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    const activated = await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(activated.body).toMatchObject({ status: 'payment_required' });
    expect(activated.body.message).toContain('requires_payment_method');
    const charges = mock.requests.filter((r) => r.path === '/v1/payment_intents');
    expect(charges).toHaveLength(1);
    expect(charges[0]?.status).toBe(200);
    expect(
      (
        await harness.pool.query('SELECT count(*)::int AS n FROM purchases WHERE customer_id = $1', [
          customer,
        ])
      ).rows[0].n,
    ).toBe(0);
  });
});
