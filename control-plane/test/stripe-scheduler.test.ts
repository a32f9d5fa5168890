import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { activatedPurchase, connect, liveSeller } from '../../test/helpers/stripe-seller';
import { MovableClock } from '../src/clock';

/**
 * The billing scheduler's pass when one provider's Stripe cannot be used: the provider
 * disconnected it with a refund still pending and a subscription still running. Its work waits
 * (and is logged) while every other provider's renewals, refunds and jobs go on. A harness of its
 * own, so the only pending refunds are this test's.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let harness: TestControlPlane;
let mock: StripeMock;
beforeAll(async () => {
  mock = await startStripeMock({ payments: 'succeed', refunds: 'pending' });
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
}, 600_000);
afterAll(async () => {
  await harness?.close();
  await mock?.close();
});

const paymentsOf = async (purchase: string) =>
  (
    await harness.pool.query<{ status: string }>(
      'SELECT status FROM payments WHERE purchase_id = $1 ORDER BY created_at',
      [purchase],
    )
  ).rows.map((r) => r.status);
const refundStatus = async (payment: string) =>
  (
    await harness.pool.query<{ status: string }>('SELECT status FROM refunds WHERE payment_id = $1', [
      payment,
    ])
  ).rows[0]?.status;

describe("one provider's Stripe gone", () => {
  it('holds up neither the other providers’ renewals nor their refunds', async () => {
    // June 1: both sell Pro (1000 a month) through Stripe; each refunds 400 of a payment, and
    // Stripe leaves both refunds pending. The gone one's refund is the older.
    const gone = await liveSeller(harness, 'Disconnected');
    const goneBought = await activatedPurchase(harness, gone);
    const stays = await liveSeller(harness, 'Still connected');
    const staysBought = await activatedPurchase(harness, stays);
    for (const [seller, bought] of [
      [gone, goneBought],
      [stays, staysBought],
    ] as const) {
      const refund = await seller.live('POST', '/v1/ui/transactions/refunds', {
        originalTransactionId: bought.payment,
        refundAmount: 400,
      });
      expect(refund.status).toBe(202);
    }
    expect((await gone.live('DELETE', '/v1/ui/processors/stripe')).body).toEqual({ connected: false });

    // July 1, past both periods' end: one pass.
    clock.set(new Date('2026-07-01T10:00:00.000Z'));
    const from = mock.requests.length;
    await harness.controlPlane.scheduler.runDue();
    const asked = mock.requests.slice(from);
    // The connected provider's refund was asked after, and its subscription renewed through Stripe.
    expect(asked.filter((r) => r.method === 'GET' && r.path.startsWith('/v1/refunds/'))).toHaveLength(1);
    expect(await paymentsOf(staysBought.purchase)).toEqual(['succeeded', 'succeeded']);
    // The disconnected one's waits: its refund pending, its renewal not charged anywhere.
    expect(await refundStatus(goneBought.payment)).toBe('pending');
    expect(await refundStatus(staysBought.payment)).toBe('pending');
    expect(
      asked.filter((r) => r.path === '/v1/payment_intents').map((r) => r.params['metadata[purchase]']),
    ).toEqual([staysBought.purchase]);
    expect(await paymentsOf(goneBought.purchase)).toEqual(['succeeded']);

    // Stripe connected again: the next pass renews the waiting subscription and asks its refund.
    await connect(gone);
    const again = mock.requests.length;
    await harness.controlPlane.scheduler.runDue();
    const askedAgain = mock.requests.slice(again);
    expect(await paymentsOf(goneBought.purchase)).toEqual(['succeeded', 'succeeded']);
    expect(await paymentsOf(staysBought.purchase)).toEqual(['succeeded', 'succeeded']);
    expect(askedAgain.filter((r) => r.method === 'GET' && r.path.startsWith('/v1/refunds/'))).toHaveLength(2);
  });
});
