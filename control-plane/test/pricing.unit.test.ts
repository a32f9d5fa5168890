import {
  formatDecimal,
  type Pricing,
  parseDecimal,
  priceUsage,
  prorate,
  roundHalfEven,
  type Tier,
} from '@mcp-meter/contracts/pricing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const dec = (value: number | string): bigint => {
  const parsed = parseDecimal(value);
  if (!('scaled' in parsed)) throw new Error(parsed.problem);
  return parsed.scaled;
};
const tier = (upTo: number | null, unitAmount: number | string, flatAmount = 0): Tier => ({
  upTo: upTo === null ? null : BigInt(upTo),
  unitAmount: dec(unitAmount),
  flatAmount: BigInt(flatAmount),
});
const TIERS = [tier(1000, 0), tier(10_000, 0.1, 500), tier(null, 0.05)];

describe('pricing usage to the cent', () => {
  it('reads decimal unit amounts exactly, and refuses what is not one', () => {
    expect(formatDecimal(dec(0.2))).toBe('0.2');
    expect(formatDecimal(dec('0.000000000001'))).toBe('0.000000000001');
    expect(formatDecimal(dec('12.50'))).toBe('12.5');
    expect(parseDecimal(0.1 + 0.2)).toEqual({ problem: 'must have at most 12 decimal places' });
    expect(parseDecimal('0.0000000000001')).toEqual({ problem: 'must have at most 12 decimal places' });
    for (const bad of [-1, '-0.5', '1e3', 'abc', Number.NaN, Number.POSITIVE_INFINITY, null, '1'.repeat(16)])
      expect(parseDecimal(bad)).toHaveProperty('problem');
  });

  it('rounds each line once, half to even', () => {
    const half = dec('0.5');
    expect(roundHalfEven(5n * half)).toBe(2n); // 2.5 → 2
    expect(roundHalfEven(7n * half)).toBe(4n); // 3.5 → 4
    expect(roundHalfEven(dec('2.500000000001'))).toBe(3n);
    expect(roundHalfEven(dec('2.499999999999'))).toBe(2n);
  });

  it('prorates a base price for unused time once, half to even, within [0, amount]', () => {
    const DAY = 86_400_000;
    expect(prorate(3000, 21 * DAY, 31 * DAY)).toBe(2032); // 2032.26
    expect(prorate(6000, 27 * DAY, 31 * DAY)).toBe(5226); // 5225.81
    expect(prorate(5, 1, 2)).toBe(2); // 2.5 → 2
    expect(prorate(7, 1, 2)).toBe(4); // 3.5 → 4
    expect(prorate(1000, 0, DAY)).toBe(0);
    expect(prorate(1000, 2 * DAY, DAY)).toBe(1000);
    expect(prorate(1000, -5, DAY)).toBe(0);
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 ** 9 }),
        fc.integer({ min: 1, max: 10 ** 10 }),
        (amount, whole) => {
          const part = Math.floor(whole / 3);
          const credit = prorate(amount, part, whole);
          // Never more than one cent from the exact share, and never outside the amount.
          const error = BigInt(credit) * BigInt(whole) - BigInt(amount) * BigInt(part);
          expect(2n * (error < 0n ? -error : error) <= BigInt(whole)).toBe(true);
          expect(credit).toBeGreaterThanOrEqual(0);
          expect(credit).toBeLessThanOrEqual(amount);
        },
      ),
    );
  });

  // The examples of the README, worked by hand.
  it('per unit: 1,234 calls at 0.2 cents with 1,000 free is 234 × 0.2 = 46.8, so 47 cents', () => {
    const priced = priceUsage({ model: 'per-unit', unitAmount: dec(0.2) }, 1234n, 1000n, 'call');
    expect(priced).toEqual({
      billableUnits: 234n,
      lines: [{ description: '234 calls', quantity: 234, unitAmount: '0.2', amount: 47 }],
      total: 47,
    });
    expect(priceUsage({ model: 'per-unit', unitAmount: dec(0.2) }, 900n, 1000n).total).toBe(0);
  });

  it('graduated: 12,345 calls are 1,000 free, 9,000 at 0.1 (900) plus a 500 flat fee, 2,345 at 0.05 (117.25 → 117): 1,517 cents', () => {
    const priced = priceUsage({ model: 'graduated', tiers: TIERS }, 12_345n, 0n, 'call');
    expect(priced.lines).toEqual([
      { description: 'Tier 1 (1 to 1000): 1000 calls', quantity: 1000, unitAmount: '0', amount: 0 },
      { description: 'Tier 2 (1001 to 10000): 9000 calls', quantity: 9000, unitAmount: '0.1', amount: 900 },
      { description: 'Tier 2 (1001 to 10000): flat fee', quantity: 1, unitAmount: '500', amount: 500 },
      {
        description: 'Tier 3 (10001 and above): 2345 calls',
        quantity: 2345,
        unitAmount: '0.05',
        amount: 117,
      },
    ]);
    expect(priced.total).toBe(1517);
  });

  it('volume: the same 12,345 calls all at the third tier, 0.05: 617.25 → 617 cents', () => {
    const priced = priceUsage({ model: 'volume', tiers: TIERS }, 12_345n, 0n, 'call');
    expect(priced.lines).toEqual([
      {
        description: 'Tier 3 (10001 and above): 12345 calls',
        quantity: 12_345,
        unitAmount: '0.05',
        amount: 617,
      },
    ]);
    // At 5,000 calls the second tier prices all of them and its flat fee applies: 500 + 500.
    expect(priceUsage({ model: 'volume', tiers: TIERS }, 5000n, 0n).total).toBe(1000);
  });

  it('package: 1,001 calls in packages of 100 at 25 cents are 11 packages, 275 cents', () => {
    const priced = priceUsage(
      { model: 'package', unitAmount: dec(25), packageSize: 100n },
      1001n,
      0n,
      'call',
    );
    expect(priced.lines).toEqual([
      { description: '1001 calls in 11 packages of 100', quantity: 11, unitAmount: '25', amount: 275 },
    ]);
  });

  it('property: for random tiers and usage, the total equals a unit-by-unit reference computation', () => {
    const tiersArb = fc
      .array(
        fc.record({
          width: fc.integer({ min: 1, max: 400 }),
          // Up to 3 decimal places and 0..50 cents; flat fees up to 1,000 cents.
          thousandths: fc.integer({ min: 0, max: 50_000 }),
          flat: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 1000 })),
        }),
        { minLength: 1, maxLength: 6 },
      )
      .map((raw) => {
        let upTo = 0;
        return raw.map((t, i) => {
          upTo += t.width;
          return tier(i === raw.length - 1 ? null : upTo, (t.thousandths / 1000).toFixed(3), t.flat);
        });
      });
    fc.assert(
      fc.property(
        tiersArb,
        fc.constantFrom<'graduated' | 'volume'>('graduated', 'volume'),
        fc.integer({ min: 0, max: 3000 }),
        fc.integer({ min: 0, max: 500 }),
        (tiers, mode, used, free) => {
          const pricing: Pricing = { model: mode, tiers };
          expect(priceUsage(pricing, BigInt(used), BigInt(free)).total).toBe(
            reference(tiers, mode, used, free),
          );
        },
      ),
      { numRuns: 500 },
    );
  });
});

/**
 * An independent reference: walks the billable units one by one, adding each unit's exact price
 * (a fraction in thousandths of a cent) to its line, then rounds each line half to even with
 * plain integer division.
 */
function reference(tiers: Tier[], mode: 'graduated' | 'volume', used: number, free: number): number {
  const billable = Math.max(0, used - free);
  if (billable === 0) return 0;
  const tierOf = (unit: number) => tiers.findIndex((t) => t.upTo === null || BigInt(unit) <= t.upTo);
  const scaleToThousandths = 10n ** 9n; // prices were built with 3 places: 10^12 / 10^3
  const perLine = new Map<number, bigint>();
  const flats = new Set<number>();
  for (let unit = 1; unit <= billable; unit++) {
    const index = mode === 'graduated' ? tierOf(unit) : tierOf(billable);
    const t = tiers[index] as Tier;
    perLine.set(index, (perLine.get(index) ?? 0n) + t.unitAmount / scaleToThousandths);
    flats.add(index);
  }
  let total = 0n;
  for (const thousandths of perLine.values()) {
    const q = thousandths / 1000n;
    const r = thousandths % 1000n;
    total += r > 500n || (r === 500n && q % 2n === 1n) ? q + 1n : q;
  }
  for (const index of flats) total += (tiers[index] as Tier).flatAmount;
  return Number(total);
}
