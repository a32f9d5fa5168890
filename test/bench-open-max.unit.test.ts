import { describe, expect, it } from 'vitest';
import type { LatencyTrial } from '../bench/harness/load';
import {
  type RateTried,
  type RateVerdict,
  SEARCH_RESOLUTION,
  searchOpenMax,
  triedAt,
} from '../bench/open-max';

/**
 * A target that carries every rate up to `capacity`; each rate tried is kept. `medianMisses`:
 * rates whose first trial is on schedule but misses only by its median (a stall of the machine).
 * `saturated`: the rate a trial behind schedule reached, as vegeta tells it (absent: not told).
 */
function targetUpTo(capacity: number, medianMisses: readonly number[] = [], saturated?: number) {
  const tried: number[] = [];
  const trial = async (rate: number): Promise<RateVerdict> => {
    const again = tried.includes(rate);
    tried.push(rate);
    if (medianMisses.includes(rate) && !again) return { carried: false, onSchedule: true };
    if (rate <= capacity) return { carried: true, onSchedule: true };
    return saturated === undefined
      ? { carried: false, onSchedule: false }
      : { carried: false, onSchedule: false, reached: Math.min(rate, saturated) };
  };
  return { tried, trial };
}

describe("the open-model maximum's search (bench/open-max.ts)", () => {
  it('takes the starting rate, rounded to a hundred, when it is carried', async () => {
    const t = targetUpTo(10_000);
    expect(await searchOpenMax(7_471, t.trial)).toBe(7_500);
    expect(t.tried).toEqual([7_500]);
  });

  it('bisects below a starting rate not carried, to a carried rate within the resolution', async () => {
    const t = targetUpTo(5_730);
    const max = await searchOpenMax(7_471, t.trial);
    expect(max).toBeLessThanOrEqual(5_730);
    expect(max).toBeGreaterThanOrEqual(5_730 / (1 + SEARCH_RESOLUTION) - 100);
    expect(t.tried[0]).toBe(7_500);
    expect(t.tried.length).toBeLessThanOrEqual(7);
  });

  it('tries a rate missed only by its median once more before it counts as not carried', async () => {
    const t = targetUpTo(10_000, [7_500]);
    expect(await searchOpenMax(7_500, t.trial)).toBe(7_500);
    expect(t.tried).toEqual([7_500, 7_500]);
  });

  it('does not try again a rate that fell behind schedule', async () => {
    const t = targetUpTo(4_000);
    await searchOpenMax(7_500, t.trial);
    expect(t.tried.filter((r) => r === 7_500)).toHaveLength(1);
  });

  it('takes the rate a trial behind schedule reached as out of reach, in fewer trials', async () => {
    // As nginx in the run of 2026-12-07 05:29: wrk's 53,300 on one core, 11,200 carried, about
    // 13,800 reached by vegeta's calls when behind.
    const told = targetUpTo(11_200, [], 13_772);
    const blind = targetUpTo(11_200);
    const max = await searchOpenMax(53_300, told.trial);
    expect(max).toBe(await searchOpenMax(53_300, blind.trial));
    expect(max).toBeLessThanOrEqual(11_200);
    expect(max).toBeGreaterThanOrEqual(11_200 / (1 + SEARCH_RESOLUTION) - 100);
    // The bisection starts at 13,800 rather than 53,300: no rate above it is tried.
    expect(told.tried.slice(1).every((rate) => rate < 13_800)).toBe(true);
    expect(told.tried.length).toBeLessThan(blind.tried.length);
  });

  it('ignores a rate reached that is at or below the floor', async () => {
    // A generator that stalled (or a target that failed) reaches next to nothing: the search
    // goes on as without it rather than end at its floor.
    const t = targetUpTo(5_730, [], 300);
    const max = await searchOpenMax(7_471, t.trial);
    expect(max).toBeGreaterThanOrEqual(5_730 / (1 + SEARCH_RESOLUTION) - 100);
  });

  it('bisects down to the floor it is given', async () => {
    const t = targetUpTo(3_000);
    expect(await searchOpenMax(6_000, t.trial, 1 / 2)).toBe(3_000);
    expect(Math.min(...t.tried)).toBe(3_000);
  });

  it('tries the assumed floor when nothing above it was carried, and gives 0 if it is not', async () => {
    const some = targetUpTo(950);
    expect(await searchOpenMax(7_500, some.trial)).toBe(900);
    expect(some.tried.at(-1)).toBe(900);
    const none = targetUpTo(0);
    expect(await searchOpenMax(7_500, none.trial)).toBe(0);
  });
});

describe('a search trial as kept (triedAt)', () => {
  const trial = (p50: number, valid: boolean): LatencyTrial => ({
    target: 'L',
    rate: 5000,
    requests: 10_000,
    achievedRate: 5000,
    success: 1,
    p50,
    p99: 9,
    p999: 20,
    valid,
  });

  it('keeps each rate with its verdict and both cores busy over the trial', () => {
    const tried: RateTried[] = [];
    expect(triedAt(5000, tried, () => trial(0.6, true))).toEqual({ carried: true, onSchedule: true });
    // vegeta's trials tell the rate reached; open-load's do not.
    expect(triedAt(8000, [], () => ({ ...trial(5, false), reached: 6400 }))).toEqual({
      carried: false,
      onSchedule: false,
      reached: 6400,
    });
    expect(triedAt(6000, tried, () => trial(1.4, true))).toEqual({ carried: false, onSchedule: true });
    expect(triedAt(7000, tried, () => trial(0.6, false))).toEqual({ carried: false, onSchedule: false });
    expect(tried.map((t) => [t.rate, t.carried, t.p50])).toEqual([
      [5000, true, 0.6],
      [6000, false, 1.4],
      [7000, false, 0.6],
    ]);
    for (const t of tried)
      for (const share of [...(t.cores ?? []), ...(t.stolen ?? [])]) expect(share).toBeGreaterThanOrEqual(0);
    expect(tried.every((t) => t.cores?.length === 2 && t.stolen?.length === 2)).toBe(true);
  });
});
