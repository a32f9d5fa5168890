import { formatDecimal, type Pricing, parseDecimal } from '@mcp-meter/contracts/pricing';
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
  /** Cents per unit as an exact decimal string ("0.2"), instead of the whole-cent `price`. */
  unitAmount: string | null;
  tiers: PlanTier[] | null;
  tiersMode: 'graduated' | 'volume' | null;
  /** Units per package: `price` (or `unitAmount`) is the price of each package, started packages count. */
  packageSize: number | null;
  /** Plans paid from credits: the pack the paywall offers when the credits run out. */
  topUp: { credits: number; amount: number } | null;
}

/** A price tier as a plan keeps it: amounts as given (decimal strings once normalised). */
export interface PlanTier {
  upTo: number | null;
  unitAmount: string;
  flatAmount: number;
}

/** A decimal the plan holds (already checked) as scaled cents. */
export function decimalOf(value: string | number): bigint {
  const parsed = parseDecimal(value);
  if (!('scaled' in parsed)) throw new Error(`not a decimal: ${value}`);
  return parsed.scaled;
}

/** The decimal's normal form ("0.20" → "0.2"), or the value as text when it is not one (reported later). */
export function normaliseDecimal(value: string | number): string {
  const parsed = parseDecimal(value);
  return 'scaled' in parsed ? formatDecimal(parsed.scaled) : String(value);
}

/** How a usage-based or hybrid plan prices the units of a period (after its free units). */
export function pricingOf(
  s: Pick<PlanSettings, 'price' | 'unitAmount' | 'tiers' | 'tiersMode' | 'packageSize'>,
): Pricing {
  if (s.tiers !== null)
    return {
      model: s.tiersMode ?? 'graduated',
      tiers: s.tiers.map((t) => ({
        upTo: t.upTo === null ? null : BigInt(t.upTo),
        unitAmount: decimalOf(t.unitAmount),
        flatAmount: BigInt(t.flatAmount),
      })),
    };
  const unitAmount = s.unitAmount === null ? decimalOf(s.price) : decimalOf(s.unitAmount);
  if (s.packageSize !== null) return { model: 'package', unitAmount, packageSize: BigInt(s.packageSize) };
  return { model: 'per-unit', unitAmount };
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

/** A plan whose usage is paid from the customer's credits: each admitted call spends creditsPerUnit. */
export const isCreditPaid = (s: Pick<PlanSettings, 'type' | 'billingModel'>): boolean =>
  s.type === 'usage-based' && s.billingModel === 'pre-paid';

/** Whether buying the plan needs a way to pay: any price, fee, or usage priced above zero. */
export const requiresPayment = (
  s: Pick<PlanSettings, 'price' | 'basePrice' | 'setupFee'> &
    Partial<Pick<PlanSettings, 'unitAmount' | 'tiers'>>,
): boolean =>
  s.price > 0 ||
  s.basePrice > 0 ||
  s.setupFee > 0 ||
  (s.unitAmount != null && decimalOf(s.unitAmount) > 0n) ||
  (s.tiers ?? []).some((t) => t.flatAmount > 0 || decimalOf(t.unitAmount) > 0n);

/** Whether a plan's periods close with a usage charge: post-paid usage-based plans and hybrid plans. */
export const billsUsage = (s: Pick<PlanSettings, 'type' | 'billingModel'>): boolean =>
  s.type === 'hybrid' || (s.type === 'usage-based' && s.billingModel === 'post-paid');

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
  pricingProblems(s, add);
  if (s.topUp !== null && !isCreditPaid(s))
    add('topUp', 'only plans paid from credits (usage-based, pre-paid) offer a top-up');
  return problems;
}

const MAX_TIERS = 20;

/** Rules of the usage pricing fields; each problem names the field (down to the tier). */
function pricingProblems(s: PlanSettings, add: (field: string, message: string) => void): void {
  const pricesUsage = s.type === 'usage-based' || s.type === 'hybrid';
  for (const [field, set] of [
    ['unitAmount', s.unitAmount !== null],
    ['tiers', s.tiers !== null],
    ['tiersMode', s.tiersMode !== null],
    ['packageSize', s.packageSize !== null],
  ] as const)
    if (set && !pricesUsage) add(field, 'only usage-based and hybrid plans price usage');
  if (!pricesUsage) return;
  if (s.unitAmount !== null) {
    const parsed = parseDecimal(s.unitAmount);
    if ('problem' in parsed) add('unitAmount', parsed.problem);
    if (s.price > 0) add('unitAmount', 'give the unit price as price (whole cents) or unitAmount, not both');
  }
  const tiers = s.tiers;
  if (tiers === null) {
    if (s.tiersMode !== null) add('tiersMode', 'is only used with tiers');
    return;
  }
  if (s.tiersMode === null) add('tiersMode', 'is required with tiers: "graduated" or "volume"');
  if (s.price > 0) add('price', 'must be 0 when tiers price the usage');
  if (s.unitAmount !== null) add('unitAmount', 'must not be set when tiers price the usage');
  if (s.packageSize !== null) add('packageSize', 'must not be set with tiers');
  if (tiers.length === 0 || tiers.length > MAX_TIERS) add('tiers', `must hold 1 to ${MAX_TIERS} tiers`);
  let previous = 0;
  tiers.forEach((tier, index) => {
    const last = index === tiers.length - 1;
    if (last && tier.upTo !== null) add(`tiers/${index}/upTo`, 'the last tier must be unbounded (null)');
    if (!last && tier.upTo === null) add(`tiers/${index}/upTo`, 'only the last tier may be unbounded');
    if (tier.upTo !== null) {
      if (tier.upTo <= previous)
        add(`tiers/${index}/upTo`, `must be greater than the previous tier's upTo (${previous})`);
      previous = tier.upTo;
    }
    const parsed = parseDecimal(tier.unitAmount);
    if ('problem' in parsed) add(`tiers/${index}/unitAmount`, parsed.problem);
  });
}

/** What a purchase charges each period: usage-based plans are billed for usage by the billing job. */
export function recurringAmount(settings: PlanSettings): number {
  if (settings.type === 'usage-based') return 0;
  return settings.type === 'hybrid' ? settings.basePrice : settings.price;
}
