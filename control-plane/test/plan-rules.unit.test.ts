import { describe, expect, it } from 'vitest';
import { slugify } from '../src/modules/mcp-servers/service';
import {
  currencySymbol,
  isMetered,
  type PlanSettings,
  planProblems,
  pricingOf,
  requiresPayment,
} from '../src/modules/plans/rules';

const base: PlanSettings = {
  name: 'P',
  description: null,
  type: 'recurring',
  price: 0,
  basePrice: 0,
  setupFee: 0,
  currency: 'usd',
  billingCycle: 'monthly',
  billingIntervalDays: null,
  billingModel: 'pre-paid',
  creditsPerUnit: 1,
  freeUnits: 0,
  limit: null,
  trialDays: 0,
  rolloverUnusedUnits: false,
  autoRenew: true,
  status: 'active',
  maxActiveUsers: null,
  accessExpiryDays: null,
  isDefault: false,
  limits: {},
  features: {},
  metadata: {},
  usageTracking: null,
  unitAmount: null,
  tiers: null,
  tiersMode: null,
  packageSize: null,
  topUp: null,
};

describe('plan rules', () => {
  it('accepts a plain recurring plan', () => expect(planProblems(base)).toEqual([]));

  it('needs a cycle for periodic plans and none for one-time plans', () => {
    expect(planProblems({ ...base, billingCycle: null }).map((p) => p.path)).toEqual(['/billingCycle']);
    expect(planProblems({ ...base, type: 'one-time', billingCycle: null, autoRenew: false })).toEqual([]);
    expect(
      planProblems({ ...base, type: 'one-time', autoRenew: true, billingCycle: null }).map((p) => p.path),
    ).toEqual(['/autoRenew']);
  });

  it('ties billingIntervalDays to the custom cycle', () => {
    expect(planProblems({ ...base, billingCycle: 'custom', billingIntervalDays: 10 })).toEqual([]);
    expect(planProblems({ ...base, billingIntervalDays: 10 }).map((p) => p.path)).toEqual([
      '/billingIntervalDays',
    ]);
  });

  it('meters usage-priced and capped plans only', () => {
    expect(isMetered({ type: 'recurring', limit: null })).toBe(false);
    expect(isMetered({ type: 'recurring', limit: 10 })).toBe(true);
    expect(isMetered({ type: 'hybrid', limit: null })).toBe(true);
    expect(
      planProblems({ ...base, usageTracking: { method: 'automatic', granularity: 'hourly' } }).map(
        (p) => p.path,
      ),
    ).toEqual(['/usageTracking']);
  });

  it('requires payment when any amount is due', () => {
    expect(requiresPayment(base)).toBe(false);
    expect(requiresPayment({ ...base, setupFee: 1 })).toBe(true);
  });

  it('derives currency symbols and rejects unknown codes', () => {
    expect(currencySymbol('usd')).toBe('$');
    expect(currencySymbol('gbp')).toBe('£');
    expect(currencySymbol('jpy')).toBe('¥');
    expect(planProblems({ ...base, currency: 'abc' }).map((p) => p.path)).toEqual(['/currency']);
  });
});

describe('subdomains', () => {
  it('are URL-safe slugs of the name', () => {
    expect(slugify('Weather API')).toBe('weather-api');
    expect(slugify('  Café  Büro!! ')).toBe('cafe-buro');
    expect(slugify('---')).toBe('');
  });
});

describe('usage pricing fields of a plan', () => {
  const usage: PlanSettings = { ...base, type: 'usage-based', billingModel: 'post-paid' };
  const paths = (s: PlanSettings) => planProblems(s).map((p) => `${p.path}: ${p.message}`);

  it('accepts each model and maps it to the pricing the invoice uses', () => {
    expect(paths({ ...usage, unitAmount: '0.2' })).toEqual([]);
    expect(pricingOf({ ...usage, unitAmount: '0.2' })).toEqual({
      model: 'per-unit',
      unitAmount: 200_000_000_000n,
    });
    expect(pricingOf({ ...usage, price: 3 })).toEqual({ model: 'per-unit', unitAmount: 3_000_000_000_000n });
    expect(pricingOf({ ...usage, price: 25, packageSize: 100 })).toMatchObject({
      model: 'package',
      packageSize: 100n,
    });
    const tiered = {
      ...usage,
      tiersMode: 'volume' as const,
      tiers: [
        { upTo: 1000, unitAmount: '0', flatAmount: 0 },
        { upTo: null, unitAmount: '0.05', flatAmount: 200 },
      ],
    };
    expect(paths(tiered)).toEqual([]);
    expect(pricingOf(tiered)).toEqual({
      model: 'volume',
      tiers: [
        { upTo: 1000n, unitAmount: 0n, flatAmount: 0n },
        { upTo: null, unitAmount: 50_000_000_000n, flatAmount: 200n },
      ],
    });
  });

  it('names the field, down to the tier, of every rule broken', () => {
    expect(paths({ ...base, unitAmount: '0.2' })).toEqual([
      '/unitAmount: only usage-based and hybrid plans price usage',
    ]);
    expect(paths({ ...usage, price: 2, unitAmount: '0.2' })).toEqual([
      '/unitAmount: give the unit price as price (whole cents) or unitAmount, not both',
    ]);
    expect(paths({ ...usage, unitAmount: '0.0000000000001' })).toEqual([
      '/unitAmount: must have at most 12 decimal places',
    ]);
    expect(
      paths({
        ...usage,
        price: 1,
        packageSize: 10,
        tiers: [
          { upTo: 100, unitAmount: '1', flatAmount: 0 },
          { upTo: 50, unitAmount: 'x', flatAmount: 0 },
          { upTo: 500, unitAmount: '1', flatAmount: 0 },
        ],
      }),
    ).toEqual([
      '/tiersMode: is required with tiers: "graduated" or "volume"',
      '/price: must be 0 when tiers price the usage',
      '/packageSize: must not be set with tiers',
      "/tiers/1/upTo: must be greater than the previous tier's upTo (100)",
      '/tiers/1/unitAmount: must be a non-negative decimal such as 0.2',
      '/tiers/2/upTo: the last tier must be unbounded (null)',
    ]);
    expect(
      paths({
        ...usage,
        tiersMode: 'graduated',
        tiers: [
          { upTo: null, unitAmount: '1', flatAmount: 0 },
          { upTo: null, unitAmount: '1', flatAmount: 0 },
        ],
      }),
    ).toEqual(['/tiers/0/upTo: only the last tier may be unbounded']);
    expect(paths({ ...usage, tiersMode: 'graduated' })).toEqual(['/tiersMode: is only used with tiers']);
  });
});
