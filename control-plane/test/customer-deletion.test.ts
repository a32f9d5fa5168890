import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Deleting a customer ends what it had in force: its purchases are cancelled in the deletion's
 * transaction, and the billing clock charges it no more. Real PostgreSQL; the sandbox processor
 * stands in for the card network.
 */
const clock = new MovableClock(new Date('2026-03-10T09:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

async function seller() {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Leaver' });
  return { api: injectClient(harness.controlPlane, sandboxKey) };
}

const purchaseRows = async (customerId: string) =>
  (
    await harness.pool.query<{ id: string; status: string; ended_at: Date | null }>(
      'SELECT id, status, ended_at FROM purchases WHERE customer_id = $1 ORDER BY id',
      [customerId],
    )
  ).rows;

describe('deleting a customer', () => {
  it('cancels every purchase in force at once, and no renewal charges the card after', async () => {
    const { api } = await seller();
    const paid = (await api('POST', '/v1/ui/products', { name: 'Paid tools' })).body;
    const free = (await api('POST', '/v1/ui/products', { name: 'Free tools' })).body;
    const monthly = (
      await api('POST', `/v1/ui/products/${paid.id}/plans`, { name: 'Pro', type: 'recurring', price: 900 })
    ).body;
    const gratis = (
      await api('POST', `/v1/ui/products/${free.id}/plans`, { name: 'Free', type: 'recurring', price: 0 })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', {})).body;
    const card = { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' };
    await api('POST', `/v1/sdk/customers/${customer.reference}/payment-methods`, { card });
    for (const plan of [monthly, gratis]) {
      const activation = await api('POST', '/v1/sdk/activate', {
        customerRef: customer.reference,
        planRef: plan.reference,
      });
      expect(activation.body.status).toBe('activated');
    }
    expect((await purchaseRows(customer.reference)).map((p) => p.status)).toEqual(['active', 'active']);

    clock.set(new Date('2026-03-20T09:00:00.000Z'));
    const deleted = await api('DELETE', `/v1/sdk/customers/${customer.reference}`);
    expect(deleted.status).toBe(200);
    const ended = await purchaseRows(customer.reference);
    expect(ended.map((p) => p.status)).toEqual(['cancelled', 'cancelled']);
    expect(ended.map((p) => p.ended_at?.toISOString())).toEqual([
      '2026-03-20T09:00:00.000Z',
      '2026-03-20T09:00:00.000Z',
    ]);
    // Each purchase's cancellation, then the customer's deletion, in the outbox's order.
    const { rows: events } = await harness.pool.query<{ type: string }>(
      `SELECT type FROM outbox_events WHERE payload->'data'->'object'->>'id' = ANY($1)
         AND type IN ('purchase.cancelled', 'customer.deleted') ORDER BY created_at, id`,
      [[...ended.map((p) => p.id), customer.reference]],
    );
    expect(events.map((e) => e.type)).toEqual([
      'purchase.cancelled',
      'purchase.cancelled',
      'customer.deleted',
    ]);

    // Past the paid plan's period end and the next: nothing is renewed or charged.
    clock.set(new Date('2026-05-11T09:00:00.000Z'));
    await harness.controlPlane.scheduler.runDue();
    const { rows: payments } = await harness.pool.query<{ amount: number; reason: string }>(
      'SELECT amount, reason FROM payments WHERE customer_id = $1 ORDER BY created_at, id',
      [customer.reference],
    );
    expect(payments).toEqual([{ amount: 900, reason: 'first_payment' }]);
    expect((await purchaseRows(customer.reference)).map((p) => p.status)).toEqual(['cancelled', 'cancelled']);
  });

  it('expires its open checkout sessions: their links charge nothing after', async () => {
    const { api } = await seller();
    const customer = (await api('POST', '/v1/sdk/customers', {})).body;
    const topUp = (
      await api('POST', '/v1/sdk/checkout-sessions', {
        customerRef: customer.reference,
        topup: { credits: 100, amount: 1000 },
      })
    ).body;
    expect(topUp.status).toBe('active');

    expect((await api('DELETE', `/v1/sdk/customers/${customer.reference}`)).status).toBe(200);
    expect((await api('GET', `/v1/sdk/checkout-sessions/${topUp.id}`)).body.status).toBe('expired');
    const card = { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' };
    const paid = await api('POST', `/checkout/${topUp.id}/pay`, { card }, null);
    expect(paid.status).toBe(409);
    expect(paid.body.code).toBe('checkout_session_closed');
    const { rows: payments } = await harness.pool.query('SELECT id FROM payments WHERE customer_id = $1', [
      customer.reference,
    ]);
    expect(payments).toEqual([]);
    // The session's expiry and its payment's cancellation, then the customer's deletion.
    const { rows: events } = await harness.pool.query<{ type: string; reason: string | null }>(
      `SELECT type, payload->'data'->'object'->>'cancellation_reason' AS reason FROM outbox_events
        WHERE payload->'data'->'object'->>'id' = ANY($1)
          AND type IN ('checkout_session.expired', 'payment.canceled', 'customer.deleted')
        ORDER BY created_at, id`,
      [[topUp.id, customer.reference]],
    );
    expect(events).toEqual([
      { type: 'checkout_session.expired', reason: null },
      { type: 'payment.canceled', reason: 'customer_deleted' },
      { type: 'customer.deleted', reason: null },
    ]);
  });

  it('deletes a customer with no purchases as before', async () => {
    const { api } = await seller();
    const customer = (await api('POST', '/v1/sdk/customers', {})).body;
    expect((await api('DELETE', `/v1/sdk/customers/${customer.reference}`)).status).toBe(200);
    expect((await api('GET', `/v1/sdk/customers/${customer.reference}`)).status).toBe(404);
  });
});
