import { describe, expect, it } from 'vitest';
import { amountExample, decimal, minorName, minorOf, money } from '../src/money';

describe('amounts typed in the console, in each currency’s minor units', () => {
  it('reads two-decimal currencies in cents', () => {
    expect(minorOf('9', 'usd')).toBe(900);
    expect(minorOf('9.5', 'usd')).toBe(950);
    expect(minorOf(' 19.99 ', 'eur')).toBe(1999);
    expect(minorOf('9.999', 'usd')).toBeUndefined();
  });

  it('reads zero-decimal currencies as they are, never times a hundred', () => {
    expect(minorOf('500', 'jpy')).toBe(500);
    expect(minorOf('500', 'JPY')).toBe(500);
    expect(minorOf('500.5', 'jpy')).toBeUndefined();
    expect(minorOf('1000', 'krw')).toBe(1000);
  });

  it('reads three-decimal currencies in thousandths', () => {
    expect(minorOf('1.5', 'kwd')).toBe(1500);
    expect(minorOf('1.234', 'kwd')).toBe(1234);
    expect(minorOf('1.2345', 'kwd')).toBeUndefined();
  });

  it('refuses what is not an amount', () => {
    for (const text of ['', '-1', '1e3', '1,5', '.5', '5.', 'NaN', '1234567890', '\u0000']) {
      expect(minorOf(text, 'usd')).toBeUndefined();
    }
  });

  it('shows and names amounts in the same units it reads them', () => {
    expect(money(500, 'jpy')).toBe('¥500');
    expect(money(950, 'usd')).toBe('$9.50');
    expect(decimal(1500, 'kwd')).toBe('1.500');
    expect(amountExample('usd')).toBe('9.00');
    expect(amountExample('jpy', 5)).toBe('500');
    expect(minorName('usd')).toBe('Cents');
    expect(minorName('jpy')).toBe('JPY');
    expect(minorName('kwd')).toBe('KWD thousandths');
  });
});
