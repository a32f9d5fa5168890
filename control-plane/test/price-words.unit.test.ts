import { describe, expect, it } from 'vitest';
import { formatUnitPrice, usagePriceLines } from '../src/modules/checkout/price-words';

const base = {
  price: 0,
  unitAmount: null,
  tiers: null,
  tiersMode: null,
  packageSize: null,
  freeUnits: 0,
  currency: 'usd',
} as const;

describe('usage prices in the checkout’s words', () => {
  it('keeps sub-cent prices instead of rounding them to $0.00', () => {
    expect(formatUnitPrice('0.1', 'usd')).toBe('$0.001');
    expect(formatUnitPrice('0.05', 'usd')).toBe('$0.0005');
    expect(formatUnitPrice(2, 'usd')).toBe('$0.02');
    expect(formatUnitPrice(150, 'jpy')).toBe('¥150');
  });

  it('says each tier of a graduated plan, as the README example prices them', () => {
    expect(
      usagePriceLines({
        ...base,
        tiersMode: 'graduated',
        tiers: [
          { upTo: 1000, unitAmount: '0', flatAmount: 0 },
          { upTo: 10000, unitAmount: '0.1', flatAmount: 500 },
          { upTo: null, unitAmount: '0.05', flatAmount: 0 },
        ],
      }),
    ).toEqual([
      'Plus usage, each unit at the price of its tier:',
      'the first 1,000 units: $0.00 each',
      'the next 9,000 units: $0.001 each, plus $5.00 once the tier is reached',
      'above 10,000 units: $0.0005 each',
    ]);
  });

  it('says volume tiers, packages, unit prices and free units', () => {
    expect(
      usagePriceLines({
        ...base,
        tiersMode: 'volume',
        tiers: [
          { upTo: 100, unitAmount: '1', flatAmount: 0 },
          { upTo: null, unitAmount: '0.5', flatAmount: 0 },
        ],
      }),
    ).toEqual([
      'Plus usage, every unit at the price of the tier the period’s total reaches:',
      'up to 100 units: $0.01 each',
      'above 100 units: $0.005 each',
    ]);
    expect(usagePriceLines({ ...base, price: 25, packageSize: 1000 })).toEqual([
      'Plus $0.25 per 1,000 units used (a started package counts)',
    ]);
    expect(usagePriceLines({ ...base, price: 2, unitAmount: '0.2', freeUnits: 100 })).toEqual([
      'The first 100 units each period are free',
      'Plus $0.002 per unit used',
    ]);
  });
});
