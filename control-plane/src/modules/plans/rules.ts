import type { FieldProblem } from '../../errors';
import type {
  BILLING_CYCLES,
  BILLING_MODELS,
  PLAN_TYPES,
  TRACKING_GRANULARITIES,
  TRACKING_METHODS,
} from './schemas';

export interface PlanSettings {
  name: string;
  description: string | null;
  type: (typeof PLAN_TYPES)[number];
  price: number;
  basePrice: number;
  setupFee: number;
  currency: string;
  billingCycle: (typeof BILLING_CYCLES)[number] | null;
  billingIntervalDays: number | null;
  billingModel: (typeof BILLING_MODELS)[number];
  creditsPerUnit: number;
  freeUnits: number;
  limit: number | null;
  trialDays: number;
  rolloverUnusedUnits: boolean;
  autoRenew: boolean;
  status: 'active' | 'inactive' | 'archived';
  maxActiveUsers: number | null;
  accessExpiryDays: number | null;
  isDefault: boolean;
  limits: Record<string, number | null>;
  features: Record<string, boolean | number | string>;
  metadata: Record<string, string>;
  usageTracking: {
    method: (typeof TRACKING_METHODS)[number];
    granularity: (typeof TRACKING_GRANULARITIES)[number];
  } | null;
}

const CURRENCIES = new Set(Intl.supportedValuesOf('currency').map((c) => c.toLowerCase()));

export const isCurrency = (code: string): boolean => CURRENCIES.has(code.toLowerCase());

export function currencySymbol(currency: string): string {
  const parts = new Intl.NumberFormat('en', {
    style: 'currency',
    currency,
    currencyDisplay: 'narrowSymbol',
  }).formatToParts(0);
  return parts.find((p) => p.type === 'currency')?.value ?? currency.toUpperCase();
}

/** Usage-priced plans, and any plan with a hard cap, are measured on the provider's requests meter. */
export const isMetered = (s: Pick<PlanSettings, 'type' | 'limit'>): boolean =>
  s.type === 'usage-based' || s.type === 'hybrid' || s.limit !== null;

export const requiresPayment = (s: Pick<PlanSettings, 'price' | 'basePrice' | 'setupFee'>): boolean =>
  s.price > 0 || s.basePrice > 0 || s.setupFee > 0;

/** Rules across fields, checked on the complete plan after create defaults or a merged update. */
export function planProblems(s: PlanSettings): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (field: string, message: string) =>
    problems.push({ path: `/${field}`, message, location: 'body' });

  if (!isCurrency(s.currency)) add('currency', `"${s.currency}" is not an ISO 4217 currency code`);
  if (s.type === 'one-time') {
    if (s.billingCycle !== null) add('billingCycle', 'must not be set for one-time plans');
    if (s.trialDays > 0) add('trialDays', 'one-time plans have no trial');
    if (s.autoRenew) add('autoRenew', 'one-time plans do not renew');
  } else if (s.billingCycle === null) {
    add('billingCycle', `is required for ${s.type} plans`);
  }
  if (s.billingCycle === 'custom' && s.billingIntervalDays === null) {
    add('billingIntervalDays', 'is required when billingCycle is "custom"');
  }
  if (s.billingCycle !== 'custom' && s.billingIntervalDays !== null) {
    add('billingIntervalDays', 'is only allowed when billingCycle is "custom"');
  }
  if (s.freeUnits > 0 && s.type !== 'usage-based' && s.type !== 'hybrid') {
    add('freeUnits', 'only usage-based and hybrid plans include free units');
  }
  if (s.basePrice > 0 && s.type !== 'hybrid')
    add('basePrice', 'only hybrid plans have a base price; use price');
  if (s.rolloverUnusedUnits && !isMetered(s))
    add('rolloverUnusedUnits', 'only metered plans have units to roll over');
  if (s.usageTracking !== null && !isMetered(s)) add('usageTracking', 'only metered plans track usage');
  return problems;
}
