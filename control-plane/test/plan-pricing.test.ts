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
      { upTo: 1000, unitAmount: 0, flatAmount: 0 },
      { upTo: 10000, unitAmount: 0.1, flatAmount: 500 },
      { upTo: null, unitAmount: 0.05, flatAmount: 0 },
    ]);
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
    expect(toUnit.body).toMatchObject({ tiers: null, unitAmount: 0.001 });
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
