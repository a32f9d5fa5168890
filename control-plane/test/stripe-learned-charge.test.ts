import { AsyncResource } from 'node:async_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { metadataOf, type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import {
  connect,
  eventMaker,
  type Json,
  type LiveSeller,
  liveSeller,
  payingCustomer,
} from '../../test/helpers/stripe-seller';
import { MovableClock } from '../src/clock';
import { Ledger } from '../src/modules/ledger/service';
import { ChargeJournal, UNRECORDED_GRACE_MS } from '../src/modules/payments/journal';

/**
 * The one gap the charge journal's own write leaves (payments/journal.ts): a process that dies
 * between Stripe's answer to a charge and the journal's write leaves a charge at Stripe that
 * nothing of ours records. Stripe's `payment_intent.succeeded` for it (delivered and retried by
 * Stripe whatever became of us) puts it on the journal, which then settles it as any other. Every
 * request goes to stripe-mock through its recording relay; the events are built from its fixtures
 * and signed as Stripe signs them.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let fixtures: Record<string, Json> = {};
const event = eventMaker(clock, () => fixtures);

let harness: TestControlPlane;
let mock: StripeMock;
beforeAll(async () => {
  mock = await startStripeMock({ payments: 'succeed' });
  fixtures = mock.fixtures;
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
}, 600_000);
afterAll(async () => {
  await harness?.close();
  await mock?.close();
});
afterEach(() => vi.restoreAllMocks());

/** The PaymentIntent Stripe made for a charge request, as its `payment_intent.succeeded` tells it. */
const succeeded = (intent: string, metadata: Record<string, string>, fields: Json = {}) =>
  event('payment_intent.succeeded', 'payment_intent', {
    id: intent,
    amount: 1000,
    amount_received: 1000,
    currency: 'usd',
    status: 'succeeded',
    metadata,
    ...fields,
  });

const journalOf = async (customer: string) =>
  (
    await harness.pool.query<Json>(
      `SELECT idempotency_key, attempt_key, status, processor_payment_intent, payment_id, amount::int AS amount, currency
         FROM processor_charges WHERE customer_id = $1`,
      [customer],
    )
  ).rows;
const paymentsOf = async (customer: string) =>
  (
    await harness.pool.query<Json>(
      'SELECT id, status, processor_payment_intent FROM payments WHERE customer_id = $1',
      [customer],
    )
  ).rows;
const refundsFrom = (from: number) => mock.requests.slice(from).filter((r) => r.path === '/v1/refunds');

/** A seller with a customer whose first payment Stripe took while the process that asked died. */
async function chargeLostInACrash(s: LiveSeller) {
  await connect(s);
  const { plan, customer } = await payingCustomer(s);
  // Stripe answers; the process "dies" before writing anything more: the journal's write fails
  // and the activation's transaction goes with it.
  let intent = '';
  vi.spyOn(ChargeJournal.prototype, 'write').mockImplementationOnce(async (_tx, charge) => {
    intent = charge.processor_payment_intent;
    throw new Error('process killed');
  });
  const from = mock.requests.length;
  const answer = await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
  expect(answer.status).toBeGreaterThanOrEqual(500);
  const charges = mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents');
  expect(charges).toHaveLength(1);
  const metadata = metadataOf(charges[0]?.params ?? {});
  expect(charges[0]?.idempotencyKey).toBe(`charge:${metadata.charge_key}`);
  expect(metadata).toMatchObject({ customer, charge_attempt: metadata.charge_key });
  expect(await journalOf(customer)).toEqual([]);
  expect(await paymentsOf(customer)).toEqual([]);
  expect(intent).toMatch(/^pi_/);
  return { customer, metadata, intent };
}

describe("a charge the journal learns from Stripe's event", () => {
  it('journals a charge whose process died before writing it, once however delivered, and refunds it past the grace', async () => {
    const s = await liveSeller(harness, 'Crashed mid-charge');
    const { customer, metadata, intent } = await chargeLostInACrash(s);

    // Stripe delivers the event, a redelivery of it at the same moment, and copies under other
    // event ids (as a second endpoint or a resend would): one charge on the journal.
    const first = succeeded(intent, metadata);
    const again = () => succeeded(intent, metadata);
    const copies = [first, first, first, again(), again(), again()];
    const answers = await Promise.all(copies.map((e) => s.post(e)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const outcomes = answers.map((a) => a.body.outcome);
    expect(outcomes.slice(0, 3).sort()).toEqual(['applied', 'duplicate', 'duplicate']);
    expect(outcomes.slice(3)).toEqual(['applied', 'applied', 'applied']);
    expect(await journalOf(customer)).toEqual([
      {
        idempotency_key: metadata.charge_key,
        attempt_key: metadata.charge_attempt,
        status: 'unrecorded',
        processor_payment_intent: intent,
        payment_id: metadata.payment,
        amount: 1000,
        currency: 'usd',
      },
    ]);

    // Within the grace a retry of the attempt could still record it: nothing is refunded.
    let from = mock.requests.length;
    await harness.controlPlane.chargeJournal.runDue();
    expect(refundsFrom(from)).toEqual([]);
    clock.advance(UNRECORDED_GRACE_MS + 1000);
    from = mock.requests.length;
    // Three scheduler passes at once (three replicas): one refund.
    await Promise.all([1, 2, 3].map(() => harness.controlPlane.chargeJournal.runDue()));
    expect(refundsFrom(from)).toEqual([
      expect.objectContaining({
        status: 200,
        idempotencyKey: `refund:unrecorded:${metadata.charge_key}`,
        params: expect.objectContaining({ payment_intent: intent, amount: '1000' }),
      }),
    ]);
    expect((await journalOf(customer))[0]?.status).toBe('refunded');
    // A late redelivery changes nothing: the journal keeps the refunded charge as it is.
    expect((await s.post(again())).body.outcome).toBe('applied');
    expect((await journalOf(customer)).map((c) => c.status)).toEqual(['refunded']);
  });

  it('an event that arrives between Stripe’s answer and the journal’s write leaves one charge, recorded', async () => {
    const s = await liveSeller(harness, 'Fast event');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    const write = ChargeJournal.prototype.write;
    // Delivered as Stripe delivers it: a request of its own, not part of the charge's work.
    const deliver = AsyncResource.bind((body: Json) => s.post(body));
    let outcome: unknown;
    vi.spyOn(ChargeJournal.prototype, 'write').mockImplementationOnce(async function (
      this: ChargeJournal,
      tx,
      charge,
    ) {
      const sent = mock.requests.filter((r) => r.path === '/v1/payment_intents').at(-1);
      const answered = await deliver(
        succeeded(charge.processor_payment_intent, metadataOf(sent?.params ?? {})),
      );
      outcome = answered.body.outcome ?? answered.body;
      return write.call(this, tx, charge);
    });
    const activated = await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(activated.body).toMatchObject({ status: 'activated' });
    expect(outcome).toBe('applied');
    const payments = await paymentsOf(customer);
    expect(payments).toEqual([
      {
        id: expect.any(String),
        status: 'succeeded',
        processor_payment_intent: expect.stringMatching(/^pi_/),
      },
    ]);
    expect(await journalOf(customer)).toEqual([
      expect.objectContaining({
        status: 'recorded',
        payment_id: payments[0]?.id,
        processor_payment_intent: payments[0]?.processor_payment_intent,
      }),
    ]);
    // Recorded: no pass refunds it, however late.
    clock.advance(UNRECORDED_GRACE_MS + 1000);
    const from = mock.requests.length;
    await harness.controlPlane.chargeJournal.runDue();
    expect(refundsFrom(from)).toEqual([]);
    // And Stripe's event once the payment is in confirms it, as before.
    expect((await s.post(succeeded(payments[0]?.processor_payment_intent, {}))).body.outcome).toBe('applied');
  });

  it('notes, and does not journal, a charge that is not ours or whose keys do not hold together', async () => {
    const s = await liveSeller(harness, 'Not ours');
    const { customer, metadata, intent } = await chargeLostInACrash(s);
    const other = await liveSeller(harness, 'Someone else');
    await connect(other);
    const stranger = (await other.live('POST', '/v1/sdk/customers', {})).body.reference as string;
    const cases: Record<string, string>[] = [
      {},
      // Made in the Stripe dashboard, or by another system on the same account.
      { order: '42' },
      { ...metadata, charge_key: undefined as unknown as string },
      // Another provider's customer.
      { ...metadata, customer: stranger },
      // A key that is neither the attempt's nor one of its generations.
      { ...metadata, charge_key: `${metadata.charge_attempt}x` },
      { ...metadata, charge_key: `${metadata.charge_attempt}:g0` },
      // An attempt that is not this charge's purchase's.
      { ...metadata, charge_attempt: `${stranger}:first:0`, charge_key: `${stranger}:first:0` },
    ];
    for (const each of cases)
      expect((await s.post(succeeded(intent, JSON.parse(JSON.stringify(each))))).body.outcome).toBe(
        'unmatched:payment',
      );
    // Amounts Stripe would not send, and a failed charge (nothing was taken): noted only.
    expect((await s.post(succeeded(intent, metadata, { amount: 0, amount_received: 0 }))).body.outcome).toBe(
      'unmatched:payment',
    );
    const failed = event('payment_intent.payment_failed', 'payment_intent', {
      id: intent,
      metadata,
    });
    expect((await s.post(failed)).body.outcome).toBe('unmatched:payment');
    expect(await journalOf(customer)).toEqual([]);
    expect(await journalOf(stranger)).toEqual([]);
  });
});

describe('a renewal whose transaction rolled back after Stripe charged', () => {
  it('is recorded by the next pass, which asks Stripe again with the same key and parameters', async () => {
    const s = await liveSeller(harness, 'Renewal lost');
    await connect(s);
    const { plan, customer } = await payingCustomer(s);
    const purchase = (await s.live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id }))
      .body.purchaseRef as string;
    const periodEnd = new Date((await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body.periodEnd);
    clock.set(new Date(periodEnd.getTime() + 60_000));
    const from = mock.requests.length;
    const renewals = () =>
      mock.requests
        .slice(from)
        .filter((r) => r.path === '/v1/payment_intents' && r.params['metadata[purchase]'] === purchase);
    // The renewal's transaction fails after Stripe charged: its invoice and payment roll back.
    // (Other tests' purchases renew in the same pass, as they will.)
    const record = Ledger.prototype.recordPayment;
    let failed = false;
    vi.spyOn(Ledger.prototype, 'recordPayment').mockImplementation(function (this: Ledger, ...args) {
      if (failed || args[2].customerId !== customer) return record.apply(this, args);
      failed = true;
      return Promise.reject(new Error('commit lost'));
    });
    // The pass logs it and goes on with the rest; the purchase stays due.
    await harness.controlPlane.scheduler.runDue();
    vi.restoreAllMocks();
    expect(failed).toBe(true);
    expect(renewals()).toHaveLength(1);
    expect(new Date((await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body.periodEnd)).toEqual(
      periodEnd,
    );
    expect((await journalOf(customer)).map((c) => c.status)).toEqual(['recorded', 'unrecorded']);
    // The next pass renews again under the attempt's key. Stripe compares the parameters with
    // the first request's (a reused key with others is an idempotency_error): the same amount and
    // metadata, the payment and invoice ids the first attempt gave it included. Three passes at
    // once (three replicas): one of them renews it.
    await Promise.all([1, 2, 3].map(() => harness.controlPlane.scheduler.runDue()));
    const asked = renewals();
    expect(asked.map((r) => [r.idempotencyKey, r.status])).toEqual([
      [`charge:${purchase}:${periodEnd.toISOString()}:0`, 200],
      [`charge:${purchase}:${periodEnd.toISOString()}:0`, 200],
    ]);
    expect(asked[1]?.params).toEqual(asked[0]?.params);
    const renewal = (await paymentsOf(customer)).filter(
      (p) => p.id === asked[0]?.params['metadata[payment]'],
    );
    expect(renewal).toEqual([expect.objectContaining({ status: 'succeeded' })]);
    expect((await journalOf(customer)).map((c) => c.status)).toEqual(['recorded', 'recorded']);
    expect((await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body).toMatchObject({ status: 'active' });
    expect(new Date((await s.live('GET', `/v1/sdk/purchases/${purchase}`)).body.periodStart)).toEqual(
      periodEnd,
    );
  });
});
