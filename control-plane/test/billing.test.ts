import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Every scheduled purchase move with the clock moved forward: renewals, reminders, a failed
 * renewal through dunning to cancellation, trials, scheduled cancellation, expiry, and two
 * schedulers at once. Real PostgreSQL; the sandbox processor stands in for the card network.
 */
const HOUR = 3_600_000;
const clock = new MovableClock(new Date('2026-01-31T12:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// Response bodies are read field by field and each field is asserted, so the type stays loose here.
// biome-ignore lint/suspicious/noExplicitAny: see above
type Json = Record<string, any>;

async function seller() {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Biller' });
  const api = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: response.json() as Json };
  };
  const product = (await api('POST', '/v1/ui/products', { name: 'Pro tools' })).body;
  const plan = async (body: Json) =>
    (await api('POST', `/v1/ui/products/${product.id}/plans`, { name: 'P', ...body })).body;
  const customer = async (card?: string) => {
    const c = (await api('POST', '/v1/sdk/customers', {})).body;
    if (card !== undefined) await attach(c.reference, card);
    return c;
  };
  const attach = async (ref: string, number: string) =>
    api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
      card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
    });
  const events = async (purchaseOrCustomer: string) => {
    const { rows } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE provider_id = $1
         AND (payload->'data'->'object'->>'id' = $2 OR payload->'data'->'object'->>'customer' = $2)
       ORDER BY created_at, id`,
      [provider.id, purchaseOrCustomer],
    );
    return rows.map((r) => ({
      type: r.type,
      object: r.payload.data.object,
      previous: r.payload.data.previous_attributes,
    }));
  };
  const payments = async (purchaseId: string) => {
    const { rows } = await harness.pool.query(
      'SELECT amount, status, reason, attempt, failure_reason FROM payments WHERE purchase_id = $1 ORDER BY created_at, id',
      [purchaseId],
    );
    return rows;
  };
  return { api, plan, customer, attach, events, payments };
}

const run = () => harness.controlPlane.scheduler.runDue();
const types = (events: { type: string }[]) => events.map((e) => e.type);

describe('billing scheduler', () => {
  it('renews a paid plan every period on its anchor day, with reminders and the setup fee once', async () => {
    clock.set(new Date('2026-01-31T12:00:00.000Z'));
    const { api, plan, customer, events, payments } = await seller();
    const monthly = await plan({ type: 'recurring', price: 900, setupFee: 100 });
    const c = await customer(SANDBOX_CARDS.succeeds);
    const activation = (
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: monthly.reference })
    ).body;
    expect(activation.status).toBe('activated');
    const ref = activation.purchaseRef;
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body).toMatchObject({
      status: 'active',
      periodEnd: '2026-02-28T12:00:00.000Z',
    });

    clock.set(new Date('2026-02-22T12:00:00.000Z'));
    await run();
    clock.set(new Date('2026-02-28T12:00:01.000Z'));
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-02-28T12:00:00.000Z',
      periodEnd: '2026-03-31T12:00:00.000Z',
    });
    clock.set(new Date('2026-03-25T12:00:00.000Z'));
    await run();
    clock.set(new Date('2026-03-31T12:00:01.000Z'));
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body.periodEnd).toBe('2026-04-30T12:00:00.000Z');
    expect(await run()).toBe(0);

    expect(types(await events(ref))).toEqual([
      'purchase.created',
      'purchase.activated',
      'purchase.renewal_reminder',
      'purchase.renewed',
      'purchase.renewal_reminder',
      'purchase.renewed',
    ]);
    expect(await payments(ref)).toEqual([
      { amount: 1000, status: 'succeeded', reason: 'first_payment', attempt: 0, failure_reason: null },
      { amount: 900, status: 'succeeded', reason: 'renewal', attempt: 0, failure_reason: null },
      { amount: 900, status: 'succeeded', reason: 'renewal', attempt: 0, failure_reason: null },
    ]);
    const paid = (await events(c.reference)).filter((e) => e.type === 'payment.succeeded');
    expect(paid.map((e) => e.object.amount)).toEqual([1000, 900, 900]);
    expect(paid[0]?.object).toMatchObject({
      currency: 'usd',
      customer: c.reference,
      plan: monthly.reference,
    });
    expect(paid[0]?.object.transaction_reference).toMatch(/^txn_/);
  });

  it('takes a failed renewal through dunning on schedule to cancellation', async () => {
    clock.set(new Date('2026-05-01T00:00:00.000Z'));
    const { api, plan, customer, attach, events, payments } = await seller();
    const monthly = await plan({ type: 'recurring', price: 2500 });
    const c = await customer(SANDBOX_CARDS.succeeds);
    const ref = (
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: monthly.reference })
    ).body.purchaseRef;
    await attach(c.reference, SANDBOX_CARDS.failsLater);

    clock.set(new Date('2026-06-01T00:00:01.000Z'));
    await run();
    const pastDue = (await api('GET', `/v1/sdk/purchases/${ref}`)).body;
    expect(pastDue.status).toBe('past_due');
    for (const hours of [24, 72, 168]) {
      clock.advance(hours * HOUR);
      await run();
    }
    // Why, as Stripe's cancellation_details says it: the card failed until dunning gave up.
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body).toMatchObject({
      status: 'cancelled',
      cancellationDetails: { reason: 'payment_failed', feedback: null, comment: null },
    });

    const written = await events(ref);
    // No reminder: the scheduler first ran after the reminder window had passed.
    expect(types(written)).toEqual([
      'purchase.created',
      'purchase.activated',
      'purchase.past_due',
      'purchase.past_due',
      'purchase.past_due',
      'purchase.cancelled',
    ]);
    const dunning = written.filter((e) => e.type === 'purchase.past_due');
    expect(dunning.map((e) => e.object.retryCount)).toEqual([0, 1, 2]);
    const t0 = Date.parse('2026-06-01T00:00:01.000Z') / 1000;
    expect(dunning.map((e) => e.object.nextRetryAt)).toEqual([
      t0 + 24 * 3600,
      t0 + 96 * 3600,
      t0 + 264 * 3600,
    ]);
    expect(dunning[0]?.previous).toEqual({ status: 'active' });
    expect((await payments(ref)).map((p: Json) => `${p.reason}:${p.attempt}:${p.status}`)).toEqual([
      'first_payment:0:succeeded',
      'renewal:0:failed',
      'dunning_retry:1:failed',
      'dunning_retry:2:failed',
      'dunning_retry:3:failed',
    ]);
    expect(
      (await events(c.reference)).filter((e) => e.type === 'payment.failed')[0]?.object.failure_reason,
    ).toBe('card_declined');
  });

  it('recovers from past_due when a retry succeeds, keeping the anchor', async () => {
    clock.set(new Date('2026-05-10T00:00:00.000Z'));
    const { api, plan, customer, attach } = await seller();
    const monthly = await plan({ type: 'recurring', price: 700 });
    const c = await customer(SANDBOX_CARDS.succeeds);
    const ref = (
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: monthly.reference })
    ).body.purchaseRef;
    await attach(c.reference, SANDBOX_CARDS.insufficientFunds);
    clock.set(new Date('2026-06-10T00:00:01.000Z'));
    await run();
    await attach(c.reference, SANDBOX_CARDS.succeeds);
    clock.advance(25 * HOUR);
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-06-10T00:00:00.000Z',
      periodEnd: '2026-07-10T00:00:00.000Z',
    });
  });

  it('converts a trial with a card (setup fee included) and suspends one without', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const { api, plan, customer, events, payments } = await seller();
    const trial = await plan({ type: 'recurring', price: 500, setupFee: 200, trialDays: 14 });
    const withCard = await customer(SANDBOX_CARDS.succeeds);
    const without = await customer();
    const paidRef = (
      await api('POST', '/v1/sdk/activate', { customerRef: withCard.reference, planRef: trial.reference })
    ).body.purchaseRef;
    const unpaidRef = (
      await api('POST', '/v1/sdk/activate', { customerRef: without.reference, planRef: trial.reference })
    ).body.purchaseRef;

    clock.set(new Date('2026-03-12T00:00:00.000Z'));
    await run();
    clock.set(new Date('2026-03-15T00:00:01.000Z'));
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${paidRef}`)).body).toMatchObject({
      status: 'active',
      periodStart: '2026-03-15T00:00:00.000Z',
      periodEnd: '2026-04-15T00:00:00.000Z',
    });
    expect((await api('GET', `/v1/sdk/purchases/${unpaidRef}`)).body.status).toBe('suspended');
    expect(types(await events(paidRef))).toEqual([
      'purchase.created',
      'purchase.trial_ending',
      'purchase.trial_converted',
      'purchase.activated',
    ]);
    expect(types(await events(unpaidRef))).toEqual([
      'purchase.created',
      'purchase.trial_ending',
      'purchase.suspended',
    ]);
    expect((await payments(paidRef)).map((p: Json) => p.amount)).toEqual([700]);
    // The suspended trial's invoice stays open; paying it on request is not its way back (a
    // checkout is), with or without a card.
    const owed = (await api('GET', `/v1/sdk/invoices?purchaseRef=${unpaidRef}&status=open`)).body.data;
    expect(owed).toMatchObject([{ billingReason: 'trial_conversion', total: 700 }]);
    const pay = () => api('POST', `/v1/sdk/invoices/${owed[0].id}/pay`);
    expect((await pay()).body).toMatchObject({ status: 409, code: 'payment_method_required' });
    await api('POST', `/v1/sdk/customers/${without.reference}/payment-methods`, {
      card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
    });
    expect((await pay()).body).toMatchObject({ status: 409, code: 'invoice_not_payable' });
    expect(await payments(unpaidRef)).toHaveLength(1);
  });

  it('ends purchases as scheduled: cancellation at period end, no auto-renew, one-time access expiry', async () => {
    clock.set(new Date('2026-08-01T00:00:00.000Z'));
    const { api, plan, customer, events, payments } = await seller();
    const monthly = await plan({ type: 'recurring', price: 300 });
    const noRenew = await plan({ type: 'recurring', price: 300, autoRenew: false });
    const pass = await plan({ type: 'one-time', price: 1500, accessExpiryDays: 10 });
    const c1 = await customer(SANDBOX_CARDS.succeeds);
    const c2 = await customer(SANDBOX_CARDS.succeeds);
    const c3 = await customer(SANDBOX_CARDS.succeeds);
    const cancelRef = (
      await api('POST', '/v1/sdk/activate', { customerRef: c1.reference, planRef: monthly.reference })
    ).body.purchaseRef;
    const noRenewRef = (
      await api('POST', '/v1/sdk/activate', { customerRef: c2.reference, planRef: noRenew.reference })
    ).body.purchaseRef;
    const passRef = (
      await api('POST', '/v1/sdk/activate', { customerRef: c3.reference, planRef: pass.reference })
    ).body.purchaseRef;
    // Why the customer leaves goes with the request, as Stripe's cancellation_details; bad words are 400.
    for (const [details, path] of [
      [{ feedback: 'too_pricey' }, '/cancellationDetails/feedback'],
      [{ comment: 'x'.repeat(501) }, '/cancellationDetails/comment'],
      [{ comment: 'nul\u0000here' }, '/cancellationDetails/comment'],
      [{ reason: 'payment_failed' }, '/cancellationDetails/reason'],
    ] as const) {
      const refused = await api('POST', `/v1/sdk/purchases/${cancelRef}/cancel`, {
        atPeriodEnd: true,
        cancellationDetails: details,
      });
      expect([refused.status, refused.body.errors?.[0]?.path], JSON.stringify(details)).toEqual([400, path]);
    }
    const asked = { feedback: 'switched_service', comment: '  Moving to\nanother vendor ' };
    const scheduled = await api('POST', `/v1/sdk/purchases/${cancelRef}/cancel`, {
      atPeriodEnd: true,
      cancellationDetails: asked,
    });
    const kept = {
      reason: 'cancellation_requested',
      feedback: 'switched_service',
      comment: 'Moving to\nanother vendor',
    };
    expect(scheduled.body).toMatchObject({ cancelAtPeriodEnd: true, cancellationDetails: kept });
    // Reactivated, the reason goes; scheduled again without one, there is none but the request.
    const back = await api('POST', `/v1/sdk/purchases/${cancelRef}/reactivate`);
    expect(back.body.cancellationDetails).toBeNull();
    await api('POST', `/v1/sdk/purchases/${cancelRef}/cancel`, {
      atPeriodEnd: true,
      cancellationDetails: asked,
    });

    clock.set(new Date('2026-08-11T00:00:01.000Z'));
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${passRef}`)).body.status).toBe('expired');
    clock.set(new Date('2026-09-01T00:00:01.000Z'));
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${cancelRef}`)).body).toMatchObject({
      status: 'cancelled',
      endedAt: '2026-09-01T00:00:00.000Z',
      cancellationDetails: kept,
    });
    expect((await api('GET', `/v1/sdk/purchases/${noRenewRef}`)).body.status).toBe('expired');
    const ending = (await events(cancelRef)).slice(-4);
    expect(types(ending)).toEqual([
      'purchase.cancellation_scheduled',
      'purchase.reactivated',
      'purchase.cancellation_scheduled',
      'purchase.cancelled',
    ]);
    expect(ending.map((e) => e.object.cancellationDetails?.reason ?? null)).toEqual([
      'cancellation_requested',
      null,
      'cancellation_requested',
      'cancellation_requested',
    ]);
    expect(ending[1]?.previous).toMatchObject({ cancellationDetails: kept });
    expect((await payments(cancelRef)).length).toBe(1);
    expect((await payments(noRenewRef)).length).toBe(1);
  });

  it('refuses bad and declined cards, and a refused first payment leaves nothing behind', async () => {
    const { api, plan, customer, attach, events } = await seller();
    const c = await customer();
    expect((await attach(c.reference, SANDBOX_CARDS.declined)).body).toMatchObject({
      status: 402,
      code: 'card_declined',
    });
    expect((await attach(c.reference, '4242424242424241')).body.errors[0].path).toBe('/card/number');
    const expired = await api('POST', `/v1/sdk/customers/${c.reference}/payment-methods`, {
      card: { number: SANDBOX_CARDS.succeeds, expMonth: 1, expYear: 2020, cvc: '123' },
    });
    expect(expired.body.errors[0].path).toBe('/card/expMonth');
    const stored = await attach(c.reference, SANDBOX_CARDS.failsLater);
    expect(stored.body).toMatchObject({ brand: 'visa', last4: '0341', isDefault: true });
    const paid = await plan({ type: 'recurring', price: 1200 });
    const refused = (
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: paid.reference })
    ).body;
    expect(refused).toMatchObject({ status: 'payment_required' });
    expect(refused.message).toContain('card_declined');
    expect((await api('GET', `/v1/sdk/purchases?customerRef=${c.reference}`)).body.data).toEqual([]);
    expect(types(await events(c.reference)).filter((t) => !t.startsWith('customer.'))).toEqual([]);

    const { liveKey } = await harness.controlPlane.providers.create({ displayName: 'Live' });
    const live = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/sdk/customers',
      headers: { authorization: `Bearer ${liveKey}` },
      payload: {},
    });
    const liveCard = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/v1/sdk/customers/${live.json().reference}/payment-methods`,
      headers: { authorization: `Bearer ${liveKey}` },
      payload: { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } },
    });
    expect(liveCard.json()).toMatchObject({ status: 409, code: 'payments_not_configured' });
  });

  it('refunds in part and in full, pending then refunded; a full refund of a purchase payment revokes it', async () => {
    clock.set(new Date('2026-07-01T00:00:00.000Z'));
    const { api, plan, customer, events } = await seller();
    const monthly = await plan({ type: 'recurring', price: 1000 });
    const c = await customer(SANDBOX_CARDS.succeeds);
    const ref = (
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: monthly.reference })
    ).body.purchaseRef;
    const { rows } = await harness.pool.query<{ transaction_reference: string; id: string }>(
      'SELECT id, transaction_reference FROM payments WHERE purchase_id = $1',
      [ref],
    );
    const txn = rows[0]?.transaction_reference ?? '';

    const partial = await api('POST', '/v1/ui/transactions/refunds', {
      originalTransactionId: txn,
      refundAmount: 300,
      currency: 'USD',
      reason: 'goodwill',
    });
    expect(partial.status).toBe(202);
    expect(partial.body).toMatchObject({
      originalTransactionId: txn,
      refundAmount: 300,
      currency: 'usd',
      status: 'pending',
    });
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body.status).toBe('active');
    const tooMuch = await api('POST', '/v1/ui/transactions/refunds', {
      originalTransactionId: txn,
      refundAmount: 701,
    });
    expect(tooMuch.body).toMatchObject({ code: 'refund_exceeds_payment', refundable: 700 });
    expect(
      (await api('POST', '/v1/ui/transactions/refunds', { originalTransactionId: rows[0]?.id })).body
        .refundAmount,
    ).toBe(700);
    // Both refunds are pending until the processor reports, at the scheduler's next pass.
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body.status).toBe('active');
    await run();
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body.status).toBe('cancelled');
    expect(types(await events(ref)).slice(-1)).toEqual(['purchase.refunded']);
    expect(await run()).toBe(0);
    const { rows: outbox } = await harness.pool.query<{ type: string }>(
      `SELECT type FROM outbox_events WHERE type LIKE 'payment.refund%' AND payload->'data'->'object'->>'id' IN (SELECT id FROM refunds WHERE payment_id = $1) ORDER BY created_at, id`,
      [rows[0]?.id],
    );
    expect(outbox.map((r) => r.type)).toEqual([
      'payment.refund_pending',
      'payment.refund_pending',
      'payment.refunded',
      'payment.refunded',
    ]);
    expect(
      (await api('POST', '/v1/ui/transactions/refunds', { originalTransactionId: 'txn_nope' })).body.code,
    ).toBe('transaction_not_found');
    const other = await seller();
    expect(
      (await other.api('POST', '/v1/ui/transactions/refunds', { originalTransactionId: txn })).status,
    ).toBe(404);
  });

  it('two schedulers settling the same pending refunds at once settle each once', async () => {
    clock.set(new Date('2026-07-05T00:00:00.000Z'));
    const { api, plan, customer } = await seller();
    const once = await plan({ type: 'one-time', price: 1000 });
    const refunds: Json[] = [];
    for (let i = 0; i < 6; i++) {
      const c = await customer(SANDBOX_CARDS.succeeds);
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: once.reference });
      const { rows } = await harness.pool.query(
        'SELECT transaction_reference FROM payments WHERE customer_id = $1',
        [c.reference],
      );
      refunds.push(
        (
          await api('POST', '/v1/ui/transactions/refunds', {
            originalTransactionId: rows[0]?.transaction_reference,
            refundAmount: 100,
          })
        ).body,
      );
    }
    expect(refunds.every((r) => r.status === 'pending')).toBe(true);
    const other = await harness.build(harness.store.store);
    await Promise.all([run(), other.scheduler.runDue()]);
    await other.app.close();
    const { rows: settled } = await harness.pool.query<{ id: string }>(
      `SELECT payload->'data'->'object'->>'id' AS id FROM outbox_events WHERE type = 'payment.refunded'
          AND payload->'data'->'object'->>'id' = ANY($1) ORDER BY 1`,
      [refunds.map((r) => r.id)],
    );
    expect(settled.map((r) => r.id)).toEqual(refunds.map((r) => r.id).sort());
    // Six refunds of 100 left the balance once each, and nothing came back.
    const flow = (await api('GET', '/v1/ui/financials/cashflow?period=this-month')).body.current;
    expect(flow).toMatchObject({ paymentsReceived: 6000, refundsIssued: 600, closingBalance: 5400 });
  });

  it('a refund that fails when it settles says payment.refund_failed and returns the money to the balance', async () => {
    clock.set(new Date('2026-07-10T00:00:00.000Z'));
    const { api, plan, customer } = await seller();
    const monthly = await plan({ type: 'recurring', price: 1000 });
    const c = await customer(SANDBOX_CARDS.refundFails);
    const ref = (
      await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: monthly.reference })
    ).body.purchaseRef;
    const { rows } = await harness.pool.query<{ transaction_reference: string; id: string }>(
      'SELECT id, transaction_reference FROM payments WHERE purchase_id = $1',
      [ref],
    );
    const refund = await api('POST', '/v1/ui/transactions/refunds', {
      originalTransactionId: rows[0]?.transaction_reference,
    });
    expect(refund.body).toMatchObject({ refundAmount: 1000, status: 'pending' });
    // While pending, the money is out of the balance and nothing more can be refunded.
    const balance = async () =>
      (await api('GET', '/v1/ui/financials/cashflow?period=this-month')).body.current;
    expect(await balance()).toMatchObject({ refundsIssued: 1000, closingBalance: 0 });
    await run();
    const { rows: outbox } = await harness.pool.query<{ type: string; payload: Json }>(
      `SELECT type, payload FROM outbox_events WHERE type LIKE 'payment.refund%' AND payload->'data'->'object'->>'id' = $1 ORDER BY created_at, id`,
      [refund.body.id],
    );
    expect(outbox.map((r) => r.type)).toEqual(['payment.refund_pending', 'payment.refund_failed']);
    expect(outbox[1]?.payload.data.object).toMatchObject({
      amount: 1000,
      status: 'failed',
      failure_reason: 'expired_or_canceled_card',
    });
    expect(await balance()).toMatchObject({ refundsIssued: 0, closingBalance: 1000 });
    expect((await api('GET', `/v1/sdk/purchases/${ref}`)).body.status).toBe('active');
    const types = (await api('GET', '/v1/ui/transactions')).body.data.map((t: Json) => [t.type, t.net]);
    expect(types).toEqual([
      ['payment', 1000],
      ['refund', -1000],
      ['refund_reversal', 1000],
    ]);
    // The failed refund no longer counts: the whole payment can be refunded again.
    expect(
      (await api('POST', '/v1/ui/transactions/refunds', { originalTransactionId: rows[0]?.id })).body
        .refundAmount,
    ).toBe(1000);
  });

  it('two control-plane processes running the scheduler at once charge and announce each renewal exactly once', async () => {
    clock.set(new Date('2026-10-01T00:00:00.000Z'));
    const { api, plan, customer, events, payments } = await seller();
    const monthly = await plan({ type: 'recurring', price: 100 });
    const refs: string[] = [];
    for (let i = 0; i < 12; i++) {
      const c = await customer(SANDBOX_CARDS.succeeds);
      refs.push(
        (await api('POST', '/v1/sdk/activate', { customerRef: c.reference, planRef: monthly.reference })).body
          .purchaseRef,
      );
    }
    // Two replicas: separate processes on the same database, run at the same moment.
    const now = '2026-11-01T00:00:01.000Z';
    clock.set(new Date(now));
    const replica = () =>
      new Promise<number>((resolve, reject) => {
        execFile(
          process.execPath,
          ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'scheduler-process.ts')],
          { env: { ...process.env, DATABASE_URL: harness.databaseUrl, NOW: now }, timeout: 60_000 },
          (error, stdout) => (error ? reject(error) : resolve(Number(stdout.trim()))),
        );
      });
    const [a, b] = await Promise.all([replica(), replica()]);
    expect(a + b).toBeGreaterThanOrEqual(12);
    for (const ref of refs) {
      expect((await payments(ref)).map((p: Json) => p.reason)).toEqual(['first_payment', 'renewal']);
      expect(types(await events(ref)).filter((t) => t === 'purchase.renewed')).toHaveLength(1);
    }
  });
});
