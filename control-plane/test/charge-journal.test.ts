import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { inTransaction } from '../src/db/pool';
import { CreditService } from '../src/modules/credits/service';
import { type ChargeJournal, UNRECORDED_GRACE_MS } from '../src/modules/payments/journal';
import { SANDBOX_CARDS, SandboxProcessor } from '../src/modules/payments/processor';

/**
 * The charge journal (payments/journal.ts) on real PostgreSQL: a charge whose transaction rolls
 * back after the processor took the money is still known; a retry of its attempt records that
 * same charge, and with none the scheduler refunds it and the attempt charges anew under a new key.
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());
afterEach(() => vi.restoreAllMocks());

// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field
type Json = Record<string, any>;
const card = { card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' } };

/** A customer with an open top-up session of 250 credits for $20. */
async function session() {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Journal' });
  const call = injectClient(harness.controlPlane, sandboxKey);
  const customer = (await call('POST', '/v1/sdk/customers', {})).body;
  const opened = (
    await call('POST', '/v1/sdk/checkout-sessions', {
      customerRef: customer.reference,
      topup: { credits: 250, amount: 2000 },
    })
  ).body;
  const pay = () => call('POST', `/checkout/${opened.id}/pay`, card, null);
  return { call, customer: customer.reference as string, id: opened.id as string, pay };
}

/** Pays the session with the transaction failing after the charge (the credit movement throws). */
async function payRolledBack(pay: () => Promise<{ status: number; body: Json }>) {
  vi.spyOn(CreditService.prototype, 'moveIn').mockRejectedValueOnce(new Error('the database went away'));
  const answer = await pay();
  expect(answer.status).toBeGreaterThanOrEqual(500);
}

const journalOf = async (customer: string) =>
  (
    await harness.pool.query<Json>(
      'SELECT idempotency_key, status, processor_payment_intent, payment_id, processor_refund FROM processor_charges WHERE customer_id = $1 ORDER BY created_at, idempotency_key',
      [customer],
    )
  ).rows;
const paymentsOf = async (customer: string) =>
  (
    await harness.pool.query<Json>(
      'SELECT id, status, processor_payment_intent FROM payments WHERE customer_id = $1 ORDER BY created_at',
      [customer],
    )
  ).rows;
const balanceOf = async (call: ReturnType<typeof injectClient>, customer: string) =>
  (await call('GET', `/v1/sdk/customers/${customer}/balance`)).body.credits;
/** The journal's charges as if made `ms` ago. */
const age = (customer: string, ms: number) =>
  harness.pool.query(
    `UPDATE processor_charges SET created_at = created_at - make_interval(secs => $2::double precision / 1000) WHERE customer_id = $1`,
    [customer, ms],
  );

describe('the charge journal', () => {
  it('keeps a charge whose transaction rolled back, and the retry records that same charge', async () => {
    const { call, customer, id, pay } = await session();
    const charges = vi.spyOn(SandboxProcessor.prototype, 'charge');
    await payRolledBack(pay);
    // Nothing recorded as a payment, but the processor's charge is on the journal.
    expect(await paymentsOf(customer)).toEqual([]);
    const [unrecorded] = await journalOf(customer);
    expect(unrecorded).toMatchObject({ idempotency_key: `${customer}:${id}:0`, status: 'unrecorded' });

    const retried = await pay();
    expect(retried.status).toBe(200);
    // Both calls with the attempt's key: the processor answers the retry with the first charge.
    expect(charges.mock.calls.map(([c]) => c.idempotencyKey)).toEqual([
      `${customer}:${id}:0`,
      `${customer}:${id}:0`,
    ]);
    const payments = await paymentsOf(customer);
    expect(payments).toHaveLength(1);
    expect(payments[0]).toMatchObject({
      status: 'succeeded',
      processor_payment_intent: unrecorded?.processor_payment_intent,
    });
    expect(await journalOf(customer)).toEqual([
      { ...unrecorded, status: 'recorded', payment_id: payments[0]?.id },
    ]);
    expect(await balanceOf(call, customer)).toBe(250);
    // Recorded: the scheduler's pass refunds nothing, however late.
    const refunds = vi.spyOn(SandboxProcessor.prototype, 'refund');
    await age(customer, 2 * UNRECORDED_GRACE_MS);
    await harness.controlPlane.chargeJournal.runDue();
    expect(refunds).not.toHaveBeenCalled();
  });

  it('asks a retry as the first attempt asked, and charges anew under the next key for another amount', async () => {
    const { customer, id, pay } = await session();
    const charges = vi.spyOn(SandboxProcessor.prototype, 'charge');
    await payRolledBack(pay);
    const [unrecorded] = await journalOf(customer);
    const first = charges.mock.calls[0]?.[0];
    const { rows } = await harness.pool.query<{ provider_id: string }>(
      'SELECT provider_id FROM customers WHERE id = $1',
      [customer],
    );
    const auth = { providerId: rows[0]?.provider_id as string, environment: 'sandbox' as const };
    const journal = harness.controlPlane.chargeJournal as ChargeJournal;
    const keyFor = (amount: number) =>
      inTransaction(harness.pool, (tx) =>
        journal.keyFor(tx, auth, `${customer}:${id}:0`, { amount, currency: 'usd' }),
      );
    // The same amount: the unrecorded charge's key, payment id and metadata, as Stripe wants them.
    expect(await keyFor(2000)).toEqual({
      key: `${customer}:${id}:0`,
      journaled: true,
      asked: { paymentId: unrecorded?.payment_id, metadata: first?.metadata },
    });
    expect(first?.metadata).toMatchObject({
      payment: unrecorded?.payment_id,
      charge_key: `${customer}:${id}:0`,
    });
    // Another amount is another charge: the next generation's key; the unrecorded one waits for
    // its refund past the grace.
    expect(await keyFor(2100)).toEqual({ key: `${customer}:${id}:0:g1`, journaled: false });
    // The retry itself is asked with the first attempt's parameters and records its payment id.
    expect((await pay()).status).toBe(200);
    expect(charges.mock.calls[1]?.[0]).toEqual(first);
    expect((await paymentsOf(customer)).map((p) => p.id)).toEqual([unrecorded?.payment_id]);
  });

  it('journals a charge recorded at once as recorded, by its payment', async () => {
    const { customer, pay } = await session();
    expect((await pay()).status).toBe(200);
    const [payment] = await paymentsOf(customer);
    expect(await journalOf(customer)).toEqual([
      expect.objectContaining({ status: 'recorded', payment_id: payment?.id }),
    ]);
  });

  it('refunds a charge left unrecorded past the grace; the attempt then charges under a new key', async () => {
    const { call, customer, id, pay } = await session();
    await payRolledBack(pay);
    const refunds = vi.spyOn(SandboxProcessor.prototype, 'refund');
    // Within the grace nothing happens: a retry may still record it.
    await harness.controlPlane.chargeJournal.runDue();
    expect(refunds).not.toHaveBeenCalled();
    await age(customer, UNRECORDED_GRACE_MS + 1000);
    await harness.controlPlane.chargeJournal.runDue();
    const [charge] = await journalOf(customer);
    expect(refunds.mock.calls.map(([r]) => r)).toEqual([
      {
        processorPaymentIntent: charge?.processor_payment_intent,
        amount: 2000,
        idempotencyKey: `unrecorded:${customer}:${id}:0`,
        metadata: { charge_key: `${customer}:${id}:0` },
      },
    ]);
    // The sandbox settles a refund on the next pass.
    expect(charge?.status).toBe('refunding');
    await harness.controlPlane.chargeJournal.runDue();
    expect((await journalOf(customer))[0]?.status).toBe('refunded');

    const charges = vi.spyOn(SandboxProcessor.prototype, 'charge');
    const paid = await pay();
    expect(paid.status).toBe(200);
    // Not the refunded charge's key, which the processor would answer with the refunded charge.
    expect(charges.mock.calls.map(([c]) => c.idempotencyKey)).toEqual([`${customer}:${id}:0:g1`]);
    const payments = await paymentsOf(customer);
    expect(payments).toHaveLength(1);
    expect(payments[0]?.processor_payment_intent).not.toBe(charge?.processor_payment_intent);
    expect((await journalOf(customer)).map((r) => [r.idempotency_key, r.status])).toEqual([
      [`${customer}:${id}:0`, 'refunded'],
      [`${customer}:${id}:0:g1`, 'recorded'],
    ]);
    expect(await balanceOf(call, customer)).toBe(250);
  });

  it('records the payment when the journal cannot be written: the journal is a safety net', async () => {
    const { call, customer, pay } = await session();
    await harness.pool.query(`
      CREATE FUNCTION journal_refuses() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'journal unavailable'; END $$;
      CREATE TRIGGER journal_refuses BEFORE INSERT ON processor_charges
        FOR EACH ROW EXECUTE FUNCTION journal_refuses();`);
    try {
      expect((await pay()).status).toBe(200);
    } finally {
      await harness.pool.query(
        'DROP TRIGGER journal_refuses ON processor_charges; DROP FUNCTION journal_refuses();',
      );
    }
    expect((await paymentsOf(customer)).map((p) => p.status)).toEqual(['succeeded']);
    expect(await journalOf(customer)).toEqual([]);
    expect(await balanceOf(call, customer)).toBe(250);
  });

  it('refunds an unrecorded charge once, however many passes run at once', async () => {
    const { customer, pay } = await session();
    await payRolledBack(pay);
    await age(customer, UNRECORDED_GRACE_MS + 1000);
    const refunds = vi.spyOn(SandboxProcessor.prototype, 'refund');
    await Promise.all(Array.from({ length: 8 }, () => harness.controlPlane.chargeJournal.runDue()));
    expect(refunds).toHaveBeenCalledTimes(1);
    expect(['refunding', 'refunded']).toContain((await journalOf(customer))[0]?.status);
  });
});
