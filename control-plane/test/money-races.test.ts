import type { PoolClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { SANDBOX_CARDS, SandboxProcessor } from '../src/modules/payments/processor';

/**
 * Every money-moving call fired many times at once, on real PostgreSQL: whatever the
 * interleaving, money moves once (or within its bound), and no caller gets a 5xx.
 */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field
type Json = Record<string, any>;
const AT_ONCE = 12;
const card = (number: string) => ({ card: { number, expMonth: 12, expYear: 2035, cvc: '123' } });

type Call = ReturnType<typeof injectClient>;

async function seller() {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Racer' });
  const call = injectClient(harness.controlPlane, sandboxKey);
  const customer = (await call('POST', '/v1/sdk/customers', {})).body;
  return { call, customer };
}
/** A recurring plan at `price` cents of a product of its own. */
async function recurringPlan(call: Call, productName: string, price: number): Promise<Json> {
  const product = (await call('POST', '/v1/ui/products', { name: productName })).body;
  return (
    await call('POST', `/v1/ui/products/${product.id}/plans`, { name: 'Pro', type: 'recurring', price })
  ).body;
}
const statuses = (answers: Array<{ status: number }>) => answers.map((a) => a.status).sort();
const times = <T>(n: number, make: () => Promise<T>) => Promise.all(Array.from({ length: n }, make));

/** Waits until a session of the control plane waits for the lock on a customer's row. */
async function waitForLockWaiter(customerId: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { rows } = await harness.pool.query<{ waiting: number }>(
      `SELECT count(*)::int AS waiting FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
          AND query LIKE '%FROM customers WHERE id = $1 FOR NO KEY UPDATE%'`,
    );
    if ((rows[0]?.waiting ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no transaction came to wait for customer ${customerId}'s row`);
}

/**
 * Starts `call` while another transaction holds the customer's row, waits until it queues on
 * that row, runs `meanwhile` with the holder (which may change the row), commits, and answers
 * what `call` answered: one interleaving of a request with whatever the holder stands for.
 */
async function whileCustomerHeld<T>(
  customerId: string,
  call: () => Promise<T>,
  meanwhile: (holder: PoolClient) => Promise<unknown>,
): Promise<T> {
  const holder = await harness.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM customers WHERE id = $1 FOR NO KEY UPDATE', [customerId]);
    const answer = call();
    await waitForLockWaiter(customerId);
    await meanwhile(holder);
    await holder.query('COMMIT');
    return await answer;
  } finally {
    holder.release();
  }
}

/** The customer deleted by the holder, as DELETE /v1/sdk/customers/{ref} marks it. */
const deleteCustomer = (customerId: string) => (holder: PoolClient) =>
  holder.query("UPDATE customers SET status = 'deleted' WHERE id = $1", [customerId]);

/** A checkout session of the customer's for `what`: by default a top-up of 250 credits for $20. */
async function openSession(
  call: Call,
  customerId: string,
  what: Json = { topup: { credits: 250, amount: 2000 } },
): Promise<Json> {
  return (await call('POST', '/v1/sdk/checkout-sessions', { customerRef: customerId, ...what })).body;
}

describe('money under concurrency', () => {
  it('a top-up session paid many times at once charges and credits exactly once', async () => {
    const { call, customer } = await seller();
    const session = await openSession(call, customer.reference);
    const answers = await times(AT_ONCE, () =>
      call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null),
    );
    expect(statuses(answers).filter((s) => s === 200)).toHaveLength(1);
    for (const a of answers.filter((x) => x.status !== 200)) {
      expect(a.status).toBe(409);
      expect(['checkout_session_closed', 'checkout_session_in_progress']).toContain(a.body.code);
    }
    const { rows } = await harness.pool.query<{ status: string }>(
      'SELECT status FROM payments WHERE customer_id = $1',
      [customer.reference],
    );
    expect(rows.map((r) => r.status)).toEqual(['succeeded']);
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}/balance`)).body.credits).toBe(250);
  });

  it('a declined top-up leaves the session payable, and the next attempt is counted apart', async () => {
    const { call, customer } = await seller();
    const session = await openSession(call, customer.reference, { topup: { credits: 10, amount: 500 } });
    const declined = await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.failsLater), null);
    expect(declined.status).toBe(402);
    const paid = await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null);
    expect(paid.status).toBe(200);
    const { rows } = await harness.pool.query<{ status: string; attempt: number }>(
      'SELECT status, attempt FROM payments WHERE customer_id = $1 ORDER BY attempt',
      [customer.reference],
    );
    expect(rows).toEqual([
      { status: 'failed', attempt: 0 },
      { status: 'succeeded', attempt: 1 },
    ]);
  });

  it('a plan session paid many times at once starts one purchase with one payment', async () => {
    const { call, customer } = await seller();
    const plan = await recurringPlan(call, 'Race tools', 900);
    const session = await openSession(call, customer.reference, { planRef: plan.reference });
    const answers = await times(AT_ONCE, () =>
      call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null),
    );
    expect(statuses(answers).filter((s) => s === 200)).toHaveLength(1);
    expect(statuses(answers).filter((s) => s !== 200 && s !== 409)).toEqual([]);
    const { rows } = await harness.pool.query<{ status: string }>(
      'SELECT status FROM payments WHERE customer_id = $1',
      [customer.reference],
    );
    expect(rows).toEqual([{ status: 'succeeded' }]);
    const purchases = (await call('GET', `/v1/sdk/purchases?customerRef=${customer.reference}`)).body.data;
    expect(purchases).toHaveLength(1);
  });

  it('a paid plan activated many times at once starts one purchase and charges once', async () => {
    const { call, customer } = await seller();
    const plan = await recurringPlan(call, 'Activate race', 700);
    expect(
      (
        await call(
          'POST',
          `/v1/sdk/customers/${customer.reference}/payment-methods`,
          card(SANDBOX_CARDS.succeeds),
        )
      ).status,
    ).toBe(201);
    const answers = await times(AT_ONCE, () =>
      call('POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef: plan.reference }),
    );
    expect(statuses(answers).filter((s) => s >= 500)).toEqual([]);
    const outcomes = answers.map((a) => a.body.status).sort();
    expect(outcomes.filter((o) => o === 'activated')).toHaveLength(1);
    expect(outcomes.filter((o) => o !== 'activated' && o !== 'already_active')).toEqual([]);
    const { rows } = await harness.pool.query<{ status: string; amount: number }>(
      'SELECT status, amount FROM payments WHERE customer_id = $1',
      [customer.reference],
    );
    expect(rows).toEqual([{ status: 'succeeded', amount: 700 }]);
  });

  it('an activation whose customer is deleted while it waits for the lock charges nothing', async () => {
    const { call, customer } = await seller();
    const plan = await recurringPlan(call, 'Delete race', 900);
    await call(
      'POST',
      `/v1/sdk/customers/${customer.reference}/payment-methods`,
      card(SANDBOX_CARDS.succeeds),
    );
    // The activation finds the customer, then waits for its row; the holder deletes it meanwhile.
    const answer = await whileCustomerHeld(
      customer.reference,
      () => call('POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef: plan.reference }),
      deleteCustomer(customer.reference),
    );
    expect(answer.status).toBe(404);
    expect(answer.body.code).toBe('customer_not_found');
    const payments = await harness.pool.query('SELECT id FROM payments WHERE customer_id = $1', [
      customer.reference,
    ]);
    expect(payments.rows).toEqual([]);
    const purchases = await harness.pool.query('SELECT id FROM purchases WHERE customer_id = $1', [
      customer.reference,
    ]);
    expect(purchases.rows).toEqual([]);
  });

  it('a top-up paid while its customer is deleted charges and credits nothing', async () => {
    const { call, customer } = await seller();
    const session = await openSession(call, customer.reference);
    // The processor's charges are watched (it still runs): a charge rolled back here would have
    // taken the money at the processor all the same.
    const charges = vi.spyOn(SandboxProcessor.prototype, 'charge');
    let calls: typeof charges.mock.calls = [];
    try {
      // The payment finds the customer, then waits for its row; the holder deletes it meanwhile.
      const answer = await whileCustomerHeld(
        customer.reference,
        () => call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null),
        deleteCustomer(customer.reference),
      );
      expect(answer.status).toBe(404);
      expect(answer.body.code).toBe('customer_not_found');
    } finally {
      calls = [...charges.mock.calls];
      charges.mockRestore();
    }
    const charged = calls.filter(([c]) => c.idempotencyKey.startsWith(customer.reference));
    expect(charged).toEqual([]);
    for (const table of ['payments', 'credit_ledger', 'payment_methods']) {
      const { rows } = await harness.pool.query(`SELECT id FROM ${table} WHERE customer_id = $1`, [
        customer.reference,
      ]);
      expect({ table, rows }).toEqual({ table, rows: [] });
    }
  });

  for (const kind of ['topup', 'plan'] as const)
    it(`a ${kind} session reaching its expiry while it is paid is paid, and not expired under the charge`, async () => {
      const { call, customer } = await seller();
      const session = await openSession(
        call,
        customer.reference,
        kind === 'plan' ? { planRef: (await recurringPlan(call, 'Late payer', 900)).reference } : undefined,
      );
      // The payer claims the session, then waits for the customer's row (attaching the card); its
      // time runs out meanwhile, and the scheduler's expiry pass runs.
      let expired = -1;
      const answer = await whileCustomerHeld(
        customer.reference,
        () => call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null),
        async () => {
          await harness.pool.query(
            "UPDATE checkout_sessions SET expires_at = now() - interval '1 second' WHERE id = $1",
            [session.id],
          );
          expired = await harness.controlPlane.checkout.expireDue();
        },
      );
      expect(answer.status).toBe(200);
      expect(expired).toBe(0);
      expect((await call('GET', `/v1/sdk/checkout-sessions/${session.id}`)).body.status).toBe('used');
      const { rows } = await harness.pool.query<{ status: string }>(
        'SELECT status FROM payments WHERE customer_id = $1',
        [customer.reference],
      );
      expect(rows).toEqual([{ status: 'succeeded' }]);
      const { rows: canceled } = await harness.pool.query(
        `SELECT id FROM outbox_events WHERE type IN ('payment.canceled', 'checkout_session.expired')
            AND payload->'data'->'object'->>'id' = $1`,
        [session.id],
      );
      expect(canceled).toEqual([]);
    });

  it('a customer deleted many times at once cancels its purchase once, and no 5xx', async () => {
    const { call, customer } = await seller();
    const plan = await recurringPlan(call, 'Delete many', 500);
    await call(
      'POST',
      `/v1/sdk/customers/${customer.reference}/payment-methods`,
      card(SANDBOX_CARDS.succeeds),
    );
    const purchase = (
      await call('POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef: plan.reference })
    ).body.purchaseRef;
    const answers = await times(AT_ONCE, () => call('DELETE', `/v1/sdk/customers/${customer.reference}`));
    expect(statuses(answers)).toEqual([200, ...Array(AT_ONCE - 1).fill(404)]);
    const { rows } = await harness.pool.query<{ type: string }>(
      `SELECT type FROM outbox_events WHERE payload->'data'->'object'->>'id' = $1 AND type = 'purchase.cancelled'`,
      [purchase],
    );
    expect(rows).toHaveLength(1);
    expect((await call('GET', `/v1/sdk/purchases/${purchase}`)).body.status).toBe('cancelled');
  });

  it('a customer deleted while its sessions are being paid: every charge on record, no 5xx', async () => {
    const { call, customer } = await seller();
    const sessions = await times(AT_ONCE, () => openSession(call, customer.reference));
    const charges = vi.spyOn(SandboxProcessor.prototype, 'charge');
    let calls: typeof charges.mock.calls = [];
    let pays: Array<{ status: number; body: Json }> = [];
    let deletes: Array<{ status: number; body: Json }> = [];
    try {
      // Every session paid at once; once the first payment is on record the deletions go in,
      // while the others are somewhere between their claim and their commit.
      const paying = Promise.all(
        sessions.map((s) => call('POST', `/checkout/${s.id}/pay`, card(SANDBOX_CARDS.succeeds), null)),
      );
      for (let i = 0; i < 400; i++) {
        const { rows } = await harness.pool.query('SELECT 1 FROM payments WHERE customer_id = $1', [
          customer.reference,
        ]);
        if (rows.length > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      deletes = await times(6, () => call('DELETE', `/v1/sdk/customers/${customer.reference}`));
      pays = await paying;
    } finally {
      calls = [...charges.mock.calls];
      charges.mockRestore();
    }
    expect(statuses(deletes)).toEqual([200, ...Array(5).fill(404)]);
    for (const a of pays.filter((x) => x.status !== 200))
      expect(['404 customer_not_found', '409 checkout_session_closed']).toContain(
        `${a.status} ${a.body.code}`,
      );
    const { rows: payments } = await harness.pool.query<{ status: string }>(
      'SELECT status FROM payments WHERE customer_id = $1',
      [customer.reference],
    );
    // Every charge the processor made is a succeeded payment here, and every 200 is one.
    const charged = calls.filter(([c]) => c.idempotencyKey.startsWith(customer.reference));
    expect(payments.map((p) => p.status)).toEqual(Array(charged.length).fill('succeeded'));
    expect(payments).toHaveLength(pays.filter((a) => a.status === 200).length);
    // Each payment's credits are on the ledger, and nothing else is.
    const { rows: ledger } = await harness.pool.query<{ total: number | null }>(
      'SELECT sum(amount)::int AS total FROM credit_ledger WHERE customer_id = $1',
      [customer.reference],
    );
    expect(ledger[0]?.total ?? 0).toBe(250 * payments.length);
    const { rows: used } = await harness.pool.query<{ id: string }>(
      "SELECT id FROM checkout_sessions WHERE customer_id = $1 AND status = 'used'",
      [customer.reference],
    );
    expect(used).toHaveLength(payments.length);
  });

  it('cards attached many times at once leave exactly one default, and no 5xx', async () => {
    const { call, customer } = await seller();
    const answers = await times(AT_ONCE, () =>
      call('POST', `/v1/sdk/customers/${customer.reference}/payment-methods`, card(SANDBOX_CARDS.succeeds)),
    );
    expect(statuses(answers)).toEqual(Array(AT_ONCE).fill(201));
    const methods = (await call('GET', `/v1/sdk/customers/${customer.reference}/payment-methods`)).body.data;
    expect(methods.filter((m: Json) => m.isDefault)).toHaveLength(1);
  });

  it('refunds fired at once never return more than the payment', async () => {
    const { call, customer } = await seller();
    const session = await openSession(call, customer.reference, { topup: { credits: 100, amount: 1000 } });
    expect(
      (await call('POST', `/checkout/${session.id}/pay`, card(SANDBOX_CARDS.succeeds), null)).status,
    ).toBe(200);
    const { rows } = await harness.pool.query<{ transaction_reference: string }>(
      'SELECT transaction_reference FROM payments WHERE customer_id = $1',
      [customer.reference],
    );
    const txn = rows[0]?.transaction_reference;
    const answers = await times(AT_ONCE, () =>
      call('POST', '/v1/ui/transactions/refunds', { originalTransactionId: txn, refundAmount: 300 }),
    );
    expect(statuses(answers)).toEqual([...Array(3).fill(202), ...Array(AT_ONCE - 3).fill(409)]);
    const { rows: refunded } = await harness.pool.query<{ total: number }>(
      `SELECT sum(r.amount)::int AS total FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.customer_id = $1`,
      [customer.reference],
    );
    expect(refunded[0]?.total).toBe(900);
  });

  it('debits fired at once never take the balance below zero', async () => {
    const { call, customer } = await seller();
    const granted = await call('POST', `/v1/sdk/customers/${customer.reference}/credits`, {
      kind: 'grant',
      amount: 50,
    });
    expect(granted.status).toBe(201);
    const answers = await times(AT_ONCE, () =>
      call('POST', `/v1/sdk/customers/${customer.reference}/credits`, { kind: 'debit', amount: 10 }),
    );
    expect(statuses(answers)).toEqual([...Array(5).fill(201), ...Array(AT_ONCE - 5).fill(409)]);
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}/balance`)).body.credits).toBe(0);
  });

  it('refuses a movement that would take the balance past 2^53 - 1 with 400, not 500', async () => {
    const { call, customer } = await seller();
    // A balance this large takes thousands of the largest grants; set it directly.
    expect(
      (await call('POST', `/v1/sdk/customers/${customer.reference}/credits`, { kind: 'grant', amount: 1 }))
        .status,
    ).toBe(201);
    await harness.pool.query('UPDATE credit_balances SET balance = $2 WHERE customer_id = $1', [
      customer.reference,
      Number.MAX_SAFE_INTEGER - 5,
    ]);
    const past = await call('POST', `/v1/sdk/customers/${customer.reference}/credits`, {
      kind: 'grant',
      amount: 10,
    });
    expect(past.status).toBe(400);
    expect(past.body.code).toBe('validation_failed');
    expect((await call('GET', `/v1/sdk/customers/${customer.reference}/balance`)).body.credits).toBe(
      Number.MAX_SAFE_INTEGER - 5,
    );
  });
});
