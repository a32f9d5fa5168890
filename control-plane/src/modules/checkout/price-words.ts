import { discountWords } from '../billing/discounts';
import type { CouponRow } from '../coupons/repository';
import type { PlanSettings } from '../plans/rules';
import { recurringAmount } from '../plans/rules';
import { formatMoney } from './page';

/** A price in cents (an exact decimal string or a number) as money, with sub-cent digits kept. */
export function formatUnitPrice(cents: string | number, currency: string): string {
  const format = new Intl.NumberFormat('en', {
    style: 'currency',
    currency,
    currencyDisplay: 'narrowSymbol',
    maximumFractionDigits: 8,
  });
  const digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions()
    .maximumFractionDigits as number;
  return format.format(Number(cents) / 10 ** digits);
}

const count = (n: number) => n.toLocaleString('en');

/**
 * What a usage-priced plan charges for its units, in the words the hosted checkout shows: per
 * unit, per package, or tier by tier (graduated: each unit at its tier's price; volume: every
 * unit at the price of the tier the total reaches), with the free units first.
 */
export function usagePriceLines(
  s: Pick<
    PlanSettings,
    'price' | 'unitAmount' | 'tiers' | 'tiersMode' | 'packageSize' | 'freeUnits' | 'currency'
  >,
): string[] {
  const money = (cents: string | number) => formatUnitPrice(cents, s.currency);
  const lines: string[] = [];
  if (s.freeUnits > 0) lines.push(`The first ${count(s.freeUnits)} units each period are free`);
  if (s.tiers !== null) {
    const volume = s.tiersMode === 'volume';
    lines.push(
      volume
        ? 'Plus usage, every unit at the price of the tier the period’s total reaches:'
        : 'Plus usage, each unit at the price of its tier:',
    );
    let from = 0;
    for (const tier of s.tiers) {
      const range =
        tier.upTo === null
          ? `above ${count(from)}`
          : volume
            ? `up to ${count(tier.upTo)}`
            : from === 0
              ? `the first ${count(tier.upTo)}`
              : `the next ${count(tier.upTo - from)}`;
      const flat = tier.flatAmount > 0 ? `, plus ${money(tier.flatAmount)} once the tier is reached` : '';
      lines.push(`${range} units: ${money(tier.unitAmount)} each${flat}`);
      if (tier.upTo !== null) from = tier.upTo;
    }
    return lines;
  }
  const unit = money(s.unitAmount ?? s.price);
  lines.push(
    s.packageSize !== null
      ? `Plus ${unit} per ${count(s.packageSize)} units used (a started package counts)`
      : `Plus ${unit} per unit used`,
  );
  return lines;
}

const CYCLE_WORDS: Record<string, string> = {
  weekly: 'week',
  monthly: 'month',
  quarterly: 'quarter',
  yearly: 'year',
};

/**
 * A plan's price in the words the hosted pages show: the period's price (none for a plan priced by
 * usage alone: "$0.00 per month" said nothing), its usage prices, a trial and a setup fee.
 */
export function planPriceLines(s: PlanSettings): string[] {
  const lines: string[] = [];
  const price = formatMoney(recurringAmount(s), s.currency);
  if (!(s.type === 'usage-based' && recurringAmount(s) === 0))
    lines.push(
      s.billingCycle === null
        ? `${price} once`
        : `${price} per ${CYCLE_WORDS[s.billingCycle] ?? `${s.billingIntervalDays} days`}`,
    );
  if (s.type === 'usage-based' || s.type === 'hybrid') lines.push(...usagePriceLines(s));
  if (s.trialDays > 0) lines.push(`${s.trialDays}-day free trial; the first charge is at its end`);
  if (s.setupFee > 0) lines.push(`One-time setup fee ${formatMoney(s.setupFee, s.currency)}`);
  return lines;
}

/** The coupon a checkout applies, in words: "Launch (20% off), for 3 months". */
export function couponWords(
  coupon: Pick<
    CouponRow,
    'name' | 'percent_off_bps' | 'amount_off' | 'currency' | 'duration' | 'duration_in_months'
  >,
): string {
  const off = discountWords({
    percentOffBps: coupon.percent_off_bps,
    amountOff: coupon.amount_off,
    currency: coupon.currency,
  });
  const months = coupon.duration_in_months ?? 0;
  const span =
    coupon.duration === 'once'
      ? 'on the first invoice'
      : coupon.duration === 'forever'
        ? 'on every invoice'
        : `on invoices for ${months} month${months === 1 ? '' : 's'}`;
  return `${coupon.name} (${off}), ${span}`;
}

/** The coupon a top-up checkout applies, in words: "$10.00, less Launch (20% off)". */
export function topupCouponWords(
  price: number,
  currency: string,
  coupon: Pick<CouponRow, 'name' | 'percent_off_bps' | 'amount_off' | 'currency'>,
): string {
  const off = discountWords({
    percentOffBps: coupon.percent_off_bps,
    amountOff: coupon.amount_off,
    currency: coupon.currency,
  });
  return `${formatMoney(price, currency)}, less ${coupon.name} (${off})`;
}

/**
 * A purchase's discount as its customer reads it, while it still takes money off: "Launch: 20%
 * off until 1 Jun 2026", "… on every invoice", "… on the next invoice"; null once it has ended.
 */
export function discountTerms(
  d: {
    name: string;
    percentOff: number | null;
    amountOff: number | null;
    currency: string | null;
    duration: 'once' | 'repeating' | 'forever';
    end: string | null;
  },
  now: Date,
): string | null {
  if (d.end !== null && Date.parse(d.end) <= now.getTime()) return null;
  const off =
    d.percentOff !== null
      ? `${d.percentOff}% off`
      : `${formatMoney(d.amountOff ?? 0, d.currency ?? 'usd')} off`;
  const span =
    d.end !== null
      ? `until ${new Date(d.end).toLocaleDateString('en-GB', { day: 'numeric', month: 'short', year: 'numeric', timeZone: 'UTC' })}`
      : d.duration === 'once'
        ? 'on the next invoice'
        : 'on every invoice';
  return `${d.name}: ${off} ${span}`;
}
