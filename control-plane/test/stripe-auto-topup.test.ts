import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { creditsProduct } from '../../test/helpers/credit-plans';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { MovableClock } from '../src/clock';

/**
 * Auto top-up in live mode (issue 64): the off-session charge goes to the provider's Stripe
 * account (stripe-mock, behind a relay that records what reached it) once for a crossing that
 * concurrent draws make, with the setting and attempt as its idempotency key; a card Stripe
 * refuses is a failed attempt with its event, and the credits stay as they were.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

describe('auto top-up through Stripe', () => {
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

  it('charges the stored card once for a crossing, and records a refusal as a failed attempt', async () => {
    const { liveKey, provider } = await harness.controlPlane.providers.create({
      displayName: 'Live Credits',
    });
    const live = injectClient(harness.controlPlane, liveKey);
    expect(
      (
        await live('PUT', '/v1/ui/processors/stripe', {
          secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
          webhookSigningSecret: 'whsec_testsigningsecret0123456789',
        })
      ).status,
    ).toBe(200);
    const { product, plan } = await creditsProduct(live);
    const customer = (await live('POST', '/v1/sdk/customers', { email: 'ada@example.com' })).body
      .reference as string;
    expect(
      (await live('POST', `/v1/sdk/customers/${customer}/payment-methods`, { paymentMethod: 'pm_card_visa' }))
        .status,
    ).toBe(201);
    await live('POST', `/v1/sdk/customers/${customer}/credits`, { kind: 'grant', amount: 20 });
    expect(
      (await live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan })).body.status,
    ).toBe('activated');
    const setting = (
      await live('PUT', `/v1/sdk/customers/${customer}/auto-top-up`, { productRef: product, threshold: 10 })
    ).body;
    const auth = { providerId: provider.id, environment: 'live' as const };

    const from = mock.requests.length;
    const draws = await Promise.all(
      Array.from({ length: 12 }, () =>
        live('POST', `/v1/sdk/customers/${customer}/credits`, { kind: 'debit', amount: 1 }),
      ),
    );
    expect(draws.every((d) => d.status === 201)).toBe(true);
    await Promise.all(
      Array.from({ length: 12 }, () => harness.controlPlane.care.autoTopUps.check(auth, customer)),
    );
    await harness.pool.query('SELECT 1 FROM credit_auto_topups WHERE customer_id = $1 FOR UPDATE', [
      customer,
    ]);

    const charges = mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents');
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({
      status: 200,
      idempotencyKey: `charge:${customer}:auto_topup:${setting.id}:1`,
      params: {
        amount: '500',
        currency: 'usd',
        confirm: 'true',
        off_session: 'true',
        payment_method: 'pm_card_visa',
        'metadata[customer]': customer,
        'metadata[reason]': 'topup',
      },
    });
    expect((await live('GET', `/v1/sdk/customers/${customer}/balance`)).body.credits).toBe(20 - 12 + 50);
    const { rows } = await harness.pool.query<{ processor: string; status: string; amount: number }>(
      "SELECT processor, status, amount FROM payments WHERE customer_id = $1 AND reason = 'topup'",
      [customer],
    );
    expect(rows).toEqual([{ processor: 'stripe', status: 'succeeded', amount: 500 }]);

    // Stripe refuses the card from now on: the next crossing is a failed attempt, nothing credited.
    mock.payments('refused');
    await live('POST', `/v1/sdk/customers/${customer}/credits`, { kind: 'debit', amount: 50 }); // 8 left
    const outcome = await harness.controlPlane.care.autoTopUps.check(auth, customer);
    await harness.pool.query('SELECT 1 FROM credit_auto_topups WHERE customer_id = $1 FOR UPDATE', [
      customer,
    ]);
    const after = (await live('GET', `/v1/sdk/customers/${customer}/auto-top-up`)).body as Json;
    expect(['failed', 'none']).toContain(outcome.kind);
    expect(after).toMatchObject({ status: 'active', failures: 1 });
    expect(after.lastFailure).toEqual(expect.any(String));
    expect((await live('GET', `/v1/sdk/customers/${customer}/balance`)).body.credits).toBe(8);
    const { rows: events } = await harness.pool.query<{ type: string }>(
      "SELECT type FROM outbox_events WHERE provider_id = $1 AND environment = 'live' AND type LIKE 'credits.auto_topup%' ORDER BY created_at, id",
      [provider.id],
    );
    expect(events.map((e) => e.type)).toEqual(['credits.auto_topup_succeeded', 'credits.auto_topup_failed']);
  });
});
