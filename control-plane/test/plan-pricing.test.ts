import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';

/** Usage pricing fields of plans through the API, stored exactly in PostgreSQL. */
let harness: TestControlPlane;
let api: ReturnType<typeof injectClient>;
let productId: string;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
  const created = await harness.controlPlane.providers.create({ displayName: 'Pricing Co' });
  api = injectClient(harness.controlPlane, created.sandboxKey);
  productId = (await api('POST', '/v1/ui/products', { name: 'Search' })).body.id;
});
afterAll(() => harness?.close());

describe('plan pricing models', () => {
  it('keeps sub-cent unit amounts and tiers exactly, and changes them by PATCH', async () => {
    const perUnit = await api('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Metered',
      type: 'usage-based',
      unitAmount: 0.2,
      freeUnits: 1000,
    });
    expect(perUnit.status).toBe(201);
    expect(perUnit.body).toMatchObject({
      unitAmount: 0.2,
      unitAmountDecimal: '0.2',
      price: 0,
      tiers: null,
      tiersMode: null,
      packageSize: null,
    });
    const { rows } = await harness.pool.query('SELECT unit_amount::text FROM plans WHERE id = $1', [
      perUnit.body.id,
    ]);
    expect(rows[0].unit_amount).toBe('0.200000000000');

    const tiered = await api('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Tiered',
      type: 'hybrid',
      basePrice: 900,
      tiersMode: 'graduated',
      tiers: [
        { upTo: 1000, unitAmount: 0 },
        { upTo: 10000, unitAmount: '0.10', flatAmount: 500 },
        { upTo: null, unitAmount: 0.05 },
      ],
    });
    expect(tiered.status).toBe(201);
    expect(tiered.body.tiers).toEqual([
      { upTo: 1000, unitAmount: 0, unitAmountDecimal: '0', flatAmount: 0 },
      { upTo: 10000, unitAmount: 0.1, unitAmountDecimal: '0.1', flatAmount: 500 },
      { upTo: null, unitAmount: 0.05, unitAmountDecimal: '0.05', flatAmount: 0 },
    ]);
    expect(tiered.body.unitAmountDecimal).toBeNull();
    const read = await api('GET', `/v1/ui/plans/${tiered.body.id}`);
    expect(read.body.tiers).toEqual(tiered.body.tiers);

    const volume = await api('PATCH', `/v1/ui/plans/${tiered.body.id}`, { tiersMode: 'volume' });
    expect(volume.status).toBe(200);
    expect(volume.body.tiersMode).toBe('volume');
    const toUnit = await api('PATCH', `/v1/ui/plans/${tiered.body.id}`, {
      tiers: null,
      tiersMode: null,
      unitAmount: '0.001',
    });
    expect(toUnit.status).toBe(200);
    expect(toUnit.body).toMatchObject({ tiers: null, unitAmount: 0.001, unitAmountDecimal: '0.001' });

    // 27 significant digits: the JSON number is the nearest double, the decimal string exact.
    const exact = '123456789012345.123456789012';
    const fine = await api('PATCH', `/v1/ui/plans/${tiered.body.id}`, { unitAmount: exact });
    expect(fine.status).toBe(200);
    expect(fine.body.unitAmountDecimal).toBe(exact);
    expect(fine.body.unitAmount).toBe(Number(exact));
    expect((await api('GET', `/v1/ui/plans/${tiered.body.id}`)).body.unitAmountDecimal).toBe(exact);
  });

  it('answers 400 naming each field that breaks a pricing rule', async () => {
    const bad = await api('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Bad',
      type: 'usage-based',
      tiersMode: 'volume',
      tiers: [
        { upTo: 100, unitAmount: 1 },
        { upTo: 100, unitAmount: 0.1 + 0.2 },
      ],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('validation_failed');
    expect(bad.body.errors.map((e: { path: string }) => e.path)).toEqual([
      '/tiers/1/upTo',
      '/tiers/1/upTo',
      '/tiers/1/unitAmount',
    ]);
    const recurring = await api('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Flat',
      type: 'recurring',
      price: 900,
      packageSize: 10,
    });
    expect(recurring.status).toBe(400);
    expect(recurring.body.errors).toEqual([
      expect.objectContaining({
        path: '/packageSize',
        message: 'only usage-based and hybrid plans price usage',
      }),
    ]);
    const negative = await api('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Neg',
      type: 'usage-based',
      unitAmount: -1,
    });
    expect(negative.status).toBe(400);
  });
});

describe('the upcoming invoice', () => {
  it('prices the usage of the current period from ClickHouse to the cent, free units first', async () => {
    const product = (await api('POST', '/v1/ui/products', { name: 'Graduated', reference: 'graduated' }))
      .body;
    const plan = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Graduated',
      type: 'usage-based',
      freeUnits: 100,
      tiersMode: 'graduated',
      tiers: [
        { upTo: 1000, unitAmount: 0 },
        { upTo: 10000, unitAmount: 0.1, flatAmount: 500 },
        { upTo: null, unitAmount: 0.05 },
      ],
    });
    expect(plan.status).toBe(201);
    await api('POST', '/v1/sdk/customers', { externalRef: 'preview-user' });
    // Usage priced above zero needs a way to pay, as any paid plan does.
    const unpaid = await api('POST', '/v1/sdk/activate', {
      customerRef: 'preview-user',
      planRef: plan.body.id,
    });
    expect(unpaid.body.status).toBe('payment_required');
    const card = await api('POST', '/v1/sdk/customers/preview-user/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    expect(card.status).toBe(201);
    const activated = await api('POST', '/v1/sdk/activate', {
      customerRef: 'preview-user',
      planRef: plan.body.id,
    });
    expect(activated.status).toBe(200);
    expect(activated.body.status).toBe('activated');
    const purchaseRef = activated.body.purchaseRef as string;

    const empty = await api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${purchaseRef}`);
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({
      usage: { units: 0, billableUnits: 0 },
      lines: [],
      total: 0,
      currency: 'usd',
    });

    // 12,445 units reported in two parts; the first 100 are free: 12,345 billable, the README's example.
    for (const units of [10_000, 2_445])
      expect(
        (await api('POST', '/v1/sdk/usages', { customerRef: 'preview-user', productRef: 'graduated', units }))
          .status,
      ).toBe(202);
    await harness.settled();
    const preview = await api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${purchaseRef}`);
    expect(preview.body.usage).toEqual({ units: 12_445, freeUnits: 100, billableUnits: 12_345 });
    expect(preview.body.lines.map((l: { amount: number }) => l.amount)).toEqual([0, 900, 500, 117]);
    expect(preview.body.total).toBe(1517);

    // Volume pricing of the same usage: all 12,345 at 0.05 = 617.25 → 617.
    await api('PATCH', `/v1/ui/plans/${plan.body.id}`, { tiersMode: 'volume' });
    expect((await api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${purchaseRef}`)).body.total).toBe(617);

    expect((await api('GET', '/v1/sdk/invoices/upcoming?purchaseRef=pur_missing')).status).toBe(404);
    expect((await api('GET', '/v1/sdk/invoices/upcoming')).status).toBe(400);
  });
});
