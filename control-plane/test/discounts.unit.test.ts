import { describe, expect, it } from 'vitest';
import { type Discount, discountedAt, discountWords } from '../src/modules/billing/discounts';
import type { StoredLine } from '../src/modules/billing/repository';

const discount = (over: Partial<Discount>): Discount => ({
  coupon: 'cpn_1',
  name: 'Spring',
  code: null,
  percentOffBps: null,
  amountOff: null,
  currency: null,
  duration: 'forever',
  durationInMonths: null,
  start: '2026-01-01T00:00:00.000Z',
  end: null,
  ...over,
});

const line = (kind: StoredLine['kind'], amount: number): StoredLine => ({
  kind,
  description: kind,
  quantity: 1,
  unitAmount: String(amount),
  amount,
  period: null,
});

describe('discounts in words and on invoices', () => {
  it('words an amount off in the currency’s own minor units, as the pages do', () => {
    expect(discountWords(discount({ amountOff: 500, currency: 'usd' }))).toBe('$5.00 off');
    expect(discountWords(discount({ amountOff: 500, currency: 'jpy' }))).toBe('¥500 off');
    expect(discountWords(discount({ amountOff: 1234, currency: 'eur' }))).toBe('€12.34 off');
    expect(discountWords(discount({ percentOffBps: 1250 }))).toBe('12.5% off');
    expect(discountWords(discount({ percentOffBps: 2000 }))).toBe('20% off');
    expect(discountWords(discount({ percentOffBps: 1 }))).toBe('0.01% off');
  });

  it('takes a discount off only invoices issued before its end', () => {
    const lines = [line('base', 1000), line('usage', 999)];
    const ending = discount({ percentOffBps: 5000, end: '2026-03-01T00:00:00.000Z' });
    const before = discountedAt(lines, ending, new Date('2026-02-28T23:59:59.999Z'));
    expect(before.map((l) => [l.kind, l.amount])).toEqual([
      ['base', 1000],
      ['discount', -500],
      ['usage', 999],
      // 499.5 rounded half to even.
      ['discount', -500],
    ]);
    expect(discountedAt(lines, ending, new Date('2026-03-01T00:00:00.000Z'))).toBe(lines);
    expect(discountedAt(lines, null, new Date('2026-02-01T00:00:00.000Z'))).toBe(lines);
  });

  it('spends an amount off over the charges in order and carries nothing over', () => {
    const lines = [line('base', 300), line('credits_applied', -100), line('usage', 400)];
    const out = discountedAt(lines, discount({ amountOff: 500, currency: 'usd' }), new Date());
    expect(out.filter((l) => l.kind === 'discount').map((l) => [l.discounts, l.amount])).toEqual([
      ['base', -300],
      ['usage', -200],
    ]);
    expect(discountedAt(out, discount({ amountOff: 500, currency: 'usd' }), new Date())).toBe(out);
  });
});
