import { roundHalfEven } from '@mcp-meter/contracts/pricing';
import { formatMoney } from '../checkout/page';
import type { LineKind, StoredLine } from './repository';

/**
 * A discount as a purchase keeps it (`purchases.discount`): the coupon's terms when it was
 * redeemed and the moment it stops applying. Coupons do not change after creation, but the copy
 * keeps a purchase's invoices independent of the coupon row (archived, renamed).
 */
export interface Discount {
  coupon: string;
  name: string;
  code: string | null;
  /** Hundredths of a percent off each discounted line (1250 = 12.5 %); null for an amount off. */
  percentOffBps: number | null;
  /** Minor units off each invoice, spread over its lines in order; null for a percentage. */
  amountOff: number | null;
  currency: string | null;
  duration: 'once' | 'repeating' | 'forever';
  durationInMonths: number | null;
  /** When it was redeemed (ISO 8601). */
  start: string;
  /**
   * It applies to invoices issued before this (ISO 8601): the start plus the months of a
   * `repeating` discount, the issue of a `once` discount's first invoice; null until then, and
   * for `forever`.
   */
  end: string | null;
}

/** Lines a discount takes money off: charges. Credits, prorations and refunds are not. */
const DISCOUNTED: ReadonlySet<LineKind> = new Set(['base', 'setup_fee', 'usage', 'late_usage']);

/** Whether `discount` applies to an invoice issued at `at`. */
export function discountApplies(discount: Discount | null, at: Date): discount is Discount {
  return discount !== null && (discount.end === null || at.getTime() < Date.parse(discount.end));
}

/** `start` plus `months` calendar months, UTC, the day clamped to the month's last. */
export function addMonths(start: Date, months: number): Date {
  const y = start.getUTCFullYear();
  const m = start.getUTCMonth() + months;
  const last = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  const out = new Date(start);
  out.setUTCFullYear(y, m, Math.min(start.getUTCDate(), last));
  return out;
}

/**
 * "12.5% off" or "$5.00 off" (in the currency's own minor units: "¥500 off"): a discount in the
 * words every page and invoice line uses.
 */
export function discountWords(d: Pick<Discount, 'percentOffBps' | 'amountOff' | 'currency'>): string {
  if (d.percentOffBps !== null) {
    const whole = Math.trunc(d.percentOffBps / 100);
    const rest = d.percentOffBps % 100;
    const percent = rest === 0 ? `${whole}` : `${whole}.${String(rest).padStart(2, '0').replace(/0$/, '')}`;
    return `${percent}% off`;
  }
  return `${formatMoney(d.amountOff ?? 0, d.currency ?? 'usd')} off`;
}

/**
 * The invoice `lines` with `discount` taken off, as a `discount` line after each line it
 * discounts (same period, so its revenue is recognised alongside). A percentage comes off every
 * charge line, each rounded once to whole minor units, half to even; an amount off is spent on
 * the charge lines in order, never more than a line's amount, and what the invoice cannot use is
 * not carried over (as Stripe's amount-off coupons). Lines already discounted are left as they are.
 */
export function applyDiscount(lines: StoredLine[], discount: Discount): StoredLine[] {
  if (lines.some((line) => line.kind === 'discount')) return lines;
  let left = discount.amountOff ?? 0;
  const out: StoredLine[] = [];
  for (const line of lines) {
    out.push(line);
    if (!DISCOUNTED.has(line.kind) || line.amount <= 0) continue;
    let off: number;
    if (discount.percentOffBps !== null) {
      // amount × bps ÷ 10⁴, as a decimal scaled by 10¹² for the shared half-to-even rounding.
      off = Number(roundHalfEven(BigInt(line.amount) * BigInt(discount.percentOffBps) * 10n ** 8n));
    } else {
      off = Math.min(left, line.amount);
      left -= off;
    }
    if (off <= 0) continue;
    out.push({
      kind: 'discount',
      description: `${discount.name} (${discountWords(discount)})`,
      quantity: 1,
      unitAmount: (-off).toString(),
      amount: -off,
      period: line.period,
      discounts: line.kind,
    });
  }
  return out;
}

/**
 * `lines` as an invoice issued at `at` charges them: less `discount` while it applies then
 * (applyDiscount), else as they are. The one decision every invoice, preview and first charge
 * goes through.
 */
export function discountedAt(lines: StoredLine[], discount: Discount | null, at: Date): StoredLine[] {
  return discountApplies(discount, at) ? applyDiscount(lines, discount) : lines;
}

/** Whether an invoice's lines took anything off with a discount. */
export const hasDiscount = (lines: StoredLine[]): boolean => lines.some((line) => line.kind === 'discount');
