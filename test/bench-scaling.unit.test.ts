import { describe, expect, it } from 'vitest';
import {
  benchCores,
  cpuList,
  parseCpuList,
  parseSplit,
  scalingPlan,
  splitPlan,
} from '../bench/harness/cores';
import { type ScalingResult, type ScalingStep, scalingGoalRow, scalingSection } from '../bench/scaling';

describe('the bench’s CPUs', () => {
  it('reads the kernel’s CPU lists: ranges, single CPUs, gaps', () => {
    expect(parseCpuList('0-1')).toEqual([0, 1]);
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList('5')).toEqual([5]);
    expect(parseCpuList('2,0,1-2')).toEqual([0, 1, 2]);
  });

  it('refuses what is not a CPU list', () => {
    expect(() => parseCpuList('0-a')).toThrow(/not a CPU list/);
    expect(() => parseCpuList('3-1')).toThrow(/not a CPU list/);
    expect(() => parseCpuList('-1')).toThrow(/not a CPU list/);
  });

  it('puts a pinned hop on the first usable CPU and the rest on the second, whatever their numbers', () => {
    expect(benchCores([0, 1])).toEqual({ usable: [0, 1], hop: '0', rest: '1', all: '0,1' });
    // A process confined to CPUs 4–7 of a larger machine pins there, and goes back to all four.
    expect(benchCores([4, 5, 6, 7])).toEqual({ usable: [4, 5, 6, 7], hop: '4', rest: '5', all: '4,5,6,7' });
  });

  it('refuses to pin a hop apart on one CPU', () => {
    expect(() => benchCores([3])).toThrow(/needs two CPUs/);
  });
});

describe('the scaling trials’ plan', () => {
  it('measures nothing under four CPUs: the generator would share the workers’ cores', () => {
    expect(scalingPlan([0])).toBeUndefined();
    expect(scalingPlan([0, 1])).toBeUndefined();
    expect(scalingPlan([0, 1, 2])).toBeUndefined();
  });

  it('gives the proxy the first half and tries 1, 2, 4, … workers and the half itself', () => {
    expect(scalingPlan([0, 1, 2, 3])).toEqual({ proxy: [0, 1], rest: [2, 3], steps: [1, 2] });
    expect(scalingPlan([0, 1, 2, 3, 4])).toEqual({ proxy: [0, 1], rest: [2, 3, 4], steps: [1, 2] });
    expect(scalingPlan(parseCpuList('0-11'))).toEqual({
      proxy: [0, 1, 2, 3, 4, 5],
      rest: [6, 7, 8, 9, 10, 11],
      steps: [1, 2, 4, 6],
    });
    expect(scalingPlan(parseCpuList('0-15'))?.steps).toEqual([1, 2, 4, 8]);
  });

  it('takes a split asked for, "proxy/rest", and refuses one that overlaps or leaves a side empty', () => {
    expect(parseSplit('0/1')).toEqual({ proxy: [0], rest: [1], steps: [1] });
    expect(parseSplit('0-2/3-7')).toEqual({ proxy: [0, 1, 2], rest: [3, 4, 5, 6, 7], steps: [1, 2, 3] });
    expect(() => parseSplit('0-1/1-2')).toThrow(/both sides/);
    expect(() => parseSplit('0-1')).toThrow(/--scaling-cpus/);
    expect(() => parseSplit('0/1/2')).toThrow(/--scaling-cpus/);
    expect(() => splitPlan([], [1])).toThrow(/both sides/);
    expect(cpuList([0, 2, 3])).toBe('0,2,3');
  });
});

const step = (workers: number, rps: number, extra: Partial<ScalingStep> = {}): ScalingStep => ({
  workers,
  cpus: cpuList([...Array(workers).keys()]),
  connections: 32 * workers,
  rps,
  cpuMicros: 60,
  proxyCpusBusy: 0.97,
  restCpusBusy: 0.6,
  errors: 0,
  unsuccessful: 0,
  rounds: [],
  ...extra,
});

const result = (steps: ScalingStep[], extra: Partial<ScalingResult> = {}): ScalingResult => ({
  plan: { proxy: [0, 1, 2, 3], rest: [4, 5, 6, 7], steps: steps.map((s) => s.workers) },
  forced: false,
  origin: 'c',
  rounds: 3,
  trialSeconds: 5,
  connectionsPerWorker: 32,
  wrkThreads: 2,
  steps,
  ...extra,
});

describe('the bench report’s scaling section', () => {
  it('divides each worker count’s calls/s by one worker’s, and per worker', () => {
    const section = scalingSection(result([step(1, 15_000), step(2, 29_000), step(4, 54_000)]));
    expect(section).toContain('| 2 | 0,1 | 29000 | 1.93 (0.97 a worker) |');
    expect(section).toContain('| 4 | 0,1,2,3 | 54000 | 3.60 (0.90 a worker) |');
    expect(section).toContain("0,1,2,3 for the proxy's workers");
    expect(section).toContain('wrk (2 threads)');
  });

  it('says when the generator’s side was full, so the figure is not the proxy’s', () => {
    const section = scalingSection(result([step(1, 15_000), step(2, 20_000, { restCpusBusy: 0.95 })]));
    expect(section).toContain('95 % (the other half full: held back there)');
    expect(section).not.toContain('60 % (the other half full');
  });

  it('names a split asked for', () => {
    expect(
      scalingSection(
        result([step(1, 15_000)], { forced: true, plan: { proxy: [0], rest: [1], steps: [1] } }),
      ),
    ).toContain("Asked for with `--scaling-cpus`: the proxy's CPUs 0, the rest 1.");
  });

  it('meets the goal only when every count is near-linear and nothing failed', () => {
    expect(scalingGoalRow(result([step(1, 15_000), step(2, 29_000), step(4, 54_000)]))).toContain('| met |');
    expect(scalingGoalRow(result([step(1, 15_000), step(2, 29_000), step(4, 40_000)]))).toContain(
      '| **not met** |',
    );
    expect(scalingGoalRow(result([step(1, 15_000), step(2, 29_000, { unsuccessful: 3 })]))).toContain(
      '**invalid**: 3 calls failed or refused',
    );
    expect(scalingGoalRow(result([step(1, 15_000)]))).toContain('not measured (one worker count)');
  });
});
