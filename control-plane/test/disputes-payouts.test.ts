import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Disputes and payouts in the sandbox: a dispute opened by the test card and by the sandbox
 * endpoint, evidence, won and lost (money withdrawn and returned in the ledger), closes fired at
 * once; daily payouts of the balance, a failed payout whose money returns, and payouts of one
 * balance requested at once. Real PostgreSQL; the events and ledger are read back.
 */
const DAY = 86_400_000;
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    payouts: { schedule: 'daily', delayDays: 2 },
  });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

async function seller(name: string) {
  const { sandboxKey, liveKey, provider } = await harness.controlPlane.providers.create({
    displayName: name,
  });
  const as = (key: string) => async (method: 'GET' | 'POST', url: string, body?: unknown) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
  const api = as(sandboxKey);
  const product = (await api('POST', '/v1/ui/products', { name: `${name} API` })).body;
  const plan = (
    await api('POST', `/v1/ui/products/${product.id}/plans`, { name: 'Pro', type: 'one-time', price: 1000 })
  ).body;
  /** A customer who paid the plan with `card`: the payment's transaction reference. */
  const buy = async (card: string) => {
    const customer = (await api('POST', '/v1/sdk/customers', {})).body.reference;
    await api('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
      card: { number: card, expMonth: 12, expYear: 2035, cvc: '123' },
    });
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id })).body.status,
    ).toBe('activated');
    const { rows } = await harness.pool.query(
      'SELECT id, transaction_reference FROM payments WHERE customer_id = $1',
      [customer],
    );
    return { customer, payment: rows[0].id as string, txn: rows[0].transaction_reference as string };
  };
  const events = async (prefix: string) => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1 AND type LIKE $2 ORDER BY created_at, id`,
      [provider.id, `${prefix}%`],
    );
    return rows.map((r) => ({ type: r.type, object: r.payload.data.object }));
  };
  const balance = async () => (await api('GET', '/v1/ui/financials/cashflow?period=this-month')).body.current;
  return { api, live: as(liveKey), buy, events, balance, provider };
}

describe('disputes', () => {
  it('the disputing test card opens one at once; evidence, then a won close fired many times returns the money once', async () => {
    const s = await seller('Disputed');
    const { payment, txn } = await s.buy(SANDBOX_CARDS.disputed);
    const opened = await s.events('payment.');
    expect(opened.map((e) => e.type)).toEqual(['payment.succeeded', 'payment.disputed']);
    const dispute = opened[1]?.object;
    expect(dispute).toMatchObject({
      amount: 1000,
      currency: 'usd',
      reason: 'fraudulent',
      status: 'needs_response',
      payment,
    });
    expect(dispute.processor_charge).toMatch(/^pi_sandbox_/);
    expect(dispute.processor_dispute).toMatch(/^dp_sandbox_/);
    // The money is withdrawn while the dispute is open.
    expect(await s.balance()).toMatchObject({ paymentsReceived: 1000, disputes: 1000, closingBalance: 0 });
    expect(
      (await s.api('GET', '/v1/ui/transactions')).body.data.map((t: Json) => [t.type, t.amount, t.source]),
    ).toEqual([
      ['payment', 1000, payment],
      ['dispute', -1000, dispute.id],
    ]);
    // Nothing is left to refund while it is disputed.
    expect(
      (await s.api('POST', '/v1/ui/transactions/refunds', { originalTransactionId: txn, refundAmount: 1 }))
        .body,
    ).toMatchObject({ code: 'refund_exceeds_payment', refundable: 0 });

    const answered = await s.api('POST', `/v1/ui/disputes/${dispute.id}/evidence`, {
      evidence: 'Signed terms, IP logs',
    });
    expect(answered.body).toMatchObject({ status: 'under_review', evidence: 'Signed terms, IP logs' });
    expect(
      (await s.api('POST', `/v1/ui/disputes/${dispute.id}/evidence`, { evidence: 'more' })).body.code,
    ).toBe('dispute_closed');

    const closes = await Promise.all(
      Array.from({ length: 8 }, () =>
        s.api('POST', `/v1/sdk/sandbox/disputes/${dispute.id}/close`, { outcome: 'won' }),
      ),
    );
    expect(closes.map((c) => c.status).sort()).toEqual([200, 409, 409, 409, 409, 409, 409, 409]);
    expect(closes.find((c) => c.status === 409)?.body.code).toBe('dispute_closed');
    const closed = (await s.events('payment.dispute_closed')).map((e) => e.object);
    expect(closed).toHaveLength(1);
    expect(closed[0]).toMatchObject({ id: dispute.id, status: 'won', amount: 1000 });
    expect(await s.balance()).toMatchObject({ disputes: 0, closingBalance: 1000 });
    expect((await s.api('GET', `/v1/ui/disputes/${dispute.id}`)).body).toMatchObject({ status: 'won' });
  });

  it('the sandbox endpoint disputes part of a payment; a lost dispute keeps the money withdrawn', async () => {
    const s = await seller('Chargeback');
    const { txn, payment } = await s.buy(SANDBOX_CARDS.succeeds);
    const opened = await s.api('POST', '/v1/sdk/sandbox/disputes', {
      transactionId: txn,
      amount: 300,
      reason: 'product_not_received',
    });
    expect(opened.status).toBe(201);
    expect(opened.body).toMatchObject({ paymentId: payment, amount: 300, status: 'needs_response' });
    expect((await s.api('POST', '/v1/sdk/sandbox/disputes', { transactionId: txn })).body.code).toBe(
      'dispute_exists',
    );
    expect(
      (await s.api('POST', '/v1/ui/transactions/refunds', { originalTransactionId: txn })).body,
    ).toMatchObject({ refundAmount: 700 });
    expect(
      (await s.api('POST', `/v1/sdk/sandbox/disputes/${opened.body.id}/close`, { outcome: 'lost' })).body
        .status,
    ).toBe('lost');
    // After a refund of 700 and a lost dispute of 300, nothing is left to dispute.
    expect((await s.api('POST', '/v1/sdk/sandbox/disputes', { transactionId: txn })).body.code).toBe(
      'dispute_exceeds_payment',
    );
    const pnl = (await s.api('GET', '/v1/ui/financials/pnl?period=this-month')).body.current;
    expect(pnl).toMatchObject({ grossRevenue: 1000, refunds: 700, disputes: 300, netRevenue: 0 });
    expect(await s.balance()).toMatchObject({ closingBalance: 0 });
    expect((await s.api('GET', '/v1/ui/disputes?status=lost')).body.data).toHaveLength(1);

    // Sandbox only, and checked: a live key does not see these routes; bad input is a 4xx.
    expect((await s.live('POST', '/v1/sdk/sandbox/disputes', { transactionId: txn })).body.code).toBe(
      'sandbox_only',
    );
    expect((await s.api('POST', '/v1/sdk/sandbox/disputes', { transactionId: 'txn_nope' })).status).toBe(404);
    expect((await s.api('POST', '/v1/sdk/sandbox/disputes', { transactionId: txn, amount: -5 })).status).toBe(
      400,
    );
    expect(
      (await s.api('POST', `/v1/sdk/sandbox/disputes/${opened.body.id}/close`, { outcome: 'maybe' })).status,
    ).toBe(400);
    expect((await s.api('GET', '/v1/ui/disputes/dp_missing')).body.code).toBe('dispute_not_found');
  });
});

describe('money moves fired at once', () => {
  it('one payment disputed six times at once opens one dispute and withdraws its money once', async () => {
    const s = await seller('Racing disputes');
    const { txn } = await s.buy(SANDBOX_CARDS.succeeds);
    const opened = await Promise.all(
      Array.from({ length: 6 }, () => s.api('POST', '/v1/sdk/sandbox/disputes', { transactionId: txn })),
    );
    expect(opened.map((o) => o.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect((await s.events('payment.disputed')).length).toBe(1);
    expect(await s.balance()).toMatchObject({ disputes: 1000, closingBalance: 0 });
  });
});

describe('payouts', () => {
  it('pays the balance out once a day, and it arrives after the delay', async () => {
    clock.set(new Date('2026-06-01T09:00:00.000Z'));
    const s = await seller('Payee');
    await s.buy(SANDBOX_CARDS.succeeds);
    await s.buy(SANDBOX_CARDS.succeeds);
    await harness.controlPlane.scheduler.runDue();
    await harness.controlPlane.scheduler.runDue();
    const made = (await s.api('GET', '/v1/ui/payouts')).body.data;
    expect(made).toEqual([
      expect.objectContaining({
        amount: 2000,
        currency: 'usd',
        status: 'pending',
        automatic: true,
        arrivalDate: '2026-06-03T09:00:00.000Z',
      }),
    ]);
    expect(await s.balance()).toMatchObject({ paymentsReceived: 2000, payouts: 2000, closingBalance: 0 });
    expect(await s.events('payout.')).toEqual([]);

    clock.set(new Date('2026-06-03T09:00:00.000Z'));
    await harness.controlPlane.scheduler.runDue();
    expect((await s.api('GET', `/v1/ui/payouts/${made[0].id}`)).body.status).toBe('paid');
    const paid = await s.events('payout.');
    expect(paid.map((e) => e.type)).toEqual(['payout.paid']);
    expect(paid[0]?.object).toMatchObject({
      id: made[0].id,
      amount: 2000,
      currency: 'usd',
      status: 'paid',
      arrival_date: Date.parse('2026-06-03T09:00:00Z') / 1000,
    });
    expect(paid[0]?.object.processor_payout).toMatch(/^po_sandbox_/);
  });

  it('a failed payout returns its money, and one balance asked for many times at once is paid out once', async () => {
    clock.set(new Date('2026-06-10T09:00:00.000Z'));
    const s = await seller('Unlucky');
    await s.buy(SANDBOX_CARDS.succeeds);
    const failing = await s.api('POST', '/v1/sdk/sandbox/payouts', {
      amount: 600,
      failure: 'account_closed',
    });
    expect(failing.status).toBe(201);
    expect(failing.body).toMatchObject({ amount: 600, status: 'pending', automatic: false });
    expect(await s.balance()).toMatchObject({ closingBalance: 400 });

    const asks = await Promise.all(
      Array.from({ length: 6 }, () => s.api('POST', '/v1/sdk/sandbox/payouts', {})),
    );
    expect(asks.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(asks.find((a) => a.status === 201)?.body.amount).toBe(400);
    expect(asks.find((a) => a.status === 409)?.body).toMatchObject({
      code: 'insufficient_balance',
      balance: 0,
    });

    clock.advance(2 * DAY);
    await harness.controlPlane.scheduler.runDue();
    const settled = await s.events('payout.');
    expect(settled.map((e) => [e.type, e.object.amount])).toEqual([
      ['payout.failed', 600],
      ['payout.paid', 400],
    ]);
    expect(settled[0]?.object).toMatchObject({ status: 'failed', failure_reason: 'account_closed' });
    // The failed 600 is back in the balance (and the day's automatic payout then takes it).
    const types = (await s.api('GET', '/v1/ui/transactions?limit=100')).body.data.map((t: Json) => [
      t.type,
      t.net,
    ]);
    expect(types.slice(0, 4)).toEqual([
      ['payment', 1000],
      ['payout', -600],
      ['payout', -400],
      ['payout_reversal', 600],
    ]);
    expect((await s.api('POST', '/v1/sdk/sandbox/payouts', { amount: 10_000_000 })).body.code).toBe(
      'insufficient_balance',
    );
    expect((await s.live('POST', '/v1/sdk/sandbox/payouts', {})).body.code).toBe('sandbox_only');
  });

  it('a balance whose payout fails holds up no other, and is paid out on a later pass', async () => {
    clock.set(new Date('2026-06-20T09:00:00.000Z'));
    const a = await seller('Payee A');
    const b = await seller('Payee B');
    await a.buy(SANDBOX_CARDS.succeeds);
    await b.buy(SANDBOX_CARDS.succeeds);
    // The first of the two in the pass's order (balances go by provider id) fails in the
    // database: any payout row of its provider is refused.
    const [first, second] = [a, b].sort((x, y) => (x.provider.id < y.provider.id ? -1 : 1)) as [
      typeof a,
      typeof b,
    ];
    await harness.pool.query(`CREATE FUNCTION refuse_payout() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'payouts of this provider are refused'; END $$`);
    await harness.pool.query(
      `CREATE TRIGGER refuse_payout BEFORE INSERT ON payouts FOR EACH ROW
         WHEN (NEW.provider_id = '${first.provider.id}') EXECUTE FUNCTION refuse_payout()`,
    );
    try {
      await harness.controlPlane.scheduler.runDue();
      expect((await second.api('GET', '/v1/ui/payouts')).body.data).toEqual([
        expect.objectContaining({ amount: 1000, automatic: true }),
      ]);
      expect((await first.api('GET', '/v1/ui/payouts')).body.data).toEqual([]);
      expect(await first.balance()).toMatchObject({ closingBalance: 1000 });
    } finally {
      await harness.pool.query('DROP TRIGGER refuse_payout ON payouts');
      await harness.pool.query('DROP FUNCTION refuse_payout()');
    }
    // Later that day the failed balance is paid out, and the other once only.
    clock.set(new Date('2026-06-20T10:00:00.000Z'));
    await harness.controlPlane.scheduler.runDue();
    expect((await first.api('GET', '/v1/ui/payouts')).body.data).toEqual([
      expect.objectContaining({ amount: 1000, automatic: true }),
    ]);
    expect((await second.api('GET', '/v1/ui/payouts')).body.data).toHaveLength(1);
  });
});
