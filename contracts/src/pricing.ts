/**
 * Usage priced to the cent: how many units a period used becomes invoice lines. Pure and exact:
 * unit prices are decimals of cents with up to 12 places (0.2 cents per call), held as integers
 * scaled by 10^12, and each line's amount is rounded once, half to even, to whole cents. The
 * invoice total is the sum of its rounded lines.
 *
 * Models (per unit of the plan's meter, after its free units):
 * - per-unit: units × unitAmount.
 * - package: ⌈units / packageSize⌉ packages × unitAmount (the price of one package).
 * - graduated tiers: each tier prices the units that fall in it, plus its flatAmount when any do.
 * - volume tiers: every unit at the price of the tier the total falls in, plus that tier's flatAmount.
 * No billable units, no usage lines: a period without usage costs nothing, in every model.
 */

export const DECIMAL_PLACES = 12;
const SCALE = 10n ** BigInt(DECIMAL_PLACES);

/** A price tier: up to and including `upTo` units (null: unbounded, the last tier). */
export interface Tier {
  upTo: bigint | null;
  /** Cents per unit, scaled by 10^12. */
  unitAmount: bigint;
  /** Whole cents, charged once when the tier is used. */
  flatAmount: bigint;
}

export type Pricing =
  | { model: 'per-unit'; unitAmount: bigint }
  | { model: 'package'; unitAmount: bigint; packageSize: bigint }
  | { model: 'graduated' | 'volume'; tiers: Tier[] };

export interface InvoiceLine {
  description: string;
  quantity: number;
  /** Cents per unit as a decimal string ("0.2"); for a flat fee, the fee. */
  unitAmount: string;
  /** Whole cents. */
  amount: number;
}

/** A unit amount read exactly: its value scaled by 10^12, or why it is not one. */
export function parseDecimal(value: unknown): { scaled: bigint } | { problem: string } {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return { problem: 'must be a finite number' };
    text = value.toFixed(DECIMAL_PLACES);
    // The number must be exactly a decimal of at most 12 places (0.1 + 0.2 is not).
    if (Number(text) !== value) return { problem: `must have at most ${DECIMAL_PLACES} decimal places` };
  } else if (typeof value === 'string') {
    text = value.trim();
  } else {
    return { problem: 'must be a number or a decimal string' };
  }
  const match = /^(\d{1,15})(?:\.(\d+))?$/.exec(text);
  if (match === null) return { problem: 'must be a non-negative decimal such as 0.2' };
  const fraction = (match[2] ?? '').replace(/0+$/, '');
  if (fraction.length > DECIMAL_PLACES)
    return { problem: `must have at most ${DECIMAL_PLACES} decimal places` };
  return { scaled: BigInt(match[1] as string) * SCALE + BigInt(fraction.padEnd(DECIMAL_PLACES, '0') || '0') };
}

/** A scaled decimal as the shortest decimal string ("0.2", "12"). */
export function formatDecimal(scaled: bigint): string {
  const whole = scaled / SCALE;
  const fraction = (scaled % SCALE).toString().padStart(DECIMAL_PLACES, '0').replace(/0+$/, '');
  return fraction === '' ? whole.toString() : `${whole}.${fraction}`;
}

/** A scaled amount of cents rounded to whole cents, half to even (banker's rounding). */
export function roundHalfEven(scaled: bigint): bigint {
  const whole = scaled / SCALE;
  const rest = scaled % SCALE;
  const twice = rest * 2n;
  if (twice < SCALE) return whole;
  if (twice > SCALE) return whole + 1n;
  return whole % 2n === 0n ? whole : whole + 1n;
}

const cents = (value: bigint): number => {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError('amount beyond the safe range');
  return Number(value);
};

const plural = (n: bigint, word: string) => `${n} ${word}${n === 1n ? '' : 's'}`;

function unitLine(description: string, quantity: bigint, unitAmount: bigint): InvoiceLine {
  return {
    description,
    quantity: cents(quantity),
    unitAmount: formatDecimal(unitAmount),
    amount: cents(roundHalfEven(quantity * unitAmount)),
  };
}

function flatLine(description: string, amount: bigint): InvoiceLine {
  return { description, quantity: 1, unitAmount: amount.toString(), amount: cents(amount) };
}

const tierName = (tiers: Tier[], index: number): string => {
  const from = index === 0 ? 1n : ((tiers[index - 1] as Tier).upTo as bigint) + 1n;
  const upTo = (tiers[index] as Tier).upTo;
  return upTo === null ? `${from} and above` : `${from} to ${upTo}`;
};

/**
 * The usage lines of one period: `units` used on the meter, of which `freeUnits` are included.
 * Answers the billable units, the lines and their total (whole cents).
 */
export function priceUsage(
  pricing: Pricing,
  units: bigint,
  freeUnits: bigint,
  unitName = 'unit',
): { billableUnits: bigint; lines: InvoiceLine[]; total: number } {
  const billable = units > freeUnits ? units - freeUnits : 0n;
  const lines: InvoiceLine[] = [];
  if (billable > 0n) {
    switch (pricing.model) {
      case 'per-unit':
        lines.push(unitLine(`${plural(billable, unitName)}`, billable, pricing.unitAmount));
        break;
      case 'package': {
        const packages = (billable + pricing.packageSize - 1n) / pricing.packageSize;
        lines.push(
          unitLine(
            `${plural(billable, unitName)} in ${plural(packages, 'package')} of ${pricing.packageSize}`,
            packages,
            pricing.unitAmount,
          ),
        );
        break;
      }
      case 'graduated': {
        let below = 0n;
        pricing.tiers.forEach((tier, index) => {
          if (billable <= below) return;
          const top = tier.upTo === null || tier.upTo > billable ? billable : tier.upTo;
          const inTier = top - below;
          const name = `Tier ${index + 1} (${tierName(pricing.tiers, index)})`;
          lines.push(unitLine(`${name}: ${plural(inTier, unitName)}`, inTier, tier.unitAmount));
          if (tier.flatAmount > 0n) lines.push(flatLine(`${name}: flat fee`, tier.flatAmount));
          below = top;
        });
        break;
      }
      case 'volume': {
        const index = pricing.tiers.findIndex((t) => t.upTo === null || billable <= t.upTo);
        const tier = pricing.tiers[index] as Tier;
        const name = `Tier ${index + 1} (${tierName(pricing.tiers, index)})`;
        lines.push(unitLine(`${name}: ${plural(billable, unitName)}`, billable, tier.unitAmount));
        if (tier.flatAmount > 0n) lines.push(flatLine(`${name}: flat fee`, tier.flatAmount));
        break;
      }
    }
  }
  return { billableUnits: billable, lines, total: lines.reduce((sum, line) => sum + line.amount, 0) };
}

/** numerator ÷ denominator rounded to an integer, half to even (denominator > 0). */
export function divideHalfEven(numerator: bigint, denominator: bigint): bigint {
  const negative = numerator < 0n;
  const n = negative ? -numerator : numerator;
  const quotient = n / denominator;
  const twice = (n % denominator) * 2n;
  const rounded =
    twice < denominator || (twice === denominator && quotient % 2n === 0n) ? quotient : quotient + 1n;
  return negative ? -rounded : rounded;
}

/**
 * The part of `amount` cents that `part` of `whole` (two lengths of time, in milliseconds) is
 * worth, rounded once to whole cents, half to even: the credit for a period's unused time.
 */
export function prorate(amount: number, part: number, whole: number): number {
  if (whole <= 0 || part <= 0 || amount <= 0) return 0;
  if (part >= whole) return amount;
  return Number(divideHalfEven(BigInt(amount) * BigInt(part), BigInt(whole)));
}
