import { describe, expect, it } from 'vitest';
import { bucketValue, LATENCY_ACCURACY, percentilesOf, ZERO_BUCKET } from '../src/analytics/latency';
import { byMonth, MAX_RUNS, rebuildBatches, runsOf, SLOT_MS, splitRange } from '../src/analytics/slots';

const T = Date.UTC(2026, 0, 31, 23, 0);

describe('analytics slots', () => {
  it('joins contiguous slots into runs', () => {
    expect(runsOf([T + SLOT_MS, T, T + 3 * SLOT_MS, T])).toEqual([
      { from: T, to: T + 2 * SLOT_MS },
      { from: T + 3 * SLOT_MS, to: T + 4 * SLOT_MS },
    ]);
  });

  it('splits a range into clean whole slots and the rest, covering it once', () => {
    const range = { from: T - 5_000, to: T + 4 * SLOT_MS + 7 };
    // Slot 2 is dirty; a slot reaching past the end is clean but not whole inside.
    const { rolled, raw } = splitRange(range, [T, T + SLOT_MS, T + 3 * SLOT_MS, T + 4 * SLOT_MS]);
    expect(rolled).toEqual([
      { from: T, to: T + 2 * SLOT_MS },
      { from: T + 3 * SLOT_MS, to: T + 4 * SLOT_MS },
    ]);
    expect(raw).toEqual([
      { from: T - 5_000, to: T },
      { from: T + 2 * SLOT_MS, to: T + 3 * SLOT_MS },
      { from: T + 4 * SLOT_MS, to: T + 4 * SLOT_MS + 7 },
    ]);
  });

  it('reads everything raw rather than write a query of too many runs', () => {
    const every = Array.from({ length: 2 * MAX_RUNS + 2 }, (_, i) => T + 2 * i * SLOT_MS);
    const range = { from: T, to: T + 4 * MAX_RUNS * SLOT_MS };
    expect(splitRange(range, every)).toEqual({ rolled: [], raw: [range] });
  });

  it('cuts ranges at month starts', () => {
    expect(byMonth({ from: T, to: T + 8 * SLOT_MS })).toEqual([
      { from: T, to: Date.UTC(2026, 1, 1) },
      { from: Date.UTC(2026, 1, 1), to: T + 8 * SLOT_MS },
    ]);
  });
});

describe('rebuild batches', () => {
  it("puts a month's runs in one rebuild, cut at month starts and after MAX_RUNS runs", () => {
    const feb = Date.UTC(2026, 1, 1);
    // Runs in January (one reaching into February), then scattered February slots.
    const january = [
      T - 30 * SLOT_MS,
      T - 10 * SLOT_MS,
      T - 9 * SLOT_MS,
      ...[0, 1, 2, 3, 4].map((i) => T + i * SLOT_MS),
    ];
    const february = Array.from({ length: MAX_RUNS + 1 }, (_, i) => feb + (10 + 3 * i) * SLOT_MS);
    const batches = rebuildBatches([...february, ...january]);
    expect(batches).toEqual([
      [
        { from: T - 30 * SLOT_MS, to: T - 29 * SLOT_MS },
        { from: T - 10 * SLOT_MS, to: T - 8 * SLOT_MS },
        { from: T, to: feb },
      ],
      [
        { from: feb, to: feb + SLOT_MS },
        ...february.slice(0, MAX_RUNS - 1).map((s) => ({ from: s, to: s + SLOT_MS })),
      ],
      february.slice(MAX_RUNS - 1).map((s) => ({ from: s, to: s + SLOT_MS })),
    ]);
    expect(rebuildBatches([])).toEqual([]);
  });
});

describe('latency histogram', () => {
  it('takes nearest-rank percentiles, each within 1 % of the latency at that rank', () => {
    const gamma = (1 + LATENCY_ACCURACY) / (1 - LATENCY_ACCURACY);
    const latencies = Array.from({ length: 997 }, (_, i) => 0.004 + ((i * 7919) % 997) * 1.37);
    const histogram: Record<string, number> = {};
    for (const l of latencies) {
      const bucket = Math.ceil(Math.log(l) / Math.log(gamma));
      histogram[bucket] = (histogram[bucket] ?? 0) + 1;
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    const levels = [0.01, 0.5, 0.95, 0.99, 1];
    const got = percentilesOf(histogram, levels) ?? [];
    levels.forEach((level, i) => {
      const exact = sorted[Math.ceil(level * sorted.length) - 1] ?? 0;
      expect(Math.abs((got[i] ?? 0) - exact)).toBeLessThanOrEqual(exact * LATENCY_ACCURACY + 0.0005);
    });
  });

  it('reads the zero bucket as 0, skips empty buckets and answers null for nothing', () => {
    expect(bucketValue(ZERO_BUCKET)).toBe(0);
    expect(percentilesOf({ [ZERO_BUCKET]: '3', 10: '0' }, [0.5, 0.99])).toEqual([0, 0]);
    expect(percentilesOf({}, [0.5])).toBeNull();
    expect(percentilesOf({ 5: 0 }, [0.5])).toBeNull();
  });
});
