import { AsyncResource } from 'node:async_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { metadataOf, type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import {
  activatedPurchase,
  eventMaker,
  type Json,
  type LiveSeller,
  liveSeller,
} from '../../test/helpers/stripe-seller';
import { MovableClock } from '../src/clock';
import { Ledger } from '../src/modules/ledger/service';
import { Refunder } from '../src/modules/payments/refunder';

/**
 * A refund whose request's transaction failed after Stripe made it (refunds.ts): the money has
 * left, and nothing of ours records it. The refund carries our payment and its request in its
 * metadata (refunder.ts), so Stripe's events of it (delivered and retried by Stripe whatever
 * became of the request) record it as the request would have. Every request goes to stripe-mock
 * through its recording relay; the events are built from its fixtures and signed as Stripe signs
 * them. stripe-mock answers every refund with its fixture's id, so each test has a seller of its own.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let fixtures: Record<string, Json> = {};
const event = eventMaker(clock, () => fixtures);

let harness: TestControlPlane;
let mock: StripeMock;
beforeAll(async () => {
  mock = await startStripeMock({ payments: 'succeed', refunds: 'pending' });
  fixtures = mock.fixtures;
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
}, 600_000);
afterAll(async () => {
  await harness?.close();
  await mock?.close();
});
afterEach(() => vi.restoreAllMocks());

/** The refund Stripe made as an event of `type` tells it. */
const refundEvent = (type: string, made: Made, fields: Json = {}) =>
  event(type, 'refund', {
    id: made.id,
    payment_intent: made.intent,
    amount: 400,
    currency: 'usd',
    status: 'succeeded',
    metadata: made.metadata,
    ...fields,
  });

/** A refund Stripe made: its id, the PaymentIntent it returns money of, its metadata. */
interface Made {
  id: string;
  intent: string;
  metadata: Json;
}

/** The refund Stripe made for the last refund request, as the relay saw it asked and answered. */
function lastRefund(intent: string): Made {
  const sent = mock.requests.filter((r) => r.path === '/v1/refunds').at(-1);
  expect(sent).toMatchObject({ status: 200, answered: expect.stringMatching(/^re_/) });
  return { id: sent?.answered as string, intent, metadata: metadataOf(sent?.params ?? {}) };
}

/** Stripe's charge.refunded, listing the refund. */
const chargeRefunded = (intent: string, refund: Json) =>
  event('charge.refunded', 'charge', {
    payment_intent: intent,
    amount_refunded: refund.amount,
    refunds: { object: 'list', data: [refund], has_more: false },
  });

const refundsOf = async (payment: string) =>
  (
    await harness.pool.query<Json>(
      `SELECT amount::int AS amount, status, reason, source, processor_refund
         FROM refunds WHERE payment_id = $1 ORDER BY created_at, id`,
      [payment],
    )
  ).rows;
const earlyEnds = async (purchase: string) =>
  (
    await harness.pool.query<Json>(
      'SELECT amount::int AS amount, processor_refund, reason FROM early_end_refunds WHERE purchase_id = $1',
      [purchase],
    )
  ).rows;
const purchaseStatus = async (purchase: string) =>
  (await harness.pool.query<{ status: string }>('SELECT status FROM purchases WHERE id = $1', [purchase]))
    .rows[0]?.status;

/** The key a keyed refund of `payment` is asked of Stripe with: the payment, then a hash. */
const keyOf = (payment: string) => expect.stringMatching(new RegExp(`^${payment}:[\\w-]{43}$`));

/** A refund request as a provider's client sends it, with an Idempotency-Key when given one. */
const askRefund = (s: LiveSeller, body: Json, key?: string) =>
  harness.controlPlane.app.inject({
    method: 'POST',
    url: '/v1/ui/transactions/refunds',
    headers: {
      authorization: `Bearer ${s.liveKey}`,
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    payload: body,
  });

/**
 * A refund of `body` whose transaction fails right after Stripe made it (the ledger's write
 * throws, as a lost commit would): the request is answered 500, Stripe was asked once, and
 * nothing is recorded. Answers the metadata Stripe keeps with the refund.
 */
async function refundLostAfterStripe(
  s: LiveSeller,
  { payment, intent }: { payment: string; intent: string },
  body: Json,
  key?: string,
) {
  const from = mock.requests.length;
  vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('commit lost'));
  expect((await askRefund(s, { originalTransactionId: payment, ...body }, key)).statusCode).toBe(500);
  expect(mock.requests.slice(from).filter((r) => r.path === '/v1/refunds')).toHaveLength(1);
  expect(await refundsOf(payment)).toEqual([]);
  return lastRefund(intent);
}

describe("a refund recorded from Stripe's event when its request failed after Stripe made it", () => {
  it('records it once however its events come, with its ledger movement and events', async () => {
    const s = await liveSeller(harness, 'Refund lost');
    const bought = await activatedPurchase(harness, s);
    const { payment, intent, purchase } = bought;
    const body = { refundAmount: 400, reason: 'asked 🙏' };
    const made = await refundLostAfterStripe(s, bought, body, 'refund-400');
    expect(made.metadata).toEqual({
      payment,
      refund_source: 'request',
      refund_reason: 'asked 🙏',
      refund_key: keyOf(payment),
    });

    // refund.created and a redelivery of it at the same moment, refund.updated, and
    // charge.refunded listing it, all at once: one refund.
    const created = refundEvent('refund.created', made);
    const updated = refundEvent('refund.updated', made);
    const copies = [created, created, updated, chargeRefunded(intent, updated.data.object)];
    const answers = await Promise.all(copies.map((e) => s.post(e)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(answers.map((a) => a.body.outcome).sort()).toEqual(['applied', 'applied', 'applied', 'duplicate']);
    expect(await refundsOf(payment)).toEqual([
      {
        amount: 400,
        status: 'succeeded',
        reason: 'asked 🙏',
        source: 'request',
        processor_refund: made.id,
      },
    ]);
    expect(await s.ledger('refund')).toEqual([
      ['processor_balance', -400],
      ['refunds', 400],
    ]);
    expect((await s.events('payment.refund')).map((e) => e.type)).toEqual([
      'payment.refund_pending',
      'payment.refunded',
    ]);
    // A part of the payment: the purchase goes on.
    expect(await purchaseStatus(purchase)).toBe('active');

    // The client retries under its key: the refund the event recorded is its own (it carries the
    // key), and Stripe is not asked again.
    const from = mock.requests.length;
    const retried = await askRefund(s, { originalTransactionId: payment, ...body }, 'refund-400');
    expect(retried.statusCode).toBe(409);
    expect(retried.json()).toMatchObject({ code: 'refund_already_made' });
    expect(mock.requests.slice(from).filter((r) => r.path === '/v1/refunds')).toEqual([]);
    expect(await refundsOf(payment)).toHaveLength(1);
    expect(await s.ledger('refund')).toHaveLength(2);
  });

  it('records a pending one, settles it later, revokes a purchase refunded in full, and refunds no more', async () => {
    const s = await liveSeller(harness, 'Full refund lost');
    const bought = await activatedPurchase(harness, s);
    const { payment, purchase } = bought;
    const made = await refundLostAfterStripe(s, bought, {}, 'refund-all');
    expect(made.metadata).toEqual({ payment, refund_source: 'request', refund_key: keyOf(payment) });

    const pending = await s.post(refundEvent('refund.created', made, { amount: 1000, status: 'pending' }));
    expect(pending.body.outcome).toBe('applied');
    expect(await refundsOf(payment)).toEqual([expect.objectContaining({ amount: 1000, status: 'pending' })]);
    expect(await s.ledger('refund')).toEqual([
      ['processor_balance', -1000],
      ['refunds', 1000],
    ]);
    expect(await purchaseStatus(purchase)).toBe('active');

    const done = await s.post(refundEvent('refund.updated', made, { amount: 1000 }));
    expect(done.body.outcome).toBe('applied');
    expect((await refundsOf(payment)).map((r) => r.status)).toEqual(['succeeded']);
    expect(await purchaseStatus(purchase)).toBe('cancelled');
    expect((await s.events('purchase.refunded')).length).toBe(1);

    // The client retries under its key: the refund is its own (not "nothing left to refund"),
    // and Stripe is not asked.
    const from = mock.requests.length;
    const retried = await askRefund(s, { originalTransactionId: payment }, 'refund-all');
    expect(retried.statusCode).toBe(409);
    const [recorded] = (
      await harness.pool.query<Json>('SELECT id, processor_key FROM refunds WHERE payment_id = $1', [payment])
    ).rows;
    expect(recorded?.processor_key).toBe(made.metadata.refund_key);
    expect(retried.json()).toMatchObject({ code: 'refund_already_made', refund: recorded?.id });
    expect(mock.requests.slice(from).filter((r) => r.path === '/v1/refunds')).toEqual([]);
    expect(await refundsOf(payment)).toHaveLength(1);
    expect(await s.ledger('refund')).toHaveLength(2);
  });

  it('refuses a retry under the key with another amount as Stripe does: 422, nothing recorded', async () => {
    const s = await liveSeller(harness, 'Refund key reused');
    const bought = await activatedPurchase(harness, s);
    const { payment } = bought;
    const made = await refundLostAfterStripe(s, bought, { refundAmount: 400 }, 'refund-key');
    // The request failed (5xx), so the key is free here; Stripe keeps it with the first amount.
    const from = mock.requests.length;
    const other = await askRefund(s, { originalTransactionId: payment, refundAmount: 300 }, 'refund-key');
    expect(other.statusCode).toBe(422);
    expect(other.json()).toMatchObject({ code: 'idempotency_key_reused', processor: 'stripe' });
    expect(mock.requests.slice(from).map((r) => [r.path, r.params.amount, r.status])).toEqual([
      ['/v1/refunds', '300', 400],
    ]);
    expect(await refundsOf(payment)).toEqual([]);
    expect(await s.ledger('refund')).toEqual([]);
    // Nothing was done, so the refusal is not the key's answer here either: the first request
    // sent again under the key is answered with Stripe's refund, recorded once.
    const same = await askRefund(s, { originalTransactionId: payment, refundAmount: 400 }, 'refund-key');
    expect(same.statusCode).toBe(202);
    expect(mock.requests.at(-1)).toMatchObject({ path: '/v1/refunds', status: 200, answered: made.id });
    expect(await refundsOf(payment)).toEqual([
      expect.objectContaining({ amount: 400, processor_refund: made.id }),
    ]);
  });

  it('answers a refund Stripe refuses (refunded on its dashboard) 409 processor_refused, and records nothing', async () => {
    const s = await liveSeller(harness, 'Refunded elsewhere');
    const { payment } = await activatedPurchase(harness, s);
    mock.refuseNext('/v1/refunds', 'charge_already_refunded', 'Charge ch_1 has already been refunded.');
    const refused = await askRefund(s, { originalTransactionId: payment, refundAmount: 400 }, 'refused-once');
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({
      code: 'processor_refused',
      processor: 'stripe',
      processorCode: 'charge_already_refunded',
      detail: expect.stringContaining('has already been refunded'),
    });
    expect(await refundsOf(payment)).toEqual([]);
    expect(await s.ledger('refund')).toEqual([]);
    // The refusal is the key's answer, as Stripe's is: the same request is answered it again.
    const from = mock.requests.length;
    const again = await askRefund(s, { originalTransactionId: payment, refundAmount: 400 }, 'refused-once');
    expect(again.statusCode).toBe(409);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(mock.requests.slice(from)).toEqual([]);
  });

  it('an event that arrives while the request is recording its refund waits for it, and one refund results', async () => {
    const s = await liveSeller(harness, 'Early refund event');
    const { payment, intent } = await activatedPurchase(harness, s);
    const record = Ledger.prototype.recordRefund;
    // Outside the request's transaction: Stripe's delivery, and a look at the database's locks.
    const deliver = AsyncResource.bind((body: Json) => s.post(body));
    const lockWaited = AsyncResource.bind(waitForLockWaiter);
    let delivered: Promise<{ status: number; body: Json }> | undefined;
    vi.spyOn(Ledger.prototype, 'recordRefund').mockImplementationOnce(async function (this: Ledger, ...args) {
      // Delivered as Stripe delivers it, a request of its own; it waits for the payment this
      // request holds, and the request goes on once it does.
      delivered = deliver(refundEvent('refund.updated', lastRefund(intent)));
      await lockWaited();
      return record.apply(this, args);
    });
    const answer = await askRefund(s, { originalTransactionId: payment, refundAmount: 400 });
    expect(answer.statusCode).toBe(202);
    expect(answer.json()).toMatchObject({ refundAmount: 400, status: 'pending' });
    expect((await delivered)?.body.outcome).toBe('applied');
    // The request's refund, settled by the event once the request committed.
    expect(await refundsOf(payment)).toEqual([expect.objectContaining({ amount: 400, status: 'succeeded' })]);
    expect(await s.ledger('refund')).toEqual([
      ['processor_balance', -400],
      ['refunds', 400],
    ]);
  });

  it('records nothing for a refund that is not a request’s on this payment, or that does not add up', async () => {
    const s = await liveSeller(harness, 'Not a lost refund');
    const { payment, intent, purchase } = await activatedPurchase(harness, s);
    const other = await activatedPurchase(harness, s);
    const ours = { payment, refund_source: 'request' };
    const cases: [Json, Json][] = [
      [{}, {}],
      [{ payment }, {}],
      [{ ...ours, refund_source: 'proration' }, {}],
      [{ charge_key: 'whatever' }, {}],
      [{ ...ours, payment: other.payment }, {}],
      [{ ...ours, payment: 'pay_nonexistent' }, {}],
      [ours, { payment_intent: 'pi_somebody_else' }],
      [ours, { currency: 'eur' }],
      [ours, { amount: 1001 }],
      [ours, { amount: 0 }],
      [ours, { status: 'failed', failure_reason: 'expired_or_canceled_card' }],
      [ours, { status: 'canceled' }],
      [{ ...ours, refund_reason: 'x'.repeat(501) }, {}],
      [{ ...ours, refund_key: `${other.payment}:key` }, {}],
      [{ ...ours, refund_key: '' }, {}],
      [
        {
          ...ours,
          refund_source: 'proration',
          early_end: 'pur_nonexistent',
          prorated_at: '2026-06-02T00:00:00.000Z',
        },
        {},
      ],
      [{ ...ours, refund_source: 'proration', early_end: purchase, prorated_at: 'yesterday' }, {}],
    ];
    for (const [metadata, fields] of cases) {
      const answer = await s.post(
        refundEvent('refund.updated', { id: 're_made_elsewhere', intent, metadata }, fields),
      );
      expect(answer.status, JSON.stringify([metadata, fields])).toBe(200);
      expect(answer.body.outcome, JSON.stringify([metadata, fields])).toBe('unmatched:refund');
    }
    expect(await refundsOf(payment)).toEqual([]);
    expect(await refundsOf(other.payment)).toEqual([]);
    expect(await s.ledger('refund')).toEqual([]);
  });
});

/** Until some session waits for a row lock (the event's, on the payment this request holds). */
async function waitForLockWaiter() {
  for (let i = 0; i < 200; i++) {
    const { rows } = await harness.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
    );
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('the event never waited for the payment');
}

/** A customer on Pro (1000 a month) paid on June 1, 09:00, and the switch to Lite (200). */
async function proFromJuneFirst(name: string) {
  const s = await liveSeller(harness, name);
  clock.set(new Date('2026-06-01T09:00:00.000Z'));
  const bought = await activatedPurchase(harness, s);
  const lite = (
    await s.live('POST', `/v1/ui/products/${bought.plan.productId}/plans`, {
      name: 'Lite',
      type: 'recurring',
      price: 200,
    })
  ).body.id as string;
  const switchToLite = () =>
    s.live('POST', '/v1/sdk/activate', { customerRef: bought.customer, planRef: lite });
  return { s, bought, switchToLite };
}

describe('a plan switch whose transaction failed after Stripe refunded its unused time', () => {
  it('is finished by the same switch an hour later: one refund at Stripe, recorded once', async () => {
    const { bought, switchToLite } = await proFromJuneFirst('Switch lost');
    // June 6, 09:00: 600 of 720 hours left, 1000 × 600/720 = 833.33 → 833; Lite's 200 is paid by
    // it, and 633 goes back through Stripe. The ledger fails after Stripe refunded.
    clock.set(new Date('2026-06-06T09:00:00.000Z'));
    const from = mock.requests.length;
    vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('commit lost'));
    expect((await switchToLite()).status).toBe(500);
    expect(await refundsOf(bought.payment)).toEqual([]);
    // An hour later the unused time counted now would be 832 (another amount, another key).
    clock.set(new Date('2026-06-06T10:00:00.000Z'));
    const retried = await switchToLite();
    expect(retried.body).toMatchObject({ status: 'activated', proration: { credit: 833, refunded: 633 } });
    const asked = mock.requests.slice(from).filter((r) => r.path === '/v1/refunds');
    expect(asked.map((r) => [r.params.amount, r.status])).toEqual([
      ['633', 200],
      ['633', 200],
    ]);
    expect(asked[1]?.idempotencyKey).toBe(asked[0]?.idempotencyKey);
    expect(await refundsOf(bought.payment)).toMatchObject([
      { amount: 633, source: 'proration', processor_refund: asked[0]?.answered },
    ]);
  });

  it("is finished with the first attempt's reason at Stripe after both plans were renamed", async () => {
    const { s, bought, switchToLite } = await proFromJuneFirst('Switch renamed');
    clock.set(new Date('2026-06-06T09:00:00.000Z'));
    const from = mock.requests.length;
    vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('commit lost'));
    expect((await switchToLite()).status).toBe(500);
    const first = lastRefund(bought.intent);
    expect(first.metadata.refund_reason).toBe('Unused time on Pro after a switch to Lite');
    // Both plans get new names before the switch is sent again.
    const plans = (await s.live('GET', `/v1/ui/products/${bought.plan.productId}/plans`)).body.data as Json[];
    for (const plan of plans)
      expect((await s.live('PATCH', `/v1/ui/plans/${plan.id}`, { name: `${plan.name} 2027` })).status).toBe(
        200,
      );
    clock.set(new Date('2026-06-06T10:00:00.000Z'));
    const retried = await switchToLite();
    expect(retried.body).toMatchObject({ status: 'activated', proration: { credit: 833, refunded: 633 } });
    const asked = mock.requests.slice(from).filter((r) => r.path === '/v1/refunds');
    expect(asked.map((r) => [r.params.amount, r.params['metadata[refund_reason]'], r.status])).toEqual([
      ['633', 'Unused time on Pro after a switch to Lite', 200],
      ['633', 'Unused time on Pro after a switch to Lite', 200],
    ]);
    expect(await refundsOf(bought.payment)).toMatchObject([
      {
        amount: 633,
        reason: 'Unused time on Pro after a switch to Lite',
        source: 'proration',
        processor_refund: first.id,
      },
    ]);
  });

  it("is kept from the refund's event when the process died before keeping it", async () => {
    const { s, bought, switchToLite } = await proFromJuneFirst('Switch crashed');
    clock.set(new Date('2026-06-06T09:00:00.000Z'));
    // Stripe refunds 633; the process "dies" before keeping it, and its transaction goes with it.
    // biome-ignore lint/suspicious/noExplicitAny: the private write that keeps a refund
    vi.spyOn(Refunder.prototype as any, 'keep').mockResolvedValueOnce(undefined);
    vi.spyOn(Ledger.prototype, 'recordRefund').mockRejectedValueOnce(new Error('process killed'));
    expect((await switchToLite()).status).toBe(500);
    const made = lastRefund(bought.intent);
    expect(made.metadata).toMatchObject({
      refund_source: 'proration',
      early_end: bought.purchase,
      prorated_at: '2026-06-06T09:00:00.000Z',
    });
    expect(await earlyEnds(bought.purchase)).toEqual([]);
    // Stripe's event of it keeps it instead (twice at once: one row).
    const created = refundEvent('refund.created', made, { amount: 633, status: 'pending' });
    const answers = await Promise.all([created, created].map((e) => s.post(e)));
    expect(answers.map((a) => a.body.outcome).sort()).toEqual(['applied', 'duplicate']);
    expect(await earlyEnds(bought.purchase)).toEqual([
      { amount: 633, processor_refund: made.id, reason: 'Unused time on Pro after a switch to Lite' },
    ]);
    // An hour later the same switch counts from the first attempt and records Stripe's refund.
    clock.set(new Date('2026-06-06T10:00:00.000Z'));
    const from = mock.requests.length;
    const retried = await switchToLite();
    expect(retried.body).toMatchObject({ status: 'activated', proration: { credit: 833, refunded: 633 } });
    expect(mock.requests.slice(from).filter((r) => r.path === '/v1/refunds')).toEqual([
      expect.objectContaining({ status: 200, params: expect.objectContaining({ amount: '633' }) }),
    ]);
    expect(await refundsOf(bought.payment)).toMatchObject([
      { amount: 633, source: 'proration', processor_refund: made.id },
    ]);
  });
});
