import { fractionStep } from '@mcp-meter/contracts/limits';
import { decimalText, splitNanos, toNanos, unitsRoundedUp } from '@mcp-meter/contracts/usage';
import { describe, expect, it } from 'vitest';

describe('reported units, exactly', () => {
  it.each([
    [0, 0n],
    [1, 1_000_000_000n],
    [0.1, 100_000_000n],
    [2.5, 2_500_000_000n],
    [1e-9, 1n],
    [1.5e-8, 15n],
    [1e15, 1_000_000_000_000_000_000_000_000n],
    [123456.123456789, 123_456_123_456_789n],
    ['7.500000000', 7_500_000_000n],
    ['0', 0n],
    ['1000000000000000.000000001', 1_000_000_000_000_000_000_000_001n],
  ])('reads %s as %s billionths', (value, nanos) => {
    expect(toNanos(value)).toBe(nanos);
  });

  it('refuses what is not a non-negative decimal of at most 9 places', () => {
    for (const bad of ['-1', 'abc', '1.0000000001', '', '1e-10'])
      expect(() => toNanos(bad)).toThrow(RangeError);
    expect(toNanos('1.5000000000000')).toBe(1_500_000_000n);
  });

  it('rounds the sum up once, not each value', () => {
    const values = [0.1, 0.1, 2.2, 0.6];
    // As numbers their sum is 3.0000000000000004: rounded up, a unit too many.
    expect(values.reduce((a, b) => a + b, 0)).toBeGreaterThan(3);
    expect(unitsRoundedUp(values.map((v) => toNanos(v)).reduce((a, b) => a + b, 0n))).toBe(3);
    expect(unitsRoundedUp(0n)).toBe(0);
    expect(unitsRoundedUp(1n)).toBe(1);
    expect(unitsRoundedUp(toNanos('1000000000000000.000000001'))).toBe(1_000_000_000_000_001);
    expect(splitNanos(toNanos(2.75))).toEqual({ units: 2, nanos: 750_000_000 });
  });

  it('moves a counter as rounding the running sum up moves it', () => {
    // Every sequence of fractions: the counter's steps add up to the rounded-up sum.
    const fractions = [250_000_000, 750_000_000, 1, 999_999_999, 500_000_000, 500_000_000, 3];
    let frac = 0;
    let used = 0;
    let exact = 0n;
    for (const nanos of fractions) {
      const { after, step } = fractionStep(frac, nanos);
      frac = after;
      used += step;
      exact += BigInt(nanos);
      expect(used).toBe(unitsRoundedUp(exact));
      expect(frac).toBe(splitNanos(exact).nanos);
    }
  });
});

describe('a total in plain decimal form', () => {
  it('drops trailing zeros and keeps every digit', () => {
    expect(decimalText('12.500000000')).toBe('12.5');
    expect(decimalText('7')).toBe('7');
    expect(decimalText('0.000000000')).toBe('0');
    expect(decimalText('-0.000000000')).toBe('0');
    expect(decimalText('-0.000000001')).toBe('-0.000000001');
    expect(decimalText('0012.10')).toBe('12.1');
    // Past a double's 15–17 digits: the text is exact where Number is not.
    expect(decimalText('123456789012345678.123456789')).toBe('123456789012345678.123456789');
    expect(Number(decimalText('123456789012345678.123456789'))).toBe(123456789012345680);
  });

  it('refuses anything that is not a decimal', () => {
    for (const bad of ['', '1e5', 'NaN', '1.', '.5', ' 1', '1,5', '\u0000']) {
      expect(() => decimalText(bad)).toThrow(/not a decimal total/);
    }
  });
});
