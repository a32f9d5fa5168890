import { entitlementKey } from '@mcp-meter/contracts/snapshots';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Credits drawn down by usage through the SDK limit check, on real PostgreSQL and ClickHouse
 * (chdb): each admitted call spends the plan's creditsPerUnit from a leased counter, settlement
 * debits the balance from the calls' records, and the paywall offers the plan's top-up.
 */
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

async function seller(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const product = (await api('POST', '/v1/ui/products', { name: `${name} tools` })).body;
  const events = async (customerRef: string) => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1
         AND (payload->'data'->'object'->>'customerId' = $2 OR payload->'data'->'object'->>'customer' = $2)
         AND (type LIKE 'customer.credit.%' OR type = 'usage.charged')
       ORDER BY created_at, id`,
      [provider.id, customerRef],
    );
    return rows.map((r) => ({ type: r.type, object: r.payload.data.object }));
  };
  return { api, product, provider, events };
}

describe('credits drawn down by usage', () => {
  it('spends creditsPerUnit per admitted call exactly under concurrency, debits once, and offers the top-up', async () => {
    const { api, product, provider, events } = await seller('Credits');
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Pay as you go',
        type: 'usage-based',
        billingModel: 'pre-paid',
        creditsPerUnit: 3,
        limit: 8,
        topUp: { credits: 30, amount: 500 },
      })
    ).body;
    expect(plan.topUp).toEqual({ credits: 30, amount: 500 });
    expect((await api('PATCH', '/v1/ui/settings', { lowBalanceThreshold: 10 })).status).toBeLessThan(300);
    const customer = (await api('POST', '/v1/sdk/customers', {})).body.reference as string;
    expect(
      (await api('POST', `/v1/sdk/customers/${customer}/credits`, { kind: 'grant', amount: 21 })).status,
    ).toBe(201);
    const activated = await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(activated.body.status).toBe('activated');

    // The proxy's entitlement carries the price in credits and every credit made available so far.
    const entitlement = async () =>
      JSON.parse(
        (await harness.snapshots.get(
          entitlementKey({
            providerId: provider.id,
            environment: 'sandbox',
            customerId: customer,
            productId: product.id,
          }),
        )) ?? '{}',
      );
    expect((await entitlement()).credits).toEqual({ perUnit: 3, funded: 21 });

    // 20 calls at once on 21 credits at 3 each: exactly 7 pass.
    const check = () =>
      api('POST', '/v1/sdk/limits', { customerRef: customer, productRef: product.id, consume: true });
    const answers = await Promise.all(Array.from({ length: 20 }, check));
    const admitted = answers.filter((a) => a.body.withinLimits === true);
    const refused = answers.filter((a) => a.body.withinLimits === false);
    expect(admitted).toHaveLength(7);
    expect(refused).toHaveLength(13);
    // Racing calls may see the plan's limit unit a refused call is about to give back, so a few
    // answers can say limit_reached; once the race is over the reason is the credits.
    for (const answer of refused) {
      expect(['credits_exhausted', 'limit_reached']).toContain(answer.body.reason);
      expect(answer.body).toMatchObject({ creditsPerUnit: 3, creditBalance: 0 });
    }
    const wall = await check();
    expect(wall.body).toMatchObject({ withinLimits: false, reason: 'credits_exhausted', creditBalance: 0 });
    // One top-up session for the plan's pack, shared by every refusal for want of credits.
    const sessions = new Set(
      [...refused, wall]
        .filter((a) => a.body.reason === 'credits_exhausted')
        .map((a) => a.body.checkoutSessionId),
    );
    expect(sessions.size).toBe(1);
    const session = (await api('GET', `/v1/sdk/checkout-sessions/${[...sessions][0]}`)).body;
    expect(session).toMatchObject({ amount: 500, status: 'active' });
    // Calls refused for want of credits gave their unit of the plan's limit back: 7 of 8 used.
    const read = await api('POST', '/v1/sdk/limits', {
      customerRef: customer,
      productRef: product.id,
      consume: false,
    });
    expect(read.body).toMatchObject({
      withinLimits: false,
      reason: 'credits_exhausted',
      used: 7,
      remaining: 1,
      creditBalance: 0,
    });

    // Reading the balance debits the recorded calls first: one usage movement for all 7.
    await harness.settled();
    const balance = await api('GET', `/v1/sdk/customers/${customer}/balance`);
    expect(balance.body.credits).toBe(0);
    const ledger = (await api('GET', `/v1/sdk/customers/${customer}/credits?limit=100`)).body.data as Json[];
    expect(ledger.map((m) => [m.kind, m.amount, m.balance])).toEqual([
      ['usage', -21, 0],
      ['grant', 21, 21],
    ]);
    expect(ledger[0]?.reason).toBe('7 calls');
    // Scheduler passes and more reads debit nothing more.
    await harness.controlPlane.scheduler.runDue();
    await Promise.all([
      api('GET', `/v1/sdk/customers/${customer}/balance`),
      api('GET', `/v1/sdk/customers/${customer}/balance`),
      harness.controlPlane.scheduler.runDue(),
    ]);
    expect((await api('GET', `/v1/sdk/customers/${customer}/credits?limit=100`)).body.data).toHaveLength(2);

    // Aggregated events: one debit for the 7 calls, crossing the threshold and reaching zero.
    const seen = await events(customer);
    expect(seen.map((e) => e.type)).toEqual([
      'customer.credit.granted',
      'customer.credit.debited',
      'customer.credit.low_balance',
      'customer.credit.exhausted',
      'usage.charged',
    ]);
    expect(seen[1]?.object).toMatchObject({ customerId: customer, credits: 0, amount: -21, calls: 7 });
    expect(seen[4]?.object).toMatchObject({ customer, quantity: 7, credits: 21, balance: 0 });

    // The customer pays the top-up on the hosted page: the entitlement now funds 51 credits.
    const paid = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/checkout/${session.id}/pay`,
      payload: { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
    });
    expect(paid.statusCode).toBe(200);
    expect((await entitlement()).credits).toEqual({ perUnit: 3, funded: 51 });
    // Only the plan's limit holds the customer back now: one more call, then limit_reached.
    const more = await Promise.all(Array.from({ length: 4 }, check));
    expect(more.filter((a) => a.body.withinLimits === true)).toHaveLength(1);
    expect(more.filter((a) => a.body.reason === 'limit_reached')).toHaveLength(3);
    await harness.settled();
    expect((await api('GET', `/v1/sdk/customers/${customer}/balance`)).body.credits).toBe(27);
  });

  it('closes each period with a statement of the calls and credits spent, at 0', async () => {
    const { api, product } = await seller('Statements');
    const clock = (await api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-06-01T00:00:00Z' })).body;
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Credits monthly',
        type: 'usage-based',
        billingModel: 'pre-paid',
        billingCycle: 'monthly',
        creditsPerUnit: 3,
      })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', { testClock: clock.id })).body
      .reference as string;
    await api('POST', `/v1/sdk/customers/${customer}/credits`, { kind: 'grant', amount: 30 });
    const activated = await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(activated.body.status).toBe('activated');
    const purchase = activated.body.purchaseRef as string;
    const call = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const answer = await api('POST', '/v1/sdk/limits', {
          customerRef: customer,
          productRef: product.id,
          consume: true,
        });
        expect(answer.body).toMatchObject({ withinLimits: true });
      }
      await harness.settled();
    };
    const statements = async () =>
      (await api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}`)).body.data as Json[];
    const advance = (frozenTime: string) =>
      api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, { frozenTime });

    // June: 4 calls at 3 credits. Two minutes after it ends the statement is a draft.
    await call(4);
    await advance('2026-07-01T00:02:00Z');
    expect(await statements()).toMatchObject([{ status: 'draft', total: 0 }]);
    await advance('2026-07-02T00:00:00Z');
    const [june] = await statements();
    expect(june).toMatchObject({
      status: 'paid',
      billingReason: 'renewal',
      total: 0,
      amountPaid: 0,
      paymentId: null,
      lines: [
        {
          kind: 'credits_applied',
          description: '4 calls paid from the credit balance: 12 credits',
          quantity: 4,
          credits: 12,
          amount: 0,
          period: { start: '2026-06-01T00:00:00.000Z', end: '2026-07-01T00:00:00.000Z' },
        },
      ],
    });
    expect((await api('GET', `/v1/sdk/purchases/${purchase}`)).body.periodStart).toBe(
      '2026-07-01T00:00:00.000Z',
    );
    expect((await api('GET', `/v1/sdk/customers/${customer}/balance`)).body.credits).toBe(18);

    // July: one call, then cancelled at once on July 10; the part period gets its own statement.
    await call(1);
    await advance('2026-07-10T00:00:00Z');
    const cancelled = await api('POST', `/v1/sdk/purchases/${purchase}/cancel`, { atPeriodEnd: false });
    expect(cancelled.status).toBe(200);
    await advance('2026-07-11T00:00:00Z');
    const last = (await statements())[1];
    expect(last).toMatchObject({
      status: 'paid',
      billingReason: 'final_usage',
      total: 0,
      lines: [
        {
          kind: 'credits_applied',
          quantity: 1,
          credits: 3,
          period: { start: '2026-07-01T00:00:00.000Z', end: '2026-07-10T00:00:00.000Z' },
        },
      ],
    });
  });

  it('refuses a top-up field on plans not paid from credits, naming it', async () => {
    const { api, product } = await seller('No top-up');
    const refused = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Monthly',
      type: 'recurring',
      price: 900,
      topUp: { credits: 10, amount: 100 },
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toContain('/topUp');
  });
});
