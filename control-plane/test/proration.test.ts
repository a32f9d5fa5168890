import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { Ledger } from '../src/modules/ledger/service';
import { SANDBOX_CARDS, SandboxProcessor } from '../src/modules/payments/processor';

/**
 * Plan switches mid-period with the clock walked: the old plan's unused paid time is credited on
 * the new plan's first invoice, and what the invoice cannot absorb goes back to the card that
 * paid the old period. Usage a past-due purchase ran up before it ended is billed on a final
 * invoice. Every amount is worked by hand in the comments (March 2026 has 31 days).
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

const at = (iso: string) => clock.set(new Date(iso));
const run = () => harness.controlPlane.scheduler.runDue();

async function seller(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const product = (await api('POST', '/v1/ui/products', { name: `${name} tools` })).body;
  const plan = async (body: Json) => {
    const created = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      billingCycle: 'monthly',
      ...body,
    });
    expect(created.status).toBe(201);
    return created.body.id as string;
  };
  const customer = async (card: string = SANDBOX_CARDS.succeeds) => {
    const ref = (await api('POST', '/v1/sdk/customers', {})).body.reference as string;
    expect((await setCard(ref, card)).status).toBe(201);
    return ref;
  };
  const setCard = (ref: string, number: string) =>
    api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
      card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
    });
  const activate = (customerRef: string, planRef: string) =>
    api('POST', '/v1/sdk/activate', { customerRef, planRef });
  const invoices = async (purchaseRef: string) =>
    (await api('GET', `/v1/sdk/invoices?purchaseRef=${purchaseRef}&limit=100`)).body.data as Json[];
  const refunds = async (paymentId: string) =>
    (
      await harness.pool.query(
        'SELECT amount, status, source, reason FROM refunds WHERE payment_id = $1 ORDER BY created_at, id',
        [paymentId],
      )
    ).rows;
  const paymentsOf = async (purchaseRef: string) =>
    (
      await harness.pool.query(
        'SELECT id, amount, status, reason FROM payments WHERE purchase_id = $1 ORDER BY created_at, id',
        [purchaseRef],
      )
    ).rows;
  const eventTypes = async () =>
    (
      await harness.pool.query<{ type: string }>(
        'SELECT type FROM outbox_events WHERE provider_id = $1 ORDER BY created_at, id',
        [provider.id],
      )
    ).rows.map((r) => r.type);
  const use = async (customerRef: string, units: number) => {
    const recorded = await api('POST', '/v1/sdk/usages', { customerRef, productRef: product.id, units });
    expect(recorded.status).toBe(202);
  };
  return {
    key: sandboxKey,
    api,
    plan,
    customer,
    setCard,
    activate,
    invoices,
    refunds,
    paymentsOf,
    eventTypes,
    use,
  };
}

/** On March 1, a customer on Pro (6000 a month), paid, and a Basic plan (3000, setup 500) to switch to. */
async function proCustomer(name: string) {
  at('2026-03-01T00:00:00.000Z');
  const s = await seller(name);
  const pro = await s.plan({ name: 'Pro', type: 'recurring', price: 6000 });
  const basic = await s.plan({ name: 'Basic', type: 'recurring', price: 3000, setupFee: 500 });
  const customer = await s.customer();
  const first = (await s.activate(customer, pro)).body.purchaseRef as string;
  const [paid] = await s.paymentsOf(first);
  return { s, pro, basic, customer, first, paid };
}

/** Sends `change` with the ledger failing after the processor refunded: its transaction rolls back. */
async function failPastRefund(change: () => Promise<{ status: number }>) {
  const failing = vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('commit lost'));
  try {
    expect((await change()).status).toBeGreaterThanOrEqual(500);
  } finally {
    failing.mockRestore();
  }
}

describe('a plan switch in the middle of a paid period', () => {
  it('credits the unused time of an upgrade on the new invoice, and the P&L earns each plan for its days', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Upgrader');
    const basic = await s.plan({ name: 'Basic', type: 'recurring', price: 3000 });
    const pro = await s.plan({ name: 'Pro', type: 'recurring', price: 6000 });
    const customer = await s.customer();
    const first = (await s.activate(customer, basic)).body.purchaseRef as string;

    // March 11: 10 of 31 days used. Unused: 3000 × 21/31 = 2032.26 → 2032.
    at('2026-03-11T00:00:00.000Z');
    const switched = await s.activate(customer, pro);
    expect(switched.body).toMatchObject({
      status: 'activated',
      proration: { credit: 2032, appliedToInvoice: 2032, refunded: 0, refundId: null },
    });
    const second = switched.body.purchaseRef as string;
    const [invoice] = await s.invoices(second);
    expect(invoice?.id).toBe(switched.body.proration.invoiceId);
    expect(invoice?.lines.map((l: Json) => [l.kind, l.description, l.amount])).toEqual([
      ['base', 'Pro (2026-03-11 – 2026-04-11)', 6000],
      ['proration', 'Unused time on Basic (2026-03-11 – 2026-04-01)', -2032],
    ]);
    // 6000 − 2032 = 3968 charged.
    expect(invoice).toMatchObject({ total: 3968, amountPaid: 3968, status: 'paid' });
    expect((await s.paymentsOf(second)).map((p) => [p.amount, p.status])).toEqual([[3968, 'succeeded']]);
    expect((await s.api('GET', `/v1/sdk/purchases/${first}`)).body).toMatchObject({
      status: 'expired',
      endedAt: '2026-03-11T00:00:00.000Z',
    });

    // March is earned day by day: Basic 3000 for all of its period, less the credit over the
    // 21 unused days (fully by April 1), plus Pro 6000 × 21/31 = 4064.5 → 4064 (rounded down):
    // 3000 − 2032 + 4064 = 5032 recognised; Pro's other 10 days (1936) are deferred.
    at('2026-04-02T00:00:00.000Z');
    const pnl = await s.api('GET', '/v1/ui/financials/pnl?period=last-month');
    expect(pnl.status).toBe(200);
    expect(pnl.body.current).toMatchObject({
      grossRevenue: 3000 + 3968,
      refunds: 0,
      recognisedRevenue: 5032,
      deferredRevenue: 1936,
    });
  });

  it('refunds the credit a downgrade cannot use, once, however many times the switch is sent', async () => {
    const { s, basic, customer, first, paid } = await proCustomer('Downgrader');

    // March 5: 4 days used, 27 left. Unused: 6000 × 27/31 = 5225.81 → 5226. The new invoice's
    // charges are 3000 + 500 = 3500, so 3500 is applied and 1726 goes back to the Pro payment.
    at('2026-03-05T00:00:00.000Z');
    const answers = await Promise.all(Array.from({ length: 6 }, () => s.activate(customer, basic)));
    const activated = answers.filter((a) => a.body.status === 'activated');
    expect(activated).toHaveLength(1);
    expect(answers.filter((a) => a.body.status === 'already_active')).toHaveLength(5);
    expect(activated[0]?.body.proration).toMatchObject({
      credit: 5226,
      appliedToInvoice: 3500,
      refunded: 1726,
    });
    const second = activated[0]?.body.purchaseRef as string;
    const [invoice] = await s.invoices(second);
    expect(invoice?.lines.map((l: Json) => [l.kind, l.amount])).toEqual([
      ['base', 3000],
      ['setup_fee', 500],
      ['proration', -5226],
      ['proration_refund', 1726],
    ]);
    // Nothing is charged: the invoice is paid by the credit alone.
    expect(invoice).toMatchObject({ total: 0, status: 'paid', paymentId: null });
    expect(await s.paymentsOf(second)).toEqual([]);
    expect(await s.refunds(paid.id)).toEqual([
      {
        amount: 1726,
        status: 'pending',
        source: 'proration',
        reason: 'Unused time on Pro after a switch to Basic',
      },
    ]);

    // The scheduler settles the refund; the old purchase stays expired (a proration refund
    // revokes nothing), and the balance pays the customer back.
    await run();
    expect((await s.refunds(paid.id)).map((r) => r.status)).toEqual(['succeeded']);
    expect((await s.api('GET', `/v1/sdk/purchases/${first}`)).body.status).toBe('expired');
    const types = await s.eventTypes();
    expect(types.filter((t) => t.startsWith('payment.refund'))).toEqual([
      'payment.refund_pending',
      'payment.refunded',
    ]);
    expect(types.filter((t) => t === 'purchase.refunded')).toHaveLength(0);
    const refundTx = (await s.api('GET', '/v1/ui/transactions?type=refund&limit=10')).body.data;
    expect(refundTx.map((t: Json) => t.amount)).toEqual([-1726]);
  });

  it('refunds the unused time once when a switch that failed past the refund is sent again', async () => {
    const { s, basic, customer, first, paid } = await proCustomer('Retried downgrade');
    at('2026-03-05T00:00:00.000Z');
    const asked = vi.spyOn(SandboxProcessor.prototype, 'refund');
    // The processor refunds 1726 (as above); the switch's transaction fails after it.
    const failing = vi
      .spyOn(Ledger.prototype, 'recordRefund')
      .mockRejectedValueOnce(new Error('commit lost'));
    try {
      expect((await s.activate(customer, basic)).status).toBeGreaterThanOrEqual(500);
    } finally {
      failing.mockRestore();
    }
    expect(await s.refunds(paid.id)).toEqual([]);
    const retried = await s.activate(customer, basic);
    expect(retried.body).toMatchObject({ status: 'activated', proration: { refunded: 1726 } });
    // Asked twice under one key: the processor answers the retry with the first refund.
    const keys = asked.mock.calls.map(([r]) => r.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect((await s.refunds(paid.id)).map((r) => r.amount)).toEqual([1726]);
    asked.mockRestore();
    // A client's own Idempotency-Key never names the service's: one spelled like it is a refund
    // of its own.
    const asClient = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/ui/transactions/refunds',
      headers: { authorization: `Bearer ${s.key}`, 'idempotency-key': `proration:${first}:1726` },
      payload: { originalTransactionId: paid.id, refundAmount: 1726 },
    });
    expect(asClient.statusCode).toBe(202);
    expect((await s.refunds(paid.id)).map((r) => r.amount)).toEqual([1726, 1726]);
  });

  it('refunds once from the first attempt’s moment when a failed switch is sent again an hour later', async () => {
    const { s, basic, customer, paid } = await proCustomer('Late retry');
    at('2026-03-05T00:00:00.000Z');
    const asked = vi.spyOn(SandboxProcessor.prototype, 'refund');
    await failPastRefund(() => s.activate(customer, basic));
    expect(await s.refunds(paid.id)).toEqual([]);
    // An hour on, 647 of 744 hours are left: counted now, 6000 × 647/744 = 5217.74 → 5218 and a
    // refund of 1718 under another key, a second refund at the processor. Counted from the
    // failed attempt's moment, the preview and the switch are the first attempt's.
    at('2026-03-05T01:00:00.000Z');
    const preview = await s.api('POST', '/v1/sdk/activate/preview', {
      customerRef: customer,
      planRef: basic,
    });
    expect(preview.body).toMatchObject({ credit: 5226, refund: 1726, dueNow: 0 });
    // Sent four times at once: one switches, the others find it done.
    const retried = await Promise.all(Array.from({ length: 4 }, () => s.activate(customer, basic)));
    expect(retried.map((r) => r.body.status).sort()).toEqual([
      'activated',
      'already_active',
      'already_active',
      'already_active',
    ]);
    expect(retried.find((r) => r.body.status === 'activated')?.body).toMatchObject({
      proration: { credit: 5226, refunded: 1726 },
    });
    const keys = asked.mock.calls.map(([r]) => r.idempotencyKey);
    asked.mockRestore();
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect((await s.refunds(paid.id)).map((r) => r.amount)).toEqual([1726]);
  });

  it('refuses another ending of the purchase until the failed one is finished, within the hold', async () => {
    const { s, pro, basic, customer, first, paid } = await proCustomer('Changed mind');
    const mini = await s.plan({ name: 'Mini', type: 'recurring', price: 1000 });
    at('2026-03-05T00:00:00.000Z');
    await failPastRefund(() => s.activate(customer, basic));
    at('2026-03-05T00:30:00.000Z');
    // The customer holds 1726 of the unused time. A switch to Mini would refund 5226 − 1000 =
    // 4226, a cancellation now 5226 and one without a refund nothing: each is refused, the
    // preview too, and nothing is charged or ended.
    const refused = [
      await s.activate(customer, mini),
      await s.api('POST', '/v1/sdk/activate/preview', { customerRef: customer, planRef: mini }),
      await s.api('POST', `/v1/sdk/purchases/${first}/cancel`, { prorate: true }),
      await s.api('POST', `/v1/sdk/purchases/${first}/cancel`, {}),
    ];
    for (const answer of refused) {
      expect(answer.status).toBe(409);
      expect(answer.body).toMatchObject({
        code: 'early_end_unfinished',
        refunded: 1726,
        ending: 'a switch to Basic',
      });
    }
    expect((await s.api('GET', `/v1/sdk/purchases/${first}`)).body).toMatchObject({
      status: 'active',
      planRef: pro,
    });
    expect(await s.refunds(paid.id)).toEqual([]);
    // The failed switch sent again finishes it: one refund, and the purchase ended.
    expect((await s.activate(customer, basic)).body).toMatchObject({ proration: { refunded: 1726 } });
    expect((await s.refunds(paid.id)).map((r) => r.amount)).toEqual([1726]);
  });

  it('refunds once when a cancellation that failed past its refund is sent again two hours later', async () => {
    const { s, first, paid } = await proCustomer('Late cancel');
    at('2026-03-05T00:00:00.000Z');
    const cancel = () => s.api('POST', `/v1/sdk/purchases/${first}/cancel`, { prorate: true });
    await failPastRefund(cancel);
    // Counted now it would be 6000 × 646/744 = 5209.68 → 5210; from the failed attempt, 5226.
    at('2026-03-05T02:00:00.000Z');
    const retried = await cancel();
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'cancelled', refund: { amount: 5226 } });
    expect((await s.refunds(paid.id)).map((r) => r.amount)).toEqual([5226]);
  });

  it('lets a cancellation in a period renewed since the failed one go ahead, counted from now', async () => {
    const { s, first, paid } = await proCustomer('Renewed since');
    // March 31, 20:00: 4 of 744 hours left, 6000 × 4/744 = 32.26 → 32, refunded; the
    // cancellation's transaction fails after it.
    at('2026-03-31T20:00:00.000Z');
    const cancel = () => s.api('POST', `/v1/sdk/purchases/${first}/cancel`, { prorate: true });
    await failPastRefund(cancel);
    // The period renews on April 1 (paid: a new payment); six hours into it the cancellation is
    // sent again. The failed attempt's moment is in the old period: this one counts from now,
    // 6000 × 714/720 = 5950, refunded from April's payment.
    at('2026-04-01T00:00:01.000Z');
    await run();
    const [, april] = await s.paymentsOf(first);
    expect(april).toMatchObject({ amount: 6000, status: 'succeeded' });
    at('2026-04-01T06:00:00.000Z');
    const again = await cancel();
    expect(again.status).toBe(200);
    expect(again.body.refund.amount).toBe(5950);
    expect((await s.refunds(april.id)).map((r) => r.amount)).toEqual([5950]);
    expect(await s.refunds(paid.id)).toEqual([]);
  });

  it('lets any ending go ahead once the hold is over', async () => {
    const { s, customer, basic, first, paid } = await proCustomer('Past the hold');
    at('2026-03-05T00:00:00.000Z');
    await failPastRefund(() => s.activate(customer, basic));
    // 12 hours on, Stripe would soon forget the key: the cancellation counts from now (26.5 of
    // 31 days left: 6000 × 636/744 = 5129.03 → 5129), and the failed attempt's refund is left to
    // the daily reconciliation.
    at('2026-03-05T12:00:00.001Z');
    const cancelled = await s.api('POST', `/v1/sdk/purchases/${first}/cancel`, { prorate: true });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.refund.amount).toBe(5129);
    expect((await s.refunds(paid.id)).map((r) => r.amount)).toEqual([5129]);
  });

  it('refunds all of it on a switch to a free plan, never more than the payment still holds', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Leaver');
    const pro = await s.plan({ name: 'Pro', type: 'recurring', price: 6000 });
    const free = await s.plan({ name: 'Free', type: 'recurring', price: 0 });
    const a = await s.customer();
    const b = await s.customer();
    const proA = (await s.activate(a, pro)).body.purchaseRef as string;
    const proB = (await s.activate(b, pro)).body.purchaseRef as string;

    // B's provider has already refunded 5000 of the 6000.
    at('2026-03-02T00:00:00.000Z');
    const [paidB] = await s.paymentsOf(proB);
    expect(
      (
        await s.api('POST', '/v1/ui/transactions/refunds', {
          originalTransactionId: paidB.id,
          refundAmount: 5000,
        })
      ).status,
    ).toBe(202);

    // March 16: 15 days used, 16 left. Unused: 6000 × 16/31 = 3096.77 → 3097.
    at('2026-03-16T00:00:00.000Z');
    const toFreeA = await s.activate(a, free);
    expect(toFreeA.body.proration).toMatchObject({
      credit: 3097,
      appliedToInvoice: 0,
      refunded: 3097,
      invoiceId: null,
    });
    // B's payment holds only 1000 more: that is all the credit can be.
    const toFreeB = await s.activate(b, free);
    expect(toFreeB.body.proration).toMatchObject({ credit: 1000, appliedToInvoice: 0, refunded: 1000 });
    const [paidA] = await s.paymentsOf(proA);
    expect((await s.refunds(paidA.id)).map((r) => [r.amount, r.source])).toEqual([[3097, 'proration']]);
    expect((await s.refunds(paidB.id)).map((r) => [r.amount, r.source])).toEqual([
      [5000, 'request'],
      [1000, 'proration'],
    ]);
    // B's payment is now refunded in full, by a request and a proration: the old purchase had
    // ended with the switch, so the settlement revokes nothing.
    await run();
    expect((await s.api('GET', `/v1/sdk/purchases/${proB}`)).body.status).toBe('expired');
    expect((await s.eventTypes()).filter((t) => t === 'purchase.refunded')).toHaveLength(0);
  });

  it('credits a switch paid on the hosted checkout page, which says so', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Checkout switcher');
    const basic = await s.plan({ name: 'Basic', type: 'recurring', price: 3000 });
    const pro = await s.plan({ name: 'Pro', type: 'recurring', price: 6000 });
    const customer = await s.customer();
    expect((await s.activate(customer, basic)).body.status).toBe('activated');
    at('2026-03-11T00:00:00.000Z');
    const session = await s.api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: customer,
      planRef: pro,
      successUrl: 'https://shop.example/thanks',
    });
    expect(session.status).toBe(201);
    const page = await harness.controlPlane.app.inject({
      method: 'GET',
      url: `/checkout/${session.body.id}`,
    });
    expect(page.body).toContain('$60.00 due today');
    expect(page.body).toContain('Less the unused time of your Basic plan, worked out when you pay');
    const paid = await s.api(
      'POST',
      `/checkout/${session.body.id}/pay`,
      { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
      null,
    );
    expect(paid.status).toBe(200);
    const purchase = (await s.api('GET', `/v1/sdk/checkout-sessions/${session.body.id}`)).body.purchaseRef;
    const [invoice] = await s.invoices(purchase);
    // The same credit as an activation on March 11: 6000 − 2032.
    expect(invoice).toMatchObject({ total: 3968, status: 'paid' });
  });

  it('credits nothing for a trial, an unpaid past-due period or a one-time purchase', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Nothing owed');
    const trial = await s.plan({ name: 'Trial', type: 'recurring', price: 3000, trialDays: 14 });
    const once = await s.plan({ name: 'Once', type: 'one-time', price: 3000, billingCycle: undefined });
    const pro = await s.plan({ name: 'Pro', type: 'recurring', price: 6000 });
    const a = await s.customer();
    const b = await s.customer();
    expect((await s.activate(a, trial)).body.status).toBe('activated');
    expect((await s.activate(b, once)).body.status).toBe('activated');
    at('2026-03-05T00:00:00.000Z');
    const fromTrial = await s.activate(a, pro);
    const fromOnce = await s.activate(b, pro);
    for (const switched of [fromTrial, fromOnce]) {
      expect(switched.body.status).toBe('activated');
      expect(switched.body.proration).toBeUndefined();
      const [invoice] = await s.invoices(switched.body.purchaseRef);
      expect(invoice).toMatchObject({ total: 6000, status: 'paid' });
    }
  });
});

describe('a past-due purchase that ends', () => {
  it('bills the usage it ran up while dunning retried, when switched away or when dunning gives up', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Overdue');
    const metered = await s.plan({ name: 'Metered', type: 'hybrid', basePrice: 1000, price: 1 });
    const other = await s.plan({ name: 'Other', type: 'usage-based', price: 1 });
    const a = await s.customer();
    const b = await s.customer();
    const first = (await s.activate(a, metered)).body.purchaseRef as string;
    const second = (await s.activate(b, metered)).body.purchaseRef as string;
    at('2026-03-20T00:00:00.000Z');
    await s.use(a, 10);
    await s.use(b, 20);
    await harness.settled();
    expect((await s.setCard(a, SANDBOX_CARDS.failsLater)).status).toBe(201);
    expect((await s.setCard(b, SANDBOX_CARDS.failsLater)).status).toBe(201);

    // April 1: the renewal (March's usage in arrears + April's base) fails; both fall past due
    // and keep their access while dunning retries.
    at('2026-04-01T00:06:00.000Z');
    await run();
    for (const ref of [first, second])
      expect((await s.api('GET', `/v1/sdk/purchases/${ref}`)).body.status).toBe('past_due');
    at('2026-04-01T12:00:00.000Z');
    await s.use(a, 7);
    await s.use(b, 3);
    await harness.settled();

    // April 1, 18:00: A switches plans (with a working card). The unpaid period earns no credit;
    // the 7 calls since April 1 are billed on a final invoice once the lateness allowance passes.
    at('2026-04-01T18:00:00.000Z');
    expect((await s.setCard(a, SANDBOX_CARDS.succeeds)).status).toBe(201);
    const switched = await s.activate(a, other);
    expect(switched.body.status).toBe('activated');
    expect(switched.body.proration).toBeUndefined();
    at('2026-04-01T18:06:00.000Z');
    await run();
    const finalA = (await s.invoices(first)).map((i) => [
      i.billingReason,
      i.status,
      i.total,
      i.usage?.units ?? null,
    ]);
    expect(finalA).toEqual([
      ['first_payment', 'paid', 1000, null],
      // 10 calls at 1¢ + April's base 1000, unpaid: it stays open (the provider may void it).
      ['renewal', 'open', 1010, 10],
      ['final_usage', 'paid', 7, 7],
    ]);
    expect((await s.invoices(first))[2]?.usage).toMatchObject({
      periodStart: '2026-04-01T00:00:00.000Z',
      periodEnd: '2026-04-01T18:00:00.000Z',
    });

    // B's card never works: after the last retry (24 h + 72 h + 168 h) dunning gives up, and
    // the 3 calls used meanwhile are billed on a final invoice (which the card refuses too).
    for (const when of ['2026-04-02T00:07:00.000Z', '2026-04-05T00:08:00.000Z', '2026-04-12T00:09:00.000Z']) {
      at(when);
      await run();
    }
    expect((await s.api('GET', `/v1/sdk/purchases/${second}`)).body).toMatchObject({
      status: 'cancelled',
      endedAt: '2026-04-12T00:09:00.000Z',
    });
    at('2026-04-12T00:15:00.000Z');
    await run();
    const finalB = (await s.invoices(second)).map((i) => [
      i.billingReason,
      i.status,
      i.total,
      i.usage?.units ?? null,
    ]);
    expect(finalB).toEqual([
      ['first_payment', 'paid', 1000, null],
      ['renewal', 'uncollectible', 1020, 20],
      ['final_usage', 'open', 3, 3],
    ]);
    expect(await run()).toBe(0);
  });
});

describe('an unpaid final-usage invoice', () => {
  it('is retried on the dunning schedule, once per attempt across schedulers, until paid or given up', async () => {
    at('2026-05-01T00:00:00.000Z');
    const s = await seller('Final retries');
    const metered = await s.plan({ name: 'Metered', type: 'usage-based', price: 2 });
    const fixes = await s.customer();
    const never = await s.customer();
    const fixed = (await s.activate(fixes, metered)).body.purchaseRef as string;
    const lost = (await s.activate(never, metered)).body.purchaseRef as string;
    at('2026-05-03T00:00:00.000Z');
    await s.use(fixes, 4);
    await s.use(never, 6);
    await harness.settled();
    for (const ref of [fixes, never])
      expect((await s.setCard(ref, SANDBOX_CARDS.failsLater)).status).toBe(201);

    // May 10: both cancelled at once; their final invoices (8¢ and 12¢) fail at 00:06.
    at('2026-05-10T00:00:00.000Z');
    for (const ref of [fixed, lost])
      expect((await s.api('POST', `/v1/sdk/purchases/${ref}/cancel`, {})).body.status).toBe('cancelled');
    at('2026-05-10T00:06:00.000Z');
    await run();
    const finalOf = async (ref: string) =>
      (await s.invoices(ref)).find((i) => i.billingReason === 'final_usage');
    expect(await finalOf(fixed)).toMatchObject({
      total: 8,
      status: 'open',
      attemptCount: 1,
      nextPaymentAttempt: '2026-05-11T00:06:00.000Z',
    });

    // One customer fixes the card. The first retry (24 h later) is taken by one of three
    // schedulers running at once: one charge per invoice.
    expect((await s.setCard(fixes, SANDBOX_CARDS.succeeds)).status).toBe(201);
    const a = await harness.build(harness.store.store);
    const b = await harness.build(harness.store.store);
    at('2026-05-11T00:07:00.000Z');
    await Promise.all([a.scheduler.runDue(), b.scheduler.runDue(), run()]);
    await a.app.close();
    await b.app.close();
    expect(await finalOf(fixed)).toMatchObject({
      status: 'paid',
      amountPaid: 8,
      attemptCount: 2,
      nextPaymentAttempt: null,
    });
    expect((await s.paymentsOf(fixed)).map((p) => [p.amount, p.status, p.reason])).toEqual([
      [8, 'failed', 'final_usage'],
      [8, 'succeeded', 'dunning_retry'],
    ]);
    expect(await finalOf(lost)).toMatchObject({
      status: 'open',
      attemptCount: 2,
      nextPaymentAttempt: '2026-05-14T00:07:00.000Z',
    });

    // The other never pays: after 72 h and then 168 h it is uncollectible, and no retry is left.
    at('2026-05-14T00:08:00.000Z');
    await run();
    at('2026-05-21T00:09:00.000Z');
    await run();
    expect(await finalOf(lost)).toMatchObject({
      status: 'uncollectible',
      attemptCount: 4,
      nextPaymentAttempt: null,
      closedAt: '2026-05-21T00:09:00.000Z',
    });
    expect((await s.paymentsOf(lost)).map((p) => [p.status, p.reason])).toEqual([
      ['failed', 'final_usage'],
      ['failed', 'dunning_retry'],
      ['failed', 'dunning_retry'],
      ['failed', 'dunning_retry'],
    ]);
    at('2026-06-30T00:00:00.000Z');
    await run();
    expect((await s.paymentsOf(lost)).length).toBe(4);
  });
});
