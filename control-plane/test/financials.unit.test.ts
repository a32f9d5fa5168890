import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { monthsOf, priorOf, reportPeriod } from '../src/modules/financials/periods';
import { recognisedBy } from '../src/modules/financials/service';
import { platformFeeOf } from '../src/modules/ledger/service';

const now = new Date('2026-11-25T10:00:00.000Z');
const range = (name: string) => {
  const p = reportPeriod(name, now);
  return p === undefined
    ? undefined
    : [p.label, p.start.toISOString().slice(0, 10), p.end.toISOString().slice(0, 10)];
};

describe('report periods', () => {
  it('names every form in UTC calendar months', () => {
    expect(range('this-month')).toEqual(['Nov 2026', '2026-11-01', '2026-12-01']);
    expect(range('last-month')).toEqual(['Oct 2026', '2026-10-01', '2026-11-01']);
    expect(range('this-quarter')).toEqual(['Q4 2026', '2026-10-01', '2027-01-01']);
    expect(range('last-quarter')).toEqual(['Q3 2026', '2026-07-01', '2026-10-01']);
    expect(range('q1-2026')).toEqual(['Q1 2026', '2026-01-01', '2026-04-01']);
    expect(range('this-year')).toEqual(['2026', '2026-01-01', '2027-01-01']);
    expect(range('last-year')).toEqual(['2025', '2025-01-01', '2026-01-01']);
    expect(range('last-6-months')).toEqual(['May 2026 – Oct 2026', '2026-05-01', '2026-11-01']);
    expect(range('last-1-months')).toEqual(range('last-month'));
    expect(range('last-12-months')).toEqual(['Nov 2025 – Oct 2026', '2025-11-01', '2026-11-01']);
  });

  it('refuses anything else', () => {
    for (const bad of [
      '',
      'q5-2026',
      'q1-26',
      'last-0-months',
      'last-121-months',
      'next-month',
      'q1-1999',
      'THIS-MONTH',
    ])
      expect(reportPeriod(bad, now)).toBeUndefined();
  });

  it('has a prior period of the same length and one element per month', () => {
    const q1 = reportPeriod('q1-2026', now);
    if (q1 === undefined) throw new Error('q1-2026');
    expect(priorOf(q1)).toMatchObject({
      label: 'Q4 2025',
      start: new Date('2025-10-01'),
      end: new Date('2026-01-01'),
    });
    expect(monthsOf(q1).map((m) => m.label)).toEqual(['2026-01', '2026-02', '2026-03']);
    const year = reportPeriod('last-year', now);
    if (year === undefined) throw new Error('last-year');
    expect(priorOf(year).label).toBe('2024');
  });
});

describe('revenue recognition', () => {
  const entry = (amount: number, received: string, start?: string, end?: string) => ({
    amount,
    occurred_at: new Date(received),
    recognition_start: start === undefined ? null : new Date(start),
    recognition_end: end === undefined ? null : new Date(end),
  });

  it('spreads a prepaid period evenly and earns other payments when received', () => {
    const month = entry(1000, '2026-03-15T00:00:00Z', '2026-03-15T00:00:00Z', '2026-04-15T00:00:00Z');
    expect(recognisedBy(month, new Date('2026-03-15T00:00:00Z'))).toBe(0);
    // 17 of 31 days: 548.39 → 548.
    expect(recognisedBy(month, new Date('2026-04-01T00:00:00Z'))).toBe(548);
    expect(recognisedBy(month, new Date('2026-04-15T00:00:00Z'))).toBe(1000);
    const once = entry(250, '2026-03-02T00:00:00Z');
    expect(recognisedBy(once, new Date('2026-03-02T00:00:00Z'))).toBe(0);
    expect(recognisedBy(once, new Date('2026-03-02T00:00:01Z'))).toBe(250);
    // Usage paid in arrears: its period is over when received, so it is earned then.
    const arrears = entry(99, '2026-04-01T00:05:00Z', '2026-03-01T00:00:00Z', '2026-04-01T00:00:00Z');
    expect(recognisedBy(arrears, new Date('2026-03-31T00:00:00Z'))).toBe(0);
    expect(recognisedBy(arrears, new Date('2026-04-02T00:00:00Z'))).toBe(99);
  });

  it('adds up to the payment over any cut of its period', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 1, max: 400 * 86_400_000 }),
        fc.array(fc.integer({ min: 0, max: 500 * 86_400_000 }), { maxLength: 12 }),
        (amount, length, cuts) => {
          const start = Date.parse('2026-01-01T00:00:00Z');
          const e = entry(
            amount,
            new Date(start).toISOString(),
            new Date(start).toISOString(),
            new Date(start + length).toISOString(),
          );
          const points = [start, ...cuts.map((c) => start + c).sort((a, b) => a - b), start + length + 1];
          let sum = 0;
          for (let i = 1; i < points.length; i++)
            sum +=
              recognisedBy(e, new Date(points[i] as number)) -
              recognisedBy(e, new Date(points[i - 1] as number));
          return sum === amount && points.every((p) => recognisedBy(e, new Date(p)) <= amount);
        },
      ),
    );
  });
});

describe('the platform fee', () => {
  it('takes basis points half to even plus the fixed part, never more than the payment', () => {
    expect(platformFeeOf(1000, { bps: 290, fixed: 30 })).toBe(59);
    // 2.9% of 50 is 1.45 → 1; of 150 is 4.35 → 4; of 1050 is 30.45 → 30.
    expect(platformFeeOf(50, { bps: 290, fixed: 0 })).toBe(1);
    expect(platformFeeOf(150, { bps: 290, fixed: 0 })).toBe(4);
    // Exactly half: 0.5 → 0, 1.5 → 2.
    expect(platformFeeOf(50, { bps: 100, fixed: 0 })).toBe(0);
    expect(platformFeeOf(150, { bps: 100, fixed: 0 })).toBe(2);
    expect(platformFeeOf(10, { bps: 290, fixed: 30 })).toBe(10);
    expect(platformFeeOf(0, { bps: 290, fixed: 30 })).toBe(0);
  });
});
