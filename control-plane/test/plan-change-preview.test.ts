import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';

/**
 * Previews of plan changes: what a switch or a cancellation would charge and refund, shown before
 * the customer confirms, and the change confirmed with the preview's proration date charging and
 * refunding exactly that, however long (within 15 minutes) the customer took to confirm. Prices
 * are large so that ten minutes move the credit by many cents (March 2026 has 31 days).
 */
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

const at = (iso: string) => clock.set(new Date(iso));
const MONTH_MS = 31 * 86_400_000;

async function seller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const product = (await api('POST', '/v1/ui/products', { name: `${name} tools` })).body;
  const plan = async (planName: string, price: number) => {
    const created = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: planName,
      type: 'recurring',
      price,
      billingCycle: 'monthly',
    });
    expect(created.status).toBe(201);
    return created.body.id as string;
  };
  const customer = async (withCard = true) => {
    const ref = (await api('POST', '/v1/sdk/customers', {})).body.reference as string;
    if (withCard)
      expect(
        (
          await api('POST', `/v1/sdk/customers/${ref}/payment-methods`, {
            card: { number: SANDBOX_CARDS.succeeds, expMonth: 12, expYear: 2035, cvc: '123' },
          })
        ).status,
      ).toBe(201);
    return ref;
  };
  const refundsOf = async (purchaseRef: string) =>
    (
      await harness.pool.query(
        `SELECT r.amount, r.source FROM refunds r JOIN payments p ON p.id = r.payment_id
          WHERE p.purchase_id = $1 ORDER BY r.created_at, r.id`,
        [purchaseRef],
      )
    ).rows;
  return { api, plan, customer, refundsOf };
}

describe('previewing a plan switch', () => {
  it('shows the first invoice and is charged exactly that when confirmed ten minutes later', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Previewer');
    const basic = await s.plan('Basic', 10_000_000);
    const pro = await s.plan('Pro', 20_000_000);
    const customer = await s.customer();
    const first = (await s.api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: basic })).body;
    expect(first.status).toBe('activated');

    at('2026-03-11T00:00:00.000Z');
    const preview = await s.api('POST', '/v1/sdk/activate/preview', { customerRef: customer, planRef: pro });
    expect(preview.status).toBe(200);
    // 10,000,000 × 21/31 = 6,774,193.55 → 6,774,194 credited; 20,000,000 − 6,774,194 due.
    expect(preview.body).toEqual({
      currency: 'usd',
      prorationDate: '2026-03-11T00:00:00.000Z',
      fromPlan: basic,
      toPlan: pro,
      credit: 6_774_194,
      lines: [
        { kind: 'base', description: 'Pro (2026-03-11 – 2026-04-11)', amount: 20_000_000 },
        {
          kind: 'proration',
          description: 'Unused time on Basic (2026-03-11 – 2026-04-01)',
          amount: -6_774_194,
        },
      ],
      dueNow: 13_225_806,
      refund: 0,
      checkoutRequired: false,
    });
    // Nothing changed: the purchase is the same, no payment was made.
    expect((await s.api('GET', `/v1/sdk/purchases/${first.purchaseRef}`)).body.status).toBe('active');

    // Ten minutes later the credit would be 10,000,000 × (21 days − 10 min)/31 days = 6,771,953.
    clock.advance(10 * 60_000);
    const confirmed = await s.api('POST', '/v1/sdk/activate', {
      customerRef: customer,
      planRef: pro,
      prorationDate: preview.body.prorationDate,
    });
    expect(confirmed.body).toMatchObject({
      status: 'activated',
      proration: { credit: 6_774_194, appliedToInvoice: 6_774_194, refunded: 0 },
    });
    const invoice = (await s.api('GET', `/v1/sdk/invoices/${confirmed.body.proration.invoiceId}`)).body;
    expect(invoice).toMatchObject({
      total: preview.body.dueNow,
      amountPaid: preview.body.dueNow,
      status: 'paid',
    });
    expect(invoice.lines.map((l: Json) => [l.kind, l.amount])).toEqual(
      preview.body.lines.map((l: Json) => [l.kind, l.amount]),
    );
  });

  it('shows a downgrade refunding what the new invoice cannot absorb, and refunds exactly that', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Downgrader');
    const pro = await s.plan('Pro', 20_000_000);
    const basic = await s.plan('Basic', 1_000_000);
    const customer = await s.customer();
    const first = (await s.api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: pro })).body;

    at('2026-03-16T12:00:00.000Z');
    const preview = (
      await s.api('POST', '/v1/sdk/activate/preview', { customerRef: customer, planRef: basic })
    ).body;
    // 20,000,000 × 15.5/31 = 10,000,000 credited; the Basic invoice takes 1,000,000 of it.
    expect(preview).toMatchObject({ credit: 10_000_000, dueNow: 0, refund: 9_000_000 });
    expect(preview.lines.map((l: Json) => [l.kind, l.amount])).toEqual([
      ['base', 1_000_000],
      ['proration', -10_000_000],
      ['proration_refund', 9_000_000],
    ]);
    clock.advance(14 * 60_000);
    const confirmed = await s.api('POST', '/v1/sdk/activate', {
      customerRef: customer,
      planRef: basic,
      prorationDate: preview.prorationDate,
    });
    expect(confirmed.body.proration).toMatchObject({ credit: 10_000_000, refunded: 9_000_000 });
    expect(await s.refundsOf(first.purchaseRef)).toEqual([{ amount: 9_000_000, source: 'proration' }]);
  });

  it('refuses a proration date from the future or from before the window, and says when checkout is needed', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Window');
    const basic = await s.plan('Basic', 3000);
    const pro = await s.plan('Pro', 6000);
    const customer = await s.customer();
    await s.api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: basic });
    at('2026-03-11T00:00:00.000Z');
    const now = clock.now().getTime();
    for (const date of [new Date(now + 1000), new Date(now - 15 * 60_000 - 1), new Date(now - MONTH_MS)]) {
      const refused = await s.api('POST', '/v1/sdk/activate', {
        customerRef: customer,
        planRef: pro,
        prorationDate: date.toISOString(),
      });
      expect(refused.status).toBe(400);
      expect(refused.body.errors[0].path).toBe('/prorationDate');
    }
    expect(
      (
        await s.api('POST', '/v1/sdk/activate', {
          customerRef: customer,
          planRef: pro,
          prorationDate: 'yesterday',
        })
      ).status,
    ).toBe(400);
    // Previewing the plan already held is a conflict; an unknown plan 404.
    expect(
      (await s.api('POST', '/v1/sdk/activate/preview', { customerRef: customer, planRef: basic })).status,
    ).toBe(409);
    expect(
      (await s.api('POST', '/v1/sdk/activate/preview', { customerRef: customer, planRef: 'plan_nope' }))
        .status,
    ).toBe(404);
    // A customer with no card goes through checkout, which prorates when paid.
    const cardless = await s.customer(false);
    expect(
      (await s.api('POST', '/v1/sdk/activate/preview', { customerRef: cardless, planRef: pro })).body,
    ).toMatchObject({ checkoutRequired: true, dueNow: 6000, credit: 0, fromPlan: null });
  });
});

describe('cancelling now with the unused time refunded', () => {
  it('previews the refund, and twelve concurrent cancellations refund it once', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Canceller');
    const pro = await s.plan('Pro', 6000);
    const customer = await s.customer();
    const purchase = (await s.api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: pro })).body
      .purchaseRef as string;

    at('2026-03-21T00:00:00.000Z');
    const preview = (await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel/preview`)).body;
    // 6000 × 11/31 = 2129.03 → 2129.
    expect(preview).toEqual({
      currency: 'usd',
      prorationDate: '2026-03-21T00:00:00.000Z',
      fromPlan: pro,
      toPlan: null,
      credit: 2129,
      lines: [
        {
          kind: 'proration_refund',
          description: 'Refunded: unused time on Pro (2026-03-21 – 2026-04-01)',
          amount: 2129,
        },
      ],
      dueNow: 0,
      refund: 2129,
      checkoutRequired: false,
    });
    expect(
      (await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, { atPeriodEnd: true, prorate: true }))
        .status,
    ).toBe(400);

    clock.advance(5 * 60_000);
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, {
          prorate: true,
          prorationDate: preview.prorationDate,
        }),
      ),
    );
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(11);
    expect(ok[0]?.body).toMatchObject({ status: 'cancelled', refund: { amount: 2129 } });
    expect(await s.refundsOf(purchase)).toEqual([{ amount: 2129, source: 'proration' }]);
    // Cancelled, nothing is left to refund.
    expect((await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel/preview`)).status).toBe(409);
  });

  it('cancels now without a refund unless prorate is asked for', async () => {
    at('2026-03-01T00:00:00.000Z');
    const s = await seller('Plain canceller');
    const pro = await s.plan('Pro', 6000);
    const customer = await s.customer();
    const purchase = (await s.api('POST', '/v1/sdk/activate', { customerRef: customer, planRef: pro })).body
      .purchaseRef as string;
    at('2026-03-21T00:00:00.000Z');
    const cancelled = await s.api('POST', `/v1/sdk/purchases/${purchase}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.refund).toBeUndefined();
    expect(await s.refundsOf(purchase)).toEqual([]);
  });
});
