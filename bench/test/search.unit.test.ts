import { describe, expect, it } from 'vitest';
import { inversions, RateSearch, searchAll, type Trial } from '../search';

const trial = (target: string, rate: number, sustained: boolean): Trial => ({
  target,
  rate,
  achieved: rate,
  requests: rate * 8,
  dropped: sustained ? 0 : 10,
  failedChecks: 0,
  p50: 1,
  p90: 1,
  p99: 1,
  sustained,
});

/** Drives one search against a target that holds any rate up to `capacity`, except where `stall` says. */
function drive(capacity: number, stall: (rate: number, attempt: number) => boolean = () => false) {
  const search = new RateSearch(1000);
  const attempts = new Map<number, number>();
  for (let rate = search.next(); rate !== undefined; rate = search.next()) {
    const attempt = (attempts.get(rate) ?? 0) + 1;
    attempts.set(rate, attempt);
    search.record(trial('T', rate, rate <= capacity && !stall(rate, attempt)));
  }
  return { search, attempts };
}

describe('max-rate search', () => {
  it('grows by 1.5x, then bisects to the highest rate that held, below the capacity and close to it', () => {
    const { search, attempts } = drive(2600);
    expect(search.result).toBeLessThanOrEqual(2600);
    expect(search.result).toBeGreaterThan(2600 * 0.95);
    expect([...attempts.keys()].slice(0, 4)).toEqual([1000, 1500, 2250, 3375]);
    // Four bisection steps at most after the first failed rate.
    expect(attempts.size).toBeLessThanOrEqual(4 + 4);
  });

  it('runs a failed rate once more, and only a second failure counts', () => {
    const { search, attempts } = drive(2600);
    for (const [rate, n] of attempts) expect(n).toBe(rate <= 2600 ? 1 : 2);
    // One stall at 1500 does not end the search there.
    const stalled = drive(2600, (rate, attempt) => rate === 1500 && attempt === 1);
    expect(stalled.attempts.get(1500)).toBe(2);
    expect(stalled.search.result).toBe(search.result);
    // Two at the same rate do.
    const twice = drive(2600, (rate) => rate === 1500);
    expect(twice.search.result).toBeLessThan(1500);
  });

  it('gives 0 when even the first rate fails twice, after searching below it', () => {
    const { search, attempts } = drive(100);
    expect(search.result).toBeLessThanOrEqual(100);
    expect(attempts.get(1000)).toBe(2);
    expect(search.trials.length).toBeGreaterThan(2);
  });
});

describe('searches in turns', () => {
  it('runs one trial per target per round, the order rotating, until every search is over', async () => {
    const calls: string[] = [];
    const capacity: Record<string, number> = { A: 5000, B: 1200 };
    const searches = await searchAll(['A', 'B'] as const, 1000, async (target, rate) => {
      calls.push(target);
      return trial(target, rate, rate <= (capacity[target] ?? 0));
    });
    // While both run, each round (a pair of calls) has one trial of each, and the order rotates.
    const bothRunning = calls.slice(0, 2 * searches.B.trials.length);
    for (let i = 1; i < bothRunning.length; i++) {
      if (i % 2 === 1) expect(bothRunning[i]).not.toBe(bothRunning[i - 1]);
    }
    expect(calls.slice(0, 4)).toEqual(['A', 'B', 'B', 'A']);
    expect(calls.filter((t) => t === 'A')).toHaveLength(searches.A.trials.length);
    expect(searches.A.result).toBeLessThanOrEqual(5000);
    expect(searches.A.result).toBeGreaterThan(4500);
    expect(searches.B.result).toBeLessThanOrEqual(1200);
    expect(searches.B.result).toBeGreaterThan(1100);
  });
});

describe('inversions', () => {
  it('says nothing when every target is at most as fast as the one before it', () => {
    expect(inversions({ B0: 5000, B1: 4000, BP: 3500, B2: 3000, B3: 3000 })).toBe('');
  });

  it('names each pair where a target doing more work came out faster', () => {
    const text = inversions({ B0: 3305, B1: 4219, BP: 3481, B2: 3235, B3: 3375 });
    expect(text).toContain('B1 (4219) above B0 (3305)');
    expect(text).toContain('B3 (3375) above B2 (3235)');
    expect(text).not.toContain('BP (');
  });
});
