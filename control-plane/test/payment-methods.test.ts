import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * A customer's cards (issue 64): made the default, removed (the newest other card takes over; the
 * last one stays while something charges it), and added through a hosted checkout that only saves
 * a card: our page with test cards in sandbox, Stripe Checkout in setup mode in live (stripe-mock
 * behind a relay that records what reached it, and a signed checkout.session.completed).
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
const SIGNING_SECRET = 'whsec_testsigningsecret0123456789';

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

let harness: TestControlPlane;
let mock: StripeMock;

beforeAll(async () => {
  mock = await startStripeMock({ payments: 'succeed' });
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
}, 600_000);
afterAll(async () => {
  await harness?.close();
  await mock?.close();
});

/** Valid test cards that succeed, each a different card. */
const DISTINCT_CARDS = [SANDBOX_CARDS.succeeds, '5555555555554444', '4000056655665556', '378282246310005'];

const card = (number: string = SANDBOX_CARDS.succeeds) => ({
  card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
});

async function sandboxSeller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const customer = async () => (await api('POST', '/v1/sdk/customers', {})).body.reference as string;
  let cardsAdded = 0;
  /** A card of its own each time: the same card twice is one card (see the test below). */
  const addCard = async (ref: string) => {
    const number = DISTINCT_CARDS[cardsAdded++ % DISTINCT_CARDS.length];
    const added = await api('POST', `/v1/sdk/customers/${ref}/payment-methods`, card(number));
    expect(added.status).toBe(201);
    return added.body.id as string;
  };
  const cards = async (ref: string) =>
    ((await api('GET', `/v1/sdk/customers/${ref}/payment-methods`)).body.data as Json[]).map((c) => [
      c.id,
      c.isDefault,
    ]);
  return { api, customer, addCard, cards };
}

describe('default and removed cards', () => {
  it('makes a card the default, and removing the default hands it to the newest other card', async () => {
    const s = await sandboxSeller('Cards');
    const ada = await s.customer();
    const [one, two, three] = [await s.addCard(ada), await s.addCard(ada), await s.addCard(ada)];
    expect(await s.cards(ada)).toEqual([
      [one, false],
      [two, false],
      [three, true],
    ]);
    const made = await s.api('POST', `/v1/sdk/customers/${ada}/payment-methods/${one}/default`);
    expect(made.status).toBe(200);
    expect(made.body).toMatchObject({ id: one, isDefault: true });
    expect(await s.cards(ada)).toEqual([
      [one, true],
      [two, false],
      [three, false],
    ]);
    const removed = await s.api('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${one}`);
    expect(removed).toMatchObject({ status: 200, body: { id: one, deleted: true } });
    expect(await s.cards(ada)).toEqual([
      [two, false],
      [three, true],
    ]);
    // Gone is gone: neither removable again nor the default.
    expect((await s.api('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${one}`)).body.code).toBe(
      'payment_method_not_found',
    );
    expect((await s.api('POST', `/v1/sdk/customers/${ada}/payment-methods/${one}/default`)).status).toBe(404);
    // Another customer's card is as unknown as one that never was.
    const grace = await s.customer();
    expect((await s.api('POST', `/v1/sdk/customers/${grace}/payment-methods/${two}/default`)).status).toBe(
      404,
    );
    expect((await s.api('DELETE', `/v1/sdk/customers/${grace}/payment-methods/${two}`)).status).toBe(404);
  });

  it('keeps one card when the same card is stored again, as each checkout stores it', async () => {
    const s = await sandboxSeller('Same card');
    const ada = await s.customer();
    const first = await s.api('POST', `/v1/sdk/customers/${ada}/payment-methods`, card());
    const other = await s.api('POST', `/v1/sdk/customers/${ada}/payment-methods`, card('5555555555554444'));
    const again = await s.api('POST', `/v1/sdk/customers/${ada}/payment-methods`, {
      card: { number: '4242 4242 4242 4242', expMonth: 6, expYear: 2036, cvc: '999' },
    });
    expect(again.status).toBe(201);
    // The first card again: its row, with the new expiry, the default once more.
    expect(again.body).toMatchObject({ id: first.body.id, expMonth: 6, expYear: 2036, isDefault: true });
    expect(await s.cards(ada)).toEqual([
      [first.body.id, true],
      [other.body.id, false],
    ]);
  });

  it('keeps the last card while a paid plan renews on it, and lets it go once the plan is cancelled', async () => {
    const s = await sandboxSeller('Last card');
    const product = (await s.api('POST', '/v1/ui/products', { name: 'Weather' })).body;
    const plan = (
      await s.api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Pro',
        type: 'recurring',
        price: 900,
        billingCycle: 'monthly',
      })
    ).body;
    const ada = await s.customer();
    const only = await s.addCard(ada);
    const purchase = (await s.api('POST', '/v1/sdk/activate', { customerRef: ada, planRef: plan.id })).body
      .purchaseRef;
    const refused = await s.api('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${only}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('payment_method_required');
    expect(await s.cards(ada)).toEqual([[only, true]]);
    // With a second card the first can go.
    const second = await s.addCard(ada);
    expect((await s.api('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${second}`)).status).toBe(200);
    await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, {});
    expect((await s.api('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${only}`)).status).toBe(200);
    expect(await s.cards(ada)).toEqual([]);
  });

  it('removes a card once when ten removals race, and leaves exactly one default', async () => {
    const s = await sandboxSeller('Racing cards');
    const ada = await s.customer();
    const cards = [await s.addCard(ada), await s.addCard(ada), await s.addCard(ada)];
    const last = cards[2] as string;
    const answers = await Promise.all([
      ...Array.from({ length: 10 }, () =>
        s.api('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${last}`),
      ),
      ...cards
        .slice(0, 2)
        .map((id) => s.api('POST', `/v1/sdk/customers/${ada}/payment-methods/${id}/default`)),
    ]);
    expect(answers.slice(0, 10).filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.slice(0, 10).filter((a) => a.status === 404)).toHaveLength(9);
    const left = await s.cards(ada);
    expect(left).toHaveLength(2);
    expect(left.filter(([, isDefault]) => isDefault)).toHaveLength(1);
  });
});

describe('adding a card through checkout in setup mode', () => {
  it('saves a sandbox test card as the default and charges nothing', async () => {
    const s = await sandboxSeller('Setup sandbox');
    const ada = await s.customer();
    const created = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: ada,
      setup: true,
      successUrl: 'https://shop.example/cards',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ kind: 'setup', amount: 0, planRef: null, credits: null });
    const page = await harness.controlPlane.app.inject({
      method: 'GET',
      url: `/checkout/${created.body.id}`,
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Nothing is charged today');
    expect(page.body).toContain('>Save card</button>');
    const paid = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${created.body.id}/pay`,
      payload: card(),
    });
    expect(paid.statusCode).toBe(200);
    expect(paid.json().redirectUrl).toBe(`https://shop.example/cards?session_id=${created.body.id}`);
    expect((await s.cards(ada)).map(([, isDefault]) => isDefault)).toEqual([true]);
    expect((await harness.pool.query('SELECT 1 FROM payments WHERE customer_id = $1', [ada])).rowCount).toBe(
      0,
    );
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${created.body.id}`)).body.status).toBe('used');
    // Setup and a plan at once is refused, as is a session asking for nothing.
    for (const body of [
      { customerRef: ada, setup: true, planRef: 'pln_x' },
      { customerRef: ada, setup: false },
    ])
      expect((await s.api('POST', '/v1/sdk/checkout-sessions', body)).status).toBe(400);
  });

  it('sends a live customer to Stripe Checkout in setup mode, saves the card it reports, and detaches a removed one', async () => {
    const { liveKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Setup live' });
    const live = injectClient(harness.controlPlane, liveKey);
    expect(
      (
        await live('PUT', '/v1/ui/processors/stripe', {
          secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
          webhookSigningSecret: SIGNING_SECRET,
        })
      ).status,
    ).toBe(200);
    const ada = (await live('POST', '/v1/sdk/customers', { email: 'ada@example.com' })).body
      .reference as string;
    const session = (await live('POST', '/v1/sdk/checkout-sessions', { customerRef: ada, setup: true })).body;
    const from = mock.requests.length;
    const page = await harness.controlPlane.app.inject({ method: 'GET', url: `/checkout/${session.id}` });
    expect(page.statusCode).toBe(303);
    expect(page.headers.location).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const made = mock.requests.slice(from).filter((r) => r.path === '/v1/checkout/sessions');
    expect(made).toEqual([
      expect.objectContaining({
        params: expect.objectContaining({ mode: 'setup', client_reference_id: session.id }),
      }),
    ]);

    const payload = JSON.stringify({
      id: `evt_setup_${Date.now()}`,
      object: 'event',
      api_version: Stripe.API_VERSION,
      created: Math.floor(clock.now().getTime() / 1000),
      data: {
        object: {
          ...mock.fixtures['checkout.session'],
          id: 'cs_test_setup',
          mode: 'setup',
          status: 'complete',
          client_reference_id: session.id,
          setup_intent: 'seti_test_setup',
          payment_intent: null,
        },
      },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type: 'checkout.session.completed',
    });
    const delivered = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/v1/processors/stripe/webhooks/${provider.id}`,
      headers: {
        'content-type': 'application/json',
        'stripe-signature': new Stripe('sk_test_signer').webhooks.generateTestHeaderString({
          payload,
          secret: SIGNING_SECRET,
        }),
      },
      payload,
    });
    expect(delivered.json()).toMatchObject({ outcome: 'applied' });
    const cards = (await live('GET', `/v1/sdk/customers/${ada}/payment-methods`)).body.data as Json[];
    expect(cards).toEqual([expect.objectContaining({ isDefault: true })]);
    // Nothing was charged for a card alone.
    expect(mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents')).toEqual([]);

    const { rows } = await harness.pool.query<{ processor_ref: string }>(
      'SELECT processor_ref FROM payment_methods WHERE id = $1',
      [cards[0]?.id],
    );
    const removed = await live('DELETE', `/v1/sdk/customers/${ada}/payment-methods/${cards[0]?.id}`);
    expect(removed.status).toBe(200);
    expect(
      mock.requests
        .slice(from)
        .filter((r) => r.path === `/v1/payment_methods/${rows[0]?.processor_ref}/detach`),
    ).toHaveLength(1);
    expect((await live('GET', `/v1/sdk/customers/${ada}/payment-methods`)).body.data).toEqual([]);
  });
});
