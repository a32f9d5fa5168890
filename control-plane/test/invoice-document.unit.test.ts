import { describe, expect, it } from 'vitest';
import { formatUnitAmount } from '../src/modules/billing/document';

describe('unit prices on invoices', () => {
  it('shift decimal cents to the major unit as text, keeping every place', () => {
    expect(formatUnitAmount('0.2', 'usd')).toBe('$0.002');
    expect(formatUnitAmount('1000', 'usd')).toBe('$10.00');
    expect(formatUnitAmount('1.5', 'usd')).toBe('$0.015');
    expect(formatUnitAmount('0.000000000001', 'eur')).toBe('€0.00000000000001');
    expect(formatUnitAmount('12345678901234', 'usd')).toBe('$123456789012.34');
    expect(formatUnitAmount('0', 'usd')).toBe('$0.00');
    // A currency without minor units: the amount is already whole yen.
    expect(formatUnitAmount('5', 'jpy')).toBe('¥5');
    expect(formatUnitAmount('0.5', 'jpy')).toBe('¥0.5');
  });
});
