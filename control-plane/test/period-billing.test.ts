import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { entitlementKey } from '@mcp-meter/contracts/snapshots';
import { PDFDocument } from 'pdf-lib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { pollUntil } from '../../test/helpers/poll';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * End-of-period billing with the clock moved forward: usage counted in ClickHouse (chdb) over
 * the closed period, free units first, priced by the plan, issued as an invoice and charged,
 * with its events, for each pricing model; late records, rollover, dunning of a usage invoice,
 * a usage bus that has not settled, and two schedulers at once. Every amount is worked by hand.
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

async function seller(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = async (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
  const product = (await api('POST', '/v1/ui/products', { name: `${name} tools` })).body;
  const plan = async (body: Json) => {
    const created = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Metered',
      billingCycle: 'monthly',
      ...body,
    });
    expect(created.status).toBe(201);
    return created.body;
  };
  const card = (ref: string, number: string) =>
    api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
      card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
    });
  /** A customer with a good card on the plan: the purchase reference. */
  const subscribe = async (planRef: string) => {
    const customer = (await api('POST', '/v1/sdk/customers', {})).body;
    expect((await card(customer.reference, SANDBOX_CARDS.succeeds)).status).toBe(201);
    const activation = await api('POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef });
    expect(activation.body.status).toBe('activated');
    return { customer: customer.reference as string, purchase: activation.body.purchaseRef as string };
  };
  const use = async (customerRef: string, units: number, timestamp?: Date) => {
    const recorded = await api('POST', '/v1/sdk/usages', {
      customerRef,
      productRef: product.id,
      units,
      ...(timestamp === undefined ? {} : { timestamp: timestamp.toISOString() }),
    });
    expect(recorded.status).toBe(202);
  };
  const invoices = async (purchaseRef: string) =>
    (await api('GET', `/v1/sdk/invoices?purchaseRef=${purchaseRef}&limit=100`)).body.data as Json[];
  const invoice = async (id: string) => (await api('GET', `/v1/sdk/invoices/${id}`)).body;
  /** Pays an open invoice now (`POST /v1/sdk/invoices/{id}/pay`). */
  const pay = (id: string) => api('POST', `/v1/sdk/invoices/${id}/pay`);
  const events = async (purchaseRef: string) => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1
         AND (payload->'data'->'object'->>'purchase' = $2 OR payload->'data'->'object'->>'id' = $2
              OR payload->'data'->'object'->>'customer' = (SELECT customer_id FROM purchases WHERE id = $2))
       ORDER BY created_at, id`,
      [provider.id, purchaseRef],
    );
    return rows.map((r) => ({ type: r.type, object: r.payload.data.object }));
  };
  const payments = async (purchaseRef: string) =>
    (
      await harness.pool.query(
        'SELECT amount, status, reason, attempt, invoice_id FROM payments WHERE purchase_id = $1 ORDER BY created_at, id',
        [purchaseRef],
      )
    ).rows;
  return { api, plan, card, subscribe, use, invoices, invoice, pay, events, payments, provider, product };
}

const run = () => harness.controlPlane.scheduler.runDue();
const at = (iso: string) => clock.set(new Date(iso));
const billingTypes = (events: { type: string }[]) =>
  events
    .map((e) => e.type)
    .filter(
      (t) =>
        t.startsWith('usage.charged') ||
        t.startsWith('payment.') ||
        t === 'usage.reset' ||
        t === 'purchase.renewed' ||
        t === 'purchase.past_due' ||
        t === 'purchase.cancelled',
    );

describe('end-of-period usage billing', () => {
  it('bills a per-unit plan at 0.2¢ after the lateness allowance, and late records on the next invoice', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Per unit');
    const plan = await s.plan({ type: 'usage-based', unitAmount: 0.2, freeUnits: 1000 });
    const { customer, purchase } = await s.subscribe(plan.id);
    await s.use(customer, 2000);
    await s.use(customer, 617);
    at('2026-03-20T00:00:00.000Z');
    await harness.settled();

    // The period has ended, but records may still be on their way for 5 minutes: nothing yet.
    at('2026-04-01T00:00:01.000Z');
    await run();
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.periodStart).toBe(
      '2026-03-01T00:00:00.000Z',
    );
    // A record of the closed period that arrives inside the allowance is billed with it.
    await s.use(customer, 3, new Date('2026-03-31T23:59:59.000Z'));
    at('2026-04-01T00:05:00.000Z');
    await run();

    // 2,620 calls, 1,000 free: 1,620 × 0.2¢ = 324¢ exactly.
    const [first, closed] = await s.invoices(purchase);
    expect(first).toMatchObject({ billingReason: 'first_payment', total: 0, status: 'paid', lines: [] });
    expect(closed).toMatchObject({
      status: 'paid',
      billingReason: 'renewal',
      currency: 'usd',
      usage: {
        periodStart: '2026-03-01T00:00:00.000Z',
        periodEnd: '2026-04-01T00:00:00.000Z',
        units: 2620,
        freeUnits: 1000,
        billableUnits: 1620,
      },
      lines: [
        {
          kind: 'usage',
          description: '1620 calls',
          quantity: 1620,
          unitAmount: '0.2',
          amount: 324,
          period: { start: '2026-03-01T00:00:00.000Z', end: '2026-04-01T00:00:00.000Z' },
        },
      ],
      total: 324,
      amountPaid: 324,
      amountDue: 0,
      attemptCount: 1,
    });
    expect((await s.api('GET', `/v1/sdk/invoices/${closed?.id}`)).body).toEqual(closed);
    expect(await s.payments(purchase)).toEqual([
      { amount: 324, status: 'succeeded', reason: 'renewal', attempt: 0, invoice_id: closed?.id },
    ]);
    const events = await s.events(purchase);
    expect(billingTypes(events)).toEqual([
      'usage.charged',
      'payment.succeeded',
      'purchase.renewed',
      'usage.reset',
    ]);
    expect(events.find((e) => e.type === 'usage.charged')?.object).toMatchObject({
      invoice: closed?.id,
      purchase,
      customer,
      quantity: 2620,
      freeUnits: 1000,
      billableUnits: 1620,
      lateUnits: 0,
      amount: 324,
      currency: 'usd',
      periodStart: Date.parse('2026-03-01T00:00:00Z') / 1000,
      periodEnd: Date.parse('2026-04-01T00:00:00Z') / 1000,
    });

    // April: 1,500 calls, and one more March call that arrives after March was billed. It is
    // billed on April's invoice as the difference it makes to March's price: 1,621 × 0.2 =
    // 324.2 → 324, so 0¢; a second late call makes 1,622 × 0.2 = 324.4 → 324, still 0¢; a
    // third 324.6 → 325: 1¢. Three late calls, 1¢.
    at('2026-04-10T00:00:00.000Z');
    await s.use(customer, 1500);
    await s.use(customer, 3, new Date('2026-03-30T00:00:00.000Z'));
    await harness.settled();
    at('2026-05-01T00:05:00.000Z');
    await run();
    const april = (await s.invoices(purchase))[2];
    // 1,500 calls, 1,000 free: 500 × 0.2 = 100¢; late usage 1¢.
    expect(april).toMatchObject({
      usage: { units: 1500, billableUnits: 500 },
      lines: [
        { kind: 'usage', quantity: 500, amount: 100 },
        {
          kind: 'late_usage',
          description: 'Late usage for 2026-03-01 – 2026-04-01: 3 calls',
          quantity: 3,
          amount: 1,
          period: { start: '2026-03-01T00:00:00.000Z', end: '2026-04-01T00:00:00.000Z' },
        },
      ],
      total: 101,
      status: 'paid',
    });
    expect((await s.events(purchase)).filter((e) => e.type === 'usage.charged').at(-1)?.object).toMatchObject(
      {
        lateUnits: 3,
        amount: 101,
      },
    );
    expect(await run()).toBe(0);
  });

  it('bills a hybrid plan its usage in arrears and its base in advance, through dunning', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Hybrid');
    const plan = await s.plan({
      type: 'hybrid',
      basePrice: 1000,
      freeUnits: 100,
      tiersMode: 'graduated',
      tiers: [
        { upTo: 1000, unitAmount: 0 },
        { upTo: 10000, unitAmount: 0.1, flatAmount: 500 },
        { upTo: null, unitAmount: 0.05 },
      ],
    });
    const { customer, purchase } = await s.subscribe(plan.id);
    // The first invoice: the base price of the first period, in advance.
    expect((await s.invoices(purchase))[0]).toMatchObject({
      billingReason: 'first_payment',
      lines: [
        {
          kind: 'base',
          description: 'Metered (2026-03-01 – 2026-04-01)',
          quantity: 1,
          unitAmount: '1000',
          amount: 1000,
        },
      ],
      total: 1000,
      status: 'paid',
    });
    await s.use(customer, 12_445);
    await harness.settled();
    // The card starts failing before the period closes.
    expect((await s.card(customer, SANDBOX_CARDS.failsLater)).status).toBe(201);

    at('2026-04-01T00:06:00.000Z');
    await run();
    // 12,445 calls, 100 free: 12,345 billable. Tier 1: 1,000 × 0 = 0; tier 2: 9,000 × 0.1 = 900
    // + 500 flat; tier 3: 2,345 × 0.05 = 117.25 → 117. Usage 1,517¢ plus April's base 1,000¢.
    const closed = (await s.invoices(purchase))[1];
    expect(closed?.lines.map((l: Json) => [l.kind, l.quantity, l.amount])).toEqual([
      ['usage', 1000, 0],
      ['usage', 9000, 900],
      ['usage', 1, 500],
      ['usage', 2345, 117],
      ['base', 1, 1000],
    ]);
    expect(closed).toMatchObject({ total: 2517, status: 'open', amountDue: 2517, attemptCount: 1 });
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.status).toBe('past_due');

    // A working card, and the first retry (24 h later) pays the same invoice.
    expect((await s.card(customer, SANDBOX_CARDS.succeeds)).status).toBe(201);
    at('2026-04-02T00:06:00.000Z');
    await run();
    expect((await s.api('GET', `/v1/sdk/invoices/${closed?.id}`)).body).toMatchObject({
      status: 'paid',
      total: 2517,
      amountPaid: 2517,
      attemptCount: 2,
    });
    expect(await s.payments(purchase)).toMatchObject([
      { amount: 1000, status: 'succeeded', reason: 'first_payment', attempt: 0 },
      { amount: 2517, status: 'failed', reason: 'renewal', attempt: 0, invoice_id: closed?.id },
      { amount: 2517, status: 'succeeded', reason: 'dunning_retry', attempt: 1, invoice_id: closed?.id },
    ]);
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-04-01T00:00:00.000Z',
      periodEnd: '2026-05-01T00:00:00.000Z',
    });
    expect(billingTypes(await s.events(purchase))).toEqual([
      'payment.succeeded',
      'usage.charged',
      'payment.failed',
      'purchase.past_due',
      'payment.succeeded',
      'purchase.renewed',
      'usage.reset',
    ]);
  });

  it('carries unused free units over, bills packages, and closes a cancelled purchase with a final invoice', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Packages');
    const plan = await s.plan({
      type: 'usage-based',
      price: 50,
      packageSize: 100,
      freeUnits: 100,
      rolloverUnusedUnits: true,
    });
    const { customer, purchase } = await s.subscribe(plan.id);
    await s.use(customer, 40);
    await harness.settled();
    at('2026-04-01T00:06:00.000Z');
    await run();
    // 40 of 100 free units used: nothing to pay, 60 carried into April.
    expect((await s.invoices(purchase))[1]).toMatchObject({
      usage: { units: 40, freeUnits: 100, billableUnits: 0 },
      lines: [],
      total: 0,
      status: 'paid',
      attemptCount: 0,
    });
    await s.use(customer, 305);
    await harness.settled();
    expect((await s.api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${purchase}`)).body).toMatchObject({
      usage: { units: 305, freeUnits: 160, billableUnits: 145 },
      total: 100,
    });
    expect((await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, { atPeriodEnd: true })).status).toBe(
      200,
    );

    at('2026-05-01T00:06:00.000Z');
    await run();
    // 305 calls, 100 + 60 free: 145 billable, 2 started packages of 100 at 50¢ = 100¢.
    const final = (await s.invoices(purchase))[2];
    expect(final).toMatchObject({
      billingReason: 'final_usage',
      usage: { units: 305, freeUnits: 160, billableUnits: 145 },
      lines: [{ kind: 'usage', description: '145 calls in 2 packages of 100', quantity: 2, amount: 100 }],
      total: 100,
      status: 'paid',
    });
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.status).toBe('cancelled');
    expect((await s.payments(purchase)).at(-1)).toMatchObject({ amount: 100, reason: 'final_usage' });
    // Cancelled: the unused rollover goes nowhere, and nothing is due any more.
    expect(await run()).toBe(0);
  });

  it('waits for the usage bus to settle before closing a usage period', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Watermark');
    const plan = await s.plan({ type: 'usage-based', price: 1 });
    const { customer, purchase } = await s.subscribe(plan.id);
    await s.use(customer, 7);
    await harness.settled();
    let settled = false;
    let asked = 0;
    const held = await harness.build(harness.store.store, {
      settled: async () => {
        asked++;
        return settled;
      },
    });
    at('2026-04-01T00:06:00.000Z');
    await held.scheduler.runDue();
    expect(asked).toBe(1);
    // Not closed: the invoice is a draft, recounted on each pass, and nothing is charged.
    const waiting = await s.invoices(purchase);
    expect(waiting).toHaveLength(2);
    expect(waiting[1]).toMatchObject({ status: 'draft', total: 7, usage: { units: 7 }, attemptCount: 0 });
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body.periodStart).toBe(
      '2026-03-01T00:00:00.000Z',
    );
    settled = true;
    await held.scheduler.runDue();
    expect((await s.invoices(purchase))[1]).toMatchObject({ total: 7, status: 'paid' });
    await held.app.close();
  });

  it('a draft that cannot be recounted holds up no other purchase’s draft', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Broken draft');
    const plan = await s.plan({ type: 'usage-based', price: 1 });
    const broken = await s.subscribe(plan.id);
    const fine = await s.subscribe(plan.id);
    await s.use(broken.customer, 3);
    await s.use(fine.customer, 5);
    await harness.settled();
    // A usage bus that never settles: the periods stay open and their invoices are drafts.
    const held = await harness.build(harness.store.store, { settled: async () => false });
    // A row the scheduler cannot make sense of, first in the pass's order: it owes the usage of
    // an end it never had.
    expect(broken.purchase < fine.purchase).toBe(true);
    await harness.pool.query('UPDATE purchases SET final_usage_due = true WHERE id = $1', [broken.purchase]);
    try {
      at('2026-04-01T00:06:00.000Z');
      await held.scheduler.runDue();
      expect((await s.invoices(fine.purchase))[1]).toMatchObject({ status: 'draft', total: 5 });
      expect(await s.invoices(broken.purchase)).toHaveLength(1);
      // A record arriving late is in the next pass's draft, past the broken row again.
      await s.use(fine.customer, 2, new Date('2026-03-31T23:59:00.000Z'));
      await harness.settled();
      await held.scheduler.runDue();
      expect((await s.invoices(fine.purchase))[1]).toMatchObject({ status: 'draft', total: 7 });
    } finally {
      await harness.pool.query('UPDATE purchases SET final_usage_due = false WHERE id = $1', [
        broken.purchase,
      ]);
      await held.app.close();
    }
    // Mended, it is drafted like any other.
    await run();
    expect((await s.invoices(broken.purchase))[1]).toMatchObject({ total: 3 });
  });

  it('two schedulers closing the same periods at once bill each purchase once', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Replicas');
    const plan = await s.plan({ type: 'usage-based', unitAmount: 1.5 });
    const subscribed = [];
    for (let i = 0; i < 12; i++) {
      const sub = await s.subscribe(plan.id);
      await s.use(sub.customer, i + 1);
      subscribed.push(sub);
    }
    await harness.settled();
    const a = await harness.build(harness.store.store);
    const b = await harness.build(harness.store.store);
    at('2026-04-01T00:06:00.000Z');
    await Promise.all([a.scheduler.runDue(), b.scheduler.runDue(), run()]);
    for (const [i, sub] of subscribed.entries()) {
      const invoices = await s.invoices(sub.purchase);
      // (i + 1) calls × 1.5¢, rounded half to even once: 1.5 → 2, 3, 4.5 → 4, 6, 7.5 → 8, …
      const expected = halfEven((i + 1) * 1.5);
      expect(invoices).toHaveLength(2);
      expect(invoices[1]).toMatchObject({ total: expected, status: 'paid' });
      const paid = (await s.payments(sub.purchase)).filter((p) => p.reason === 'renewal');
      expect(paid).toEqual([
        { amount: expected, status: 'succeeded', reason: 'renewal', attempt: 0, invoice_id: invoices[1]?.id },
      ]);
      expect((await s.events(sub.purchase)).filter((e) => e.type === 'usage.charged')).toHaveLength(1);
    }
    await a.app.close();
    await b.app.close();
  });
});

describe('a purchase that ends before its period does', () => {
  it('bills the usage of the part period: after a plan switch, and after an immediate cancellation', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Switcher');
    const cheap = await s.plan({ type: 'usage-based', price: 1 });
    const dear = await s.plan({ type: 'usage-based', price: 2 });
    const { customer, purchase: first } = await s.subscribe(cheap.id);
    at('2026-03-10T00:00:00.000Z');
    await s.use(customer, 40);
    await harness.settled();

    // March 15: the customer switches plans. The first purchase's 40 calls are still owed.
    at('2026-03-15T00:00:00.000Z');
    const switched = await s.api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: dear.id });
    expect(switched.body.status).toBe('activated');
    const second = switched.body.purchaseRef as string;
    at('2026-03-16T00:00:00.000Z');
    await s.use(customer, 5);
    await harness.settled();

    at('2026-03-15T00:01:00.000Z');
    await run();
    // Inside the lateness allowance: a draft of the part period, 40 calls so far.
    const drafted = await s.invoices(first);
    expect(drafted).toHaveLength(2);
    expect(drafted[1]).toMatchObject({ status: 'draft', billingReason: 'final_usage', total: 40 });
    at('2026-03-16T00:06:00.000Z');
    await run();
    // 40 calls at 1¢ over March 1 – 15; the 5 calls after the switch belong to the new plan.
    expect((await s.invoices(first))[1]).toMatchObject({
      billingReason: 'final_usage',
      usage: { periodStart: '2026-03-01T00:00:00.000Z', periodEnd: '2026-03-15T00:00:00.000Z', units: 40 },
      total: 40,
      status: 'paid',
    });
    expect(await run()).toBe(0);
    // Billing the old purchase left the customer's entitlement with the new one.
    const snapshot = await harness.snapshots.get(
      entitlementKey({
        providerId: s.provider.id,
        environment: 'sandbox',
        customerId: customer,
        productId: s.product.id,
      }),
    );
    expect(JSON.parse(snapshot ?? '{}')).toMatchObject({ purchaseId: second, grantsAccess: true });

    // March 20: cancelled at once. Its 5 calls at 2¢ are billed after the allowance.
    at('2026-03-20T00:00:00.000Z');
    expect((await s.api('POST', `/v1/sdk/purchases/${second}/cancel`, {})).body.status).toBe('cancelled');
    at('2026-03-20T00:06:00.000Z');
    await run();
    expect((await s.invoices(second)).map((i) => [i.billingReason, i.total, i.usage?.units ?? null])).toEqual(
      [
        ['first_payment', 0, null],
        ['final_usage', 10, 5],
      ],
    );
    const charged = (await s.events(second)).filter((e) => e.type === 'usage.charged');
    expect(charged.map((e) => [e.object.purchase, e.object.amount])).toEqual([
      [first, 40],
      [second, 10],
    ]);
    expect(await run()).toBe(0);
  });
});

describe('paying an open invoice on request', () => {
  it('charges a past-due invoice apart from dunning: a decline leaves the schedule, a good card renews once', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Pay now');
    const plan = await s.plan({ type: 'recurring', price: 1000 });
    const { customer, purchase } = await s.subscribe(plan.id);
    expect((await s.card(customer, SANDBOX_CARDS.failsLater)).status).toBe(201);
    at('2026-04-01T00:06:00.000Z');
    await run();
    const open = (await s.invoices(purchase))[1] as Json;
    expect(open).toMatchObject({ status: 'open', total: 1000, attemptCount: 1, billingReason: 'renewal' });
    const pastDue = (await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body;
    expect(pastDue.status).toBe('past_due');
    const pay = () => s.pay(open.id);

    // The card still fails: 402, the attempt recorded, and dunning's schedule as it was.
    at('2026-04-01T08:00:00.000Z');
    expect(await pay()).toMatchObject({ status: 402, body: { code: 'card_declined' } });
    expect(await s.invoice(open.id)).toMatchObject({
      status: 'open',
      attemptCount: 2,
    });
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body).toEqual(pastDue);

    // A good card; eight calls at once charge it once, and the purchase renews once.
    expect((await s.card(customer, SANDBOX_CARDS.succeeds)).status).toBe(201);
    at('2026-04-01T09:00:00.000Z');
    const answers = await Promise.all(Array.from({ length: 8 }, pay));
    expect(answers.map((a) => `${a.status} ${a.body.status}`)).toEqual(answers.map(() => '200 paid'));
    expect(answers[0]?.body).toMatchObject({ amountPaid: 1000, attemptCount: 3 });
    expect(await s.payments(purchase)).toMatchObject([
      { amount: 1000, status: 'succeeded', reason: 'first_payment', attempt: 0 },
      { amount: 1000, status: 'failed', reason: 'renewal', attempt: 0, invoice_id: open.id },
      { amount: 1000, status: 'failed', reason: 'dunning_retry', attempt: -1, invoice_id: open.id },
      { amount: 1000, status: 'succeeded', reason: 'dunning_retry', attempt: -2, invoice_id: open.id },
    ]);
    expect((await s.api('GET', `/v1/sdk/purchases/${purchase}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-04-01T00:00:00.000Z',
      periodEnd: '2026-05-01T00:00:00.000Z',
    });
    expect(billingTypes(await s.events(purchase))).toEqual([
      'payment.succeeded',
      'payment.failed',
      'purchase.past_due',
      'payment.failed',
      'payment.succeeded',
      'purchase.renewed',
      'usage.reset',
    ]);
    // Dunning's retry, once due, has nothing left to charge; a paid invoice is answered as it is.
    at('2026-04-02T00:06:00.000Z');
    await run();
    expect(await s.payments(purchase)).toHaveLength(4);
    expect(await pay()).toMatchObject({ status: 200, body: { status: 'paid', attemptCount: 3 } });
    expect(await s.api('POST', '/v1/sdk/invoices/inv_nope/pay')).toMatchObject({
      status: 404,
      body: { code: 'invoice_not_found' },
    });
  });

  it('keeps a final invoice’s retry schedule through a declined payment on request', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Final pay now');
    const plan = await s.plan({ type: 'usage-based', price: 3 });
    const { customer, purchase } = await s.subscribe(plan.id);
    expect((await s.card(customer, SANDBOX_CARDS.failsLater)).status).toBe(201);
    at('2026-03-05T00:00:00.000Z');
    await s.use(customer, 7);
    await harness.settled();
    at('2026-03-10T00:00:00.000Z');
    expect((await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, {})).body.status).toBe('cancelled');
    at('2026-03-10T00:06:00.000Z');
    await run();
    const final = (await s.invoices(purchase)).find((i) => i.billingReason === 'final_usage') as Json;
    expect(final).toMatchObject({
      status: 'open',
      total: 21,
      attemptCount: 1,
      nextPaymentAttempt: '2026-03-11T00:06:00.000Z',
    });
    const pay = () => s.pay(final.id);
    at('2026-03-10T12:00:00.000Z');
    expect(await pay()).toMatchObject({ status: 402, body: { code: 'card_declined' } });
    // The next retry is when it was; failing, it waits the second interval (72 h), not the third.
    expect(await s.invoice(final.id)).toMatchObject({
      status: 'open',
      attemptCount: 2,
      nextPaymentAttempt: '2026-03-11T00:06:00.000Z',
    });
    at('2026-03-11T00:06:00.000Z');
    await run();
    expect(await s.invoice(final.id)).toMatchObject({
      status: 'open',
      attemptCount: 3,
      nextPaymentAttempt: '2026-03-14T00:06:00.000Z',
    });
    // Paid on request with a good card: the retries stop.
    expect((await s.card(customer, SANDBOX_CARDS.succeeds)).status).toBe(201);
    expect(await pay()).toMatchObject({ status: 200, body: { status: 'paid', amountPaid: 21 } });
    expect((await s.invoice(final.id)).nextPaymentAttempt).toBeNull();
    at('2026-03-14T00:06:00.000Z');
    await run();
    expect((await s.payments(purchase)).map((p) => [p.reason, p.status, p.attempt])).toEqual([
      ['final_usage', 'failed', 0],
      ['dunning_retry', 'failed', -1],
      ['dunning_retry', 'failed', 2],
      ['dunning_retry', 'succeeded', -2],
    ]);
  });
});

describe('the hosted invoice', () => {
  it('shows the customer the invoice as a page and a PDF, by its link alone', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Invoicer <&>');
    const plan = await s.plan({ type: 'hybrid', basePrice: 500, unitAmount: 0.2 });
    const { customer, purchase } = await s.subscribe(plan.id);
    await s.api('PATCH', `/v1/sdk/customers/${customer}`, {
      name: 'Ada <b>Lovelace</b>',
      email: 'ada@example.com',
    });
    await s.use(customer, 1234);
    await harness.settled();
    at('2026-04-01T00:06:00.000Z');
    await run();
    const invoice = (await s.invoices(purchase))[1];
    // 1,234 × 0.2 = 246.8 → 247, plus April's base 500.
    expect(invoice).toMatchObject({ total: 747, status: 'paid' });
    expect(invoice?.hostedUrl).toMatch(/^http:\/\/127\.0\.0\.1:8080\/invoice\/[0-9a-f]{64}$/);
    expect(invoice?.pdfUrl).toBe(`${invoice?.hostedUrl}/pdf`);
    const path = new URL(invoice?.hostedUrl).pathname;
    // The provider's branding, set after the invoice was made, is what the page shows.
    await s.api('PATCH', '/v1/sdk/merchant', {
      brandColor: '#0B6E4F',
      logoUrl: 'https://cdn.example/logo.png',
    });

    const page = await harness.controlPlane.app.inject({ method: 'GET', url: path });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toContain('--brand:#0b6e4f;--on-brand:#ffffff;--brand-text:#0b6e4f');
    expect(page.body).toContain('<img src="https://cdn.example/logo.png" alt="">');
    expect(page.headers['content-security-policy']).toContain('img-src https:;');
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.headers['cache-control']).toBe('no-store');
    for (const text of [
      'Invoicer &lt;&amp;&gt;',
      'Ada &lt;b&gt;Lovelace&lt;/b&gt;',
      invoice?.id,
      '1234 calls',
      '$0.002',
      '$2.47',
      'Metered (2026-04-01 – 2026-05-01)',
      '$5.00',
      '$7.47',
      'Paid',
      'Sandbox invoice',
    ])
      expect(page.body).toContain(text);
    expect(page.body).not.toContain('<b>Lovelace');

    const pdf = await harness.controlPlane.app.inject({ method: 'GET', url: `${path}/pdf` });
    expect(pdf.statusCode).toBe(200);
    expect(pdf.headers['content-type']).toBe('application/pdf');
    expect(pdf.rawPayload.subarray(0, 5).toString()).toBe('%PDF-');
    const parsed = await PDFDocument.load(pdf.rawPayload);
    expect(parsed.getTitle()).toBe(`Invoice ${invoice?.id}`);
    expect(parsed.getAuthor()).toBe('Invoicer <&>');
    expect(parsed.getPageCount()).toBe(1);

    // Only the exact link opens it.
    for (const url of [
      `/invoice/${'0'.repeat(64)}`,
      `/invoice/${'0'.repeat(64)}/pdf`,
      '/invoice/not-a-token',
      `${path.slice(0, -1)}x`,
    ])
      expect((await harness.controlPlane.app.inject({ method: 'GET', url })).statusCode).toBe(404);
    // A token longer than any route parameter: the router refuses it (URI too long), never a 500.
    expect(
      (await harness.controlPlane.app.inject({ method: 'GET', url: `/invoice/${'a'.repeat(300)}` }))
        .statusCode,
    ).toBe(414);
  });
});

describe('a control plane killed during a billing run', () => {
  it('bills every purchase exactly once after a restart', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Killed');
    const plan = await s.plan({ type: 'usage-based', price: 3 });
    const { rows: meters } = await harness.pool.query<{ id: string }>(
      `SELECT id FROM meters WHERE provider_id = $1 AND environment = 'sandbox' AND name = 'requests'`,
      [s.provider.id],
    );
    const subscribed: { customer: string; purchase: string; units: number }[] = [];
    for (let i = 0; i < 16; i++) subscribed.push({ ...(await s.subscribe(plan.id)), units: 10 + i });
    const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-kill-'));
    const usageFile = join(dir, 'usage.json');
    writeFileSync(
      usageFile,
      JSON.stringify(
        subscribed.map((sub, i) => ({
          id: `kill-${i}`,
          providerId: s.provider.id,
          meterRef: meters[0]?.id,
          customerRef: sub.customer,
          productId: s.product.id,
          units: sub.units,
          timestamp: '2026-03-15T00:00:00.000Z',
        })),
      ),
    );
    const renewals = async () =>
      Number(
        (
          await harness.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM invoices i JOIN purchases p ON p.id = i.purchase_id
              WHERE p.provider_id = $1 AND i.billing_reason = 'renewal'`,
            [s.provider.id],
          )
        ).rows[0]?.n,
      );
    const replica = (pauseMs: number): { child: ChildProcess; done: Promise<string> } => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'billing-process.ts')],
        {
          env: {
            ...process.env,
            DATABASE_URL: harness.databaseUrl,
            NOW: '2026-04-01T00:06:00.000Z',
            CHDB_DIR: join(dir, 'chdb'),
            USAGE_FILE: usageFile,
            PAUSE_MS: String(pauseMs),
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      let out = '';
      child.stdout?.on('data', (chunk) => {
        out += chunk;
      });
      const done = new Promise<string>((resolve) => child.on('exit', () => resolve(out)));
      return { child, done };
    };
    try {
      // The first process bills slowly (150 ms before each usage count) and dies midway.
      const first = replica(150);
      await pollUntil(renewals, (n) => n >= 4, { what: 'a billing run under way', timeoutMs: 60_000 });
      first.child.kill('SIGKILL');
      await first.done;
      const billedBeforeKill = await renewals();
      expect(billedBeforeKill).toBeLessThan(subscribed.length);

      // The restarted process bills the rest, and nothing twice.
      const second = replica(0);
      const handled = Number((await second.done).trim().split('\n').at(-1));
      expect(handled).toBe(subscribed.length - billedBeforeKill);
      for (const sub of subscribed) {
        const invoices = await s.invoices(sub.purchase);
        expect(invoices.map((i) => [i.billingReason, i.total, i.status])).toEqual([
          ['first_payment', 0, 'paid'],
          ['renewal', sub.units * 3, 'paid'],
        ]);
        expect((await s.payments(sub.purchase)).map((p) => [p.reason, p.amount, p.status])).toEqual([
          ['renewal', sub.units * 3, 'succeeded'],
        ]);
        const types = (await s.events(sub.purchase)).map((e) => e.type);
        expect(types.filter((t) => t === 'usage.charged')).toHaveLength(1);
        expect(types.filter((t) => t === 'purchase.renewed')).toHaveLength(1);
        expect((await s.api('GET', `/v1/sdk/purchases/${sub.purchase}`)).body.periodStart).toBe(
          '2026-04-01T00:00:00.000Z',
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** x.5 to the even neighbour, other fractions to the nearest: the reference for the test above. */
function halfEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest < 0.5) return floor;
  if (rest > 0.5) return floor + 1;
  return floor % 2 === 0 ? floor : floor + 1;
}
