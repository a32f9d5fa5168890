import Stripe from 'stripe';
import { expect } from 'vitest';
import type { Clock } from '../../control-plane/src/clock';
import { injectClient, type TestControlPlane } from './control-plane';

/**
 * A provider selling in live mode through its Stripe account, for tests against stripe-mock:
 * its API clients, its webhook endpoint (events signed with the SDK's test-header helper, as
 * Stripe signs them) and what its live ledger and outbox hold; and Stripe events built from
 * stripe-mock's own fixtures, since stripe-mock is stateless and sends none.
 */

export const SIGNING_SECRET = 'whsec_testsigningsecret0123456789';
const signer = new Stripe('sk_test_signer');

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
export type Json = Record<string, any>;

export type LiveSeller = Awaited<ReturnType<typeof liveSeller>>;

/** Stripe events of `type` whose object is the fixture of `resource` with `fields` over it. */
export function eventMaker(clock: Clock, fixtures: () => Record<string, Json>) {
  let count = 0;
  return (type: string, resource: string, fields: Json): Json => {
    count++;
    return {
      id: `evt_test_${count}_${Date.now()}`,
      object: 'event',
      api_version: Stripe.API_VERSION,
      created: Math.floor(clock.now().getTime() / 1000),
      data: { object: { ...fixtures()[resource], ...fields } },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    };
  };
}

/** The header Stripe would sign `payload` with. */
export const stripeSignature = (payload: string, secret = SIGNING_SECRET) =>
  signer.webhooks.generateTestHeaderString({ payload, secret });

export async function liveSeller(harness: TestControlPlane, name: string) {
  const { sandboxKey, liveKey, provider } = await harness.controlPlane.providers.create({
    displayName: name,
  });
  const live = injectClient(harness.controlPlane, liveKey);
  const post = async (body: Json, secret = SIGNING_SECRET) => {
    const payload = JSON.stringify(body);
    const response = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/v1/processors/stripe/webhooks/${provider.id}`,
      headers: { 'content-type': 'application/json', 'stripe-signature': stripeSignature(payload, secret) },
      payload,
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
  const events = async (prefix: string) => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1 AND environment = 'live' AND type LIKE $2
        ORDER BY created_at, id`,
      [provider.id, `${prefix}%`],
    );
    return rows.map((r) => ({ type: r.type, object: r.payload.data.object }));
  };
  const ledger = async (kind: string) => {
    const { rows } = await harness.pool.query<{ account: string; amount: string }>(
      `SELECT account, amount FROM ledger_entries WHERE provider_id = $1 AND environment = 'live' AND kind = $2
        ORDER BY transaction_id, account`,
      [provider.id, kind],
    );
    return rows.map((r) => [r.account, Number(r.amount)]);
  };
  return {
    provider,
    liveKey,
    sandbox: injectClient(harness.controlPlane, sandboxKey),
    live,
    post,
    events,
    ledger,
  };
}

export async function connect(seller: LiveSeller) {
  const connected = await seller.live('PUT', '/v1/ui/processors/stripe', {
    secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
    webhookSigningSecret: SIGNING_SECRET,
  });
  expect(connected.status).toBe(200);
  return connected.body;
}

/** A live customer with a card stored at Stripe, and a paid monthly plan of 1000. */
export async function payingCustomer(seller: LiveSeller) {
  const product = (await seller.live('POST', '/v1/ui/products', { name: 'Weather' })).body;
  const plan = (
    await seller.live('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      type: 'recurring',
      price: 1000,
    })
  ).body;
  const customer = (await seller.live('POST', '/v1/sdk/customers', { email: 'ada@example.com' })).body
    .reference;
  const card = await seller.live('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
    paymentMethod: 'pm_card_visa',
  });
  expect(card.status).toBe(201);
  return { plan, customer, card: card.body };
}

/** `count` more live customers of `seller`, each with a card stored at Stripe. */
export async function cardHolders(seller: LiveSeller, count: number) {
  const customers: string[] = [];
  for (let i = 0; i < count; i++) {
    const reference = (await seller.live('POST', '/v1/sdk/customers', {})).body.reference as string;
    const card = await seller.live('POST', `/v1/sdk/customers/${reference}/payment-methods`, {
      paymentMethod: 'pm_card_visa',
    });
    expect(card.status).toBe(201);
    customers.push(reference);
  }
  return customers;
}

/**
 * A connected seller's customer who activated the paid plan, paid at Stripe: the purchase, and
 * its first payment with the PaymentIntent Stripe made for it.
 */
export async function activatedPurchase(harness: TestControlPlane, seller: LiveSeller) {
  await connect(seller);
  const { plan, customer } = await payingCustomer(seller);
  const activated = await seller.live('POST', '/v1/sdk/activate', {
    customerRef: customer,
    planRef: plan.id,
  });
  expect(activated.body).toMatchObject({ status: 'activated' });
  const purchase = activated.body.purchaseRef as string;
  const { rows } = await harness.pool.query<{ id: string; processor_payment_intent: string }>(
    'SELECT id, processor_payment_intent FROM payments WHERE purchase_id = $1',
    [purchase],
  );
  const payment = rows[0] as { id: string; processor_payment_intent: string };
  return { plan, customer, purchase, payment: payment.id, intent: payment.processor_payment_intent };
}
