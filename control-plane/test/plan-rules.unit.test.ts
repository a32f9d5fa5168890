import { describe, expect, it } from 'vitest';
import { slugify } from '../src/modules/mcp-servers/service';
import {
  currencySymbol,
  isMetered,
  type PlanSettings,
  planProblems,
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
