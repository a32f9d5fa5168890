import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * The whole upcoming invoice (issue 64): the usage so far beside what the invoice closing the
 * period charges in advance (the next period's price; at a trial's end the first period's and the
 * deferred setup fee), and `amountDue` equal to the total of the invoice the scheduler then issues,
 * to the cent, when nothing more is used.
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

async function subscriber(name: string, plan: Json) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const product = (await api('POST', '/v1/ui/products', { name: 'Tools' })).body.id as string;
  const planRef = (
    await api('POST', `/v1/ui/products/${product}/plans`, { name: 'Plan', billingCycle: 'monthly', ...plan })
  ).body.id as string;
  const customer = (await api('POST', '/v1/sdk/customers', {})).body.reference as string;
  await api('POST', `/v1/sdk/customers/${customer}/payment-methods`, {
    card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
  });
  const purchase = (await api('POST', '/v1/sdk/activate', { customerRef: customer, planRef })).body
    .purchaseRef as string;
  const upcoming = async () => (await api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${purchase}`)).body;
  const invoices = async () =>
    (await api('GET', `/v1/sdk/invoices?purchaseRef=${purchase}&limit=100`)).body.data as Json[];
  return { api, product, customer, purchase, upcoming, invoices };
}

describe('the upcoming invoice', () => {
  it('adds the next period’s price to the usage so far, and the renewal invoice charges exactly that', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await subscriber('Hybrid next', {
      type: 'hybrid',
      basePrice: 1000,
      unitAmount: 0.2,
      freeUnits: 10,
    });
    expect(
      (await s.api('POST', '/v1/sdk/usages', { customerRef: s.customer, productRef: s.product, units: 1010 }))
        .status,
    ).toBe(202);
    await harness.settled();
    clock.set(new Date('2026-03-31T23:00:00.000Z'));
    // 1,010 calls, 10 free: 1,000 × 0.2 = 200 so far; April's price 1,000 in advance.
    const upcoming = await s.upcoming();
    expect(upcoming).toMatchObject({
      total: 200,
      renewal: {
        chargedAt: '2026-04-01T00:00:00.000Z',
        periodStart: '2026-04-01T00:00:00.000Z',
        periodEnd: '2026-05-01T00:00:00.000Z',
        base: 1000,
        setupFee: 0,
      },
      amountDue: 1200,
    });
    clock.set(new Date('2026-04-01T00:06:00.000Z'));
    await harness.controlPlane.scheduler.runDue();
    const renewal = (await s.invoices()).find((i) => i.billingReason === 'renewal');
    expect(renewal).toMatchObject({ total: upcoming.amountDue, status: 'paid' });

    // Cancelling at the period's end leaves only the usage to come.
    await s.api('POST', `/v1/sdk/purchases/${s.purchase}/cancel`, { atPeriodEnd: true });
    expect(await s.upcoming()).toMatchObject({ total: 0, renewal: null, amountDue: 0 });
  });

  it('charges a trial’s first period and its deferred setup fee at its end, as previewed', async () => {
    clock.set(new Date('2026-03-01T00:00:00.000Z'));
    const s = await subscriber('Trial next', { type: 'recurring', price: 2000, trialDays: 7, setupFee: 500 });
    const upcoming = await s.upcoming();
    expect(upcoming).toMatchObject({
      total: 0,
      renewal: {
        chargedAt: '2026-03-08T00:00:00.000Z',
        periodStart: '2026-03-08T00:00:00.000Z',
        periodEnd: '2026-04-08T00:00:00.000Z',
        base: 2000,
        setupFee: 500,
      },
      amountDue: 2500,
    });
    clock.set(new Date('2026-03-08T00:06:00.000Z'));
    await harness.controlPlane.scheduler.runDue();
    const converted = (await s.invoices()).find((i) => i.billingReason === 'trial_conversion');
    expect(converted).toMatchObject({ total: upcoming.amountDue, status: 'paid' });
    expect(converted?.lines.map((l: Json) => [l.kind, l.amount])).toEqual([
      ['base', 2000],
      ['setup_fee', 500],
    ]);
  });
});
