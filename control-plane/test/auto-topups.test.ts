import { callRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { creditsProduct } from '../../test/helpers/credit-plans';
import { MovableClock } from '../src/clock';

/**
 * Auto top-up (issue 64) on real PostgreSQL with the sandbox processor: concurrent draws across
 * the threshold make one top-up (one charge, one credit movement, one event); a card that fails
 * is retried after its hold and stopped after three failures, each with its event; bad input is
 * refused with its code.
 */
const clock = new MovableClock(new Date('2026-07-01T09:00:00.000Z'));
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

/** A provider selling credits: a pre-paid plan of 1 credit a call, packs of 50 credits for $5. */
async function seller(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const { product, plan } = await creditsProduct(api);
  return {
    api,
    product,
    plan,
    auth: { providerId: provider.id, environment: 'sandbox' as const },
  };
}

/** A customer on the credits plan with `credits` granted and `card` as the default card. */
async function customer(s: Awaited<ReturnType<typeof seller>>, ref: string, card: string, credits: number) {
  const id = (await s.api('POST', '/v1/sdk/customers', { externalRef: ref })).body.id as string;
  const attached = await s.api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
    card: { number: card, expMonth: 12, expYear: 2035, cvc: '123' },
  });
  expect(attached.status).toBe(201);
  if (credits > 0)
    expect(
      (await s.api('POST', `/v1/sdk/customers/${ref}/credits`, { kind: 'grant', amount: credits })).status,
    ).toBe(201);
  const activated = await s.api('POST', '/v1/sdk/activate', { customerRef: ref, planRef: s.plan });
  expect(activated.body.status).toBe('activated');
  return id;
}

const events = async (s: Awaited<ReturnType<typeof seller>>, type: string) =>
  ((await s.api('GET', `/v1/events?type=${type}&limit=100`)).body.data as Json[]).filter(
    (e) => e.type === type,
  );

/**
 * `calls` admitted calls of one credit each, stored as the proxies record them: usage records
 * carrying the credits each spent, which settlements (scheduler passes, balance reads) debit.
 */
async function recordCalls(s: Awaited<ReturnType<typeof seller>>, customerId: string, calls: number) {
  const meter = {
    providerId: s.auth.providerId,
    environment: 'sandbox' as const,
    meterRef: (await s.api('GET', '/v1/ui/meters/requests')).body.id as string,
    meterName: 'requests',
  };
  await harness.store.store.insert(
    Array.from({ length: calls }, () =>
      callRecord(meter, customerId, clock.now().toISOString(), {
        outcome: 'success',
        admitted: true,
        credits: 1,
        productId: s.product,
        planId: s.plan,
        tool: 'search',
      }),
    ),
  );
}

describe('auto top-up', () => {
  it('tops up once when twenty concurrent draws cross the threshold', async () => {
    const s = await seller('Auto top-up');
    const id = await customer(s, 'ada', '4242424242424242', 20);
    const set = await s.api('PUT', '/v1/sdk/customers/ada/auto-top-up', {
      productRef: s.product,
      threshold: 10,
      packs: 2,
    });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({
      customerRef: id,
      threshold: 10,
      packs: 2,
      status: 'active',
      failures: 0,
    });

    // Twenty draws of one credit at once, each checking the threshold after it, and twenty
    // more checks at once: the balance crosses 10 once, so one top-up of 2 packs.
    const draws = await Promise.all(
      Array.from({ length: 20 }, () =>
        s.api('POST', '/v1/sdk/customers/ada/credits', { kind: 'debit', amount: 1 }),
      ),
    );
    expect(draws.map((d) => d.status)).toEqual(Array.from({ length: 20 }, () => 201));
    const checks = await Promise.all(
      Array.from({ length: 20 }, () => harness.controlPlane.care.autoTopUps.check(s.auth, id)),
    );
    await harness.controlPlane.scheduler.runDue();
    // The checks the draws started in the background have finished once the setting is free.
    await harness.pool.query('SELECT 1 FROM credit_auto_topups WHERE customer_id = $1 FOR UPDATE', [id]);
    expect(checks.filter((c) => c.kind === 'succeeded').length).toBeLessThanOrEqual(1);

    const ledger = (await s.api('GET', '/v1/sdk/customers/ada/credits?limit=100')).body.data as Json[];
    const topUps = ledger.filter((m) => m.kind === 'top_up');
    expect(topUps.map((m) => [m.amount, m.reason])).toEqual([[100, 'auto_top_up']]);
    expect((await s.api('GET', '/v1/sdk/customers/ada/balance')).body.credits).toBe(100);
    const { rows: payments } = await harness.pool.query<{ amount: number; status: string; currency: string }>(
      "SELECT amount, status, currency FROM payments WHERE customer_id = $1 AND reason = 'topup'",
      [id],
    );
    expect(payments).toEqual([{ amount: 1000, status: 'succeeded', currency: 'usd' }]);
    const succeeded = await events(s, 'credits.auto_topup_succeeded');
    expect(succeeded).toHaveLength(1);
    expect(succeeded[0]?.data.object).toMatchObject({
      customer: id,
      credits: 100,
      amount: 1000,
      threshold: 10,
      attempt: 1,
    });
    expect(await events(s, 'credits.auto_topup_failed')).toHaveLength(0);
  });

  it('tops up once when calls recorded by many proxies are debited across the threshold', async () => {
    const s = await seller('Proxied draws');
    const id = await customer(s, 'eve', '4242424242424242', 20);
    await s.api('PUT', '/v1/sdk/customers/eve/auto-top-up', { productRef: s.product, threshold: 10 });
    // Fifteen calls of one credit each, as twenty proxies record them: usage records carrying
    // the credits each admitted call spent, settled by every scheduler pass and balance read.
    await recordCalls(s, id, 15);
    await Promise.all([
      harness.controlPlane.scheduler.runDue(),
      ...Array.from({ length: 10 }, () => s.api('GET', '/v1/sdk/customers/eve/balance')),
      ...Array.from({ length: 10 }, () => harness.controlPlane.care.autoTopUps.check(s.auth, id)),
    ]);
    await harness.controlPlane.scheduler.runDue();
    await harness.pool.query('SELECT 1 FROM credit_auto_topups WHERE customer_id = $1 FOR UPDATE', [id]);
    const ledger = (await s.api('GET', '/v1/sdk/customers/eve/credits?limit=100')).body.data as Json[];
    expect(ledger.filter((m) => m.kind === 'usage').reduce((n, m) => n + m.amount, 0)).toBe(-15);
    expect(ledger.filter((m) => m.kind === 'top_up').map((m) => m.amount)).toEqual([50]);
    expect((await s.api('GET', '/v1/sdk/customers/eve/balance')).body.credits).toBe(20 - 15 + 50);
  });

  it('never deadlocks: usage settled by balance reads beside grants and top-up checks', async () => {
    const s = await seller('Busy balance');
    const id = await customer(s, 'fay', '4242424242424242', 100);
    await s.api('PUT', '/v1/sdk/customers/fay/auto-top-up', { productRef: s.product, threshold: 10 });
    // Round after round, calls recorded, then at once: balance reads (each settles the usage
    // in a transaction of its own), grants and top-up checks (each locks the customer, settles
    // the usage and moves the balance). A settlement that locked the balance before the
    // customer deadlocked with the others (its movement's reference to the customer waits for
    // the customer's lock, held by a grant waiting for the balance); PostgreSQL then aborts one
    // of the two, a grant answered 500 or a check rejected.
    const rounds = 12;
    for (let round = 0; round < rounds; round++) {
      await recordCalls(s, id, 3);
      const answers = await Promise.allSettled([
        ...Array.from({ length: 4 }, () => s.api('GET', '/v1/sdk/customers/fay/balance')),
        ...Array.from({ length: 4 }, () =>
          s.api('POST', '/v1/sdk/customers/fay/credits', { kind: 'grant', amount: 1 }),
        ),
        ...Array.from({ length: 4 }, () => harness.controlPlane.care.autoTopUps.check(s.auth, id)),
      ]);
      expect(answers.filter((a) => a.status === 'rejected')).toEqual([]);
      const statuses = answers.map((a) =>
        a.status === 'fulfilled' && 'status' in a.value ? a.value.status : 0,
      );
      expect(statuses.slice(0, 8)).toEqual([200, 200, 200, 200, 201, 201, 201, 201]);
    }
    // Every call debited once, every grant made once, and no top-up needed (the balance stayed
    // above the threshold): the balance is exactly what the ledger says.
    const ledger = (await s.api('GET', '/v1/sdk/customers/fay/credits?limit=100')).body.data as Json[];
    const sum = (kind: string) => ledger.filter((m) => m.kind === kind).reduce((n, m) => n + m.amount, 0);
    expect(sum('usage')).toBe(-3 * rounds);
    expect(sum('grant')).toBe(100 + 4 * rounds);
    expect(sum('top_up')).toBe(0);
    expect((await s.api('GET', '/v1/sdk/customers/fay/balance')).body.credits).toBe(100 + rounds);
  });

  it('retries a failing card after its hold and stops after three failures in a row', async () => {
    const s = await seller('Failing card');
    // One credit to activate the plan with (a credit-paid plan needs one call's worth), then spent.
    const id = await customer(s, 'bob', '4000000000000341', 1);
    expect((await s.api('POST', '/v1/sdk/customers/bob/credits', { kind: 'debit', amount: 1 })).status).toBe(
      201,
    );
    await s.api('PUT', '/v1/sdk/customers/bob/auto-top-up', { productRef: s.product, threshold: 10 });
    // The balance (0) is under the threshold: the first attempt is made at once, and fails.
    const first = await harness.controlPlane.care.autoTopUps.check(s.auth, id);
    const setting = async () => (await s.api('GET', '/v1/sdk/customers/bob/auto-top-up')).body;
    expect(['failed', 'none']).toContain(first.kind);
    expect(await setting()).toMatchObject({ status: 'active', failures: 1, lastFailure: 'card_declined' });
    // Held back for an hour, then tried again; six hours more, the third failure stops it.
    expect(await harness.controlPlane.care.autoTopUps.check(s.auth, id)).toEqual({ kind: 'none' });
    clock.advance(60 * 60_000);
    expect(await harness.controlPlane.care.autoTopUps.check(s.auth, id)).toEqual({
      kind: 'failed',
      reason: 'card_declined',
      stopped: false,
    });
    clock.advance(6 * 60 * 60_000);
    expect(await harness.controlPlane.care.autoTopUps.check(s.auth, id)).toEqual({
      kind: 'failed',
      reason: 'card_declined',
      stopped: true,
    });
    clock.advance(24 * 60 * 60_000);
    expect(await harness.controlPlane.care.autoTopUps.check(s.auth, id)).toEqual({ kind: 'none' });
    expect(await setting()).toMatchObject({ status: 'stopped', failures: 3, retryAt: null });
    const failed = await events(s, 'credits.auto_topup_failed');
    expect(failed.map((e) => [e.data.object.attempt, e.data.object.stopped])).toEqual([
      [3, true],
      [2, false],
      [1, false],
    ]);
    expect((await s.api('GET', '/v1/sdk/customers/bob/balance')).body.credits).toBe(0);
    // Set again, it is active with its failures forgotten.
    expect(
      (await s.api('PUT', '/v1/sdk/customers/bob/auto-top-up', { productRef: s.product, threshold: 5 })).body,
    ).toMatchObject({
      status: 'active',
      failures: 0,
      threshold: 5,
    });
  });

  it('fails without a plan that sells packs, and refuses bad input with its code', async () => {
    const s = await seller('No pack');
    const id = (await s.api('POST', '/v1/sdk/customers', { externalRef: 'cyd' })).body.id as string;
    await s.api('PUT', '/v1/sdk/customers/cyd/auto-top-up', { productRef: s.product, threshold: 1 });
    await harness.controlPlane.care.autoTopUps.check(s.auth, id);
    expect((await s.api('GET', '/v1/sdk/customers/cyd/auto-top-up')).body).toMatchObject({
      failures: 1,
      lastFailure: 'no_plan',
    });
    const refused = async (body: unknown, ref = 'cyd') =>
      s.api('PUT', `/v1/sdk/customers/${ref}/auto-top-up`, body);
    for (const body of [
      { productRef: s.product, threshold: -1 },
      { productRef: s.product, threshold: 1.5 },
      { productRef: s.product, threshold: 1e13 },
      { productRef: s.product, threshold: 1, packs: 0 },
      { productRef: s.product, threshold: 1, packs: 101 },
      { productRef: s.product },
      { productRef: s.product, threshold: 1, extra: true },
    ])
      expect((await refused(body)).body.code, JSON.stringify(body)).toBe('validation_failed');
    expect((await refused({ productRef: 'prd_nope', threshold: 1 })).body.code).toBe('product_not_found');
    // Another provider's customer is not found here.
    const other = await seller('Elsewhere');
    await other.api('POST', '/v1/sdk/customers', { externalRef: 'dan' });
    expect((await refused({ productRef: s.product, threshold: 1 }, 'dan')).body.code).toBe(
      'customer_not_found',
    );
    expect((await s.api('DELETE', '/v1/sdk/customers/cyd/auto-top-up')).body).toEqual({
      customerRef: id,
      deleted: true,
    });
    const gone = await s.api('GET', '/v1/sdk/customers/cyd/auto-top-up');
    expect([gone.status, gone.body.code]).toEqual([404, 'auto_top_up_not_found']);
  });

  it('charges a deleted customer nothing: its setting goes with it, and a check meeting a deletion stops', async () => {
    const s = await seller('Leaving customers');
    const autoTopUp = { productRef: s.product, threshold: 10, packs: 2 };
    const paymentsOf = async (id: string) =>
      (await harness.pool.query('SELECT id FROM payments WHERE customer_id = $1', [id])).rows.length;

    // Deleted through the API: the setting is deleted in the same transaction.
    const gone = await customer(s, 'gone', '4242424242424242', 20);
    expect((await s.api('PUT', '/v1/sdk/customers/gone/auto-top-up', autoTopUp)).status).toBe(200);
    const paidBefore = await paymentsOf(gone);
    expect((await s.api('DELETE', '/v1/sdk/customers/gone')).status).toBe(200);
    const { rows: settings } = await harness.pool.query(
      'SELECT id FROM credit_auto_topups WHERE customer_id = $1',
      [gone],
    );
    expect(settings).toEqual([]);

    // Deleted after the sweep read the setting (the row marked as the deletion marks it, the
    // setting left): the check finds the deletion under the customer's lock.
    const raced = await customer(s, 'raced', '4242424242424242', 20);
    expect((await s.api('PUT', '/v1/sdk/customers/raced/auto-top-up', autoTopUp)).status).toBe(200);
    const racedBefore = await paymentsOf(raced);
    await harness.pool.query("UPDATE customers SET status = 'deleted' WHERE id = $1", [raced]);

    // Calls admitted before the deletion, recorded after it, take both balances under the threshold.
    await recordCalls(s, gone, 15);
    await recordCalls(s, raced, 15);
    expect(await harness.controlPlane.care.autoTopUps.check(s.auth, gone)).toEqual({ kind: 'none' });
    expect(await harness.controlPlane.care.autoTopUps.check(s.auth, raced)).toEqual({ kind: 'none' });
    await harness.controlPlane.scheduler.runDue();
    expect(await paymentsOf(gone)).toBe(paidBefore);
    expect(await paymentsOf(raced)).toBe(racedBefore);
  });
});
