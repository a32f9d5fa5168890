import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Why customers cancel (docs/analytics.md), on real PostgreSQL: cancellations asked for through
 * the API and made by dunning, counted by reason and feedback over a window and per product,
 * reactivated ones left out, and the newest comments, as `GET /v1/ui/analytics/cancellations`
 * answers them.
 */
const clock = new MovableClock(new Date('2026-04-01T00:00:00.000Z'));
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;
const HOUR = 3_600_000;

describe('cancellation analytics', () => {
  it('counts cancellations by reason and feedback, per window and product, with the newest comments', async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Churn Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    const plan = async (productName: string) => {
      const product = (await api('POST', '/v1/ui/products', { name: productName })).body.id as string;
      const id = (
        await api('POST', `/v1/ui/products/${product}/plans`, {
          name: 'Monthly',
          type: 'recurring',
          price: 1000,
        })
      ).body.id as string;
      return { product, plan: id };
    };
    const maps = await plan('Maps');
    const search = await plan('Search');
    let n = 0;
    const buyer = async (planId: string, card: string = SANDBOX_CARDS.succeeds) => {
      n++;
      await api('POST', '/v1/sdk/customers', { externalRef: `c${n}` });
      await api('POST', `/v1/sdk/customers/c${n}/payment-methods`, {
        card: { number: card, expMonth: 12, expYear: 2035, cvc: '123' },
      });
      return (await api('POST', '/v1/sdk/activate', { customerRef: `c${n}`, planRef: planId })).body
        .purchaseRef as string;
    };
    const cancel = (ref: string, details?: Json, atPeriodEnd = true) =>
      api('POST', `/v1/sdk/purchases/${ref}/cancel`, { atPeriodEnd, cancellationDetails: details });

    // Before the window: not counted.
    await cancel(await buyer(maps.plan), { feedback: 'unused' });
    clock.set(new Date('2026-04-10T00:00:00.000Z'));
    const windowFrom = clock.now().toISOString();
    await cancel(await buyer(maps.plan), { feedback: 'too_expensive', comment: 'Half the price and I stay' });
    clock.advance(HOUR);
    await cancel(await buyer(maps.plan), { feedback: 'too_expensive' }, false);
    clock.advance(HOUR);
    await cancel(await buyer(search.plan), { feedback: 'switched_service', comment: 'Went in-house' });
    clock.advance(HOUR);
    await cancel(await buyer(search.plan));
    // Reactivated: the customer stayed.
    const stayed = await buyer(maps.plan);
    await cancel(stayed, { feedback: 'missing_features', comment: 'Needs exports' });
    expect((await api('POST', `/v1/sdk/purchases/${stayed}/reactivate`)).status).toBe(200);
    // A card that fails from the renewal on: dunning cancels it within the window.
    const failing = await buyer(maps.plan);
    await api('POST', `/v1/sdk/customers/c${n}/payment-methods`, {
      card: { number: SANDBOX_CARDS.failsLater, expMonth: 12, expYear: 2035, cvc: '123' },
    });
    clock.set(new Date('2026-05-10T04:00:00.000Z'));
    for (const hours of [0, 24, 72, 168]) {
      clock.advance(hours * HOUR);
      await harness.controlPlane.scheduler.runDue();
    }
    expect((await api('GET', `/v1/sdk/purchases/${failing}`)).body.cancellationDetails).toMatchObject({
      reason: 'payment_failed',
    });
    const windowTo = new Date(clock.now().getTime() + 1000).toISOString();

    const report = (query: string) => api('GET', `/v1/ui/analytics/cancellations?${query}`);
    const all = (await report(`from=${windowFrom}&to=${windowTo}`)).body;
    expect(all).toMatchObject({ total: 5, requested: 4, paymentFailed: 1, productId: null });
    expect(all.byFeedback.slice(0, 4)).toEqual([
      { feedback: 'too_expensive', count: 2, shareBasisPoints: 5000 },
      { feedback: 'switched_service', count: 1, shareBasisPoints: 2500 },
      { feedback: null, count: 1, shareBasisPoints: 2500 },
      { feedback: 'missing_features', count: 0, shareBasisPoints: 0 },
    ]);
    expect(all.byFeedback).toHaveLength(9);
    expect(all.comments.map((c: Json) => [c.feedback, c.comment])).toEqual([
      ['switched_service', 'Went in-house'],
      ['too_expensive', 'Half the price and I stay'],
    ]);
    // One product's.
    const searchOnly = (await report(`from=${windowFrom}&to=${windowTo}&productRef=${search.product}`)).body;
    expect(searchOnly).toMatchObject({ total: 2, requested: 2, paymentFailed: 0, productId: search.product });
    // The default window is the 30 days before now: the dunning cancellation only.
    clock.advance(60_000);
    expect((await report('')).body).toMatchObject({ total: 1, paymentFailed: 1 });
    // Bad windows and products.
    expect((await report(`from=${windowTo}&to=${windowFrom}`)).status).toBe(400);
    expect((await report('from=yesterday')).status).toBe(400);
    expect((await report('productRef=prd_nothing')).status).toBe(404);
    // Another provider sees none of it.
    const other = injectClient(
      harness.controlPlane,
      (await harness.controlPlane.providers.create({ displayName: 'Other' })).sandboxKey,
    );
    expect(
      (await other('GET', `/v1/ui/analytics/cancellations?from=${windowFrom}&to=${windowTo}`)).body.total,
    ).toBe(0);
  });
});
