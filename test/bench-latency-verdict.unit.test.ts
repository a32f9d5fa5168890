import { describe, expect, it } from 'vitest';
import { coresBusyBetween } from '../bench/harness/cpu';
import type { LatencyTrial } from '../bench/harness/load';
import type { ShareTrials } from '../bench/latency';
import { latencyVerdict } from '../bench/latency-report';

const trial = (p99: number, p999: number, valid = true): LatencyTrial => ({
  target: 'x',
  rate: 1000,
  requests: 8000,
  achievedRate: 1000,
  success: 1,
  p50: 0.3,
  p99,
  p999,
  valid,
});

const half = (hop: LatencyTrial[], origin: LatencyTrial[]): ShareTrials => ({
  target: 'B3',
  share: 0.5,
  rate: 1000,
  hop,
  origin,
  hopCpuMicros: 40,
  hopCoreBusy: 0.4,
  waitedMsPerSecond: 10,
  originWaited: { withHop: 10, alone: 5 },
});

// The latency goal's verdict: B3's tail over the origin's at half B3's maximum, each side's best trial.
describe('the bench latency goal verdict', () => {
  it('is met when B3 adds within the goal and the origin alone was within it too', () => {
    expect(latencyVerdict(half([trial(2.5, 9), trial(3, 8)], [trial(0.9, 3)])).label).toBe('met');
  });

  it('is not met when B3 adds more than 2 ms at p99 or 10 at p99.9', () => {
    expect(latencyVerdict(half([trial(3.1, 5)], [trial(1, 3)])).met).toBe(false);
    expect(latencyVerdict(half([trial(1.5, 14)], [trial(1, 3)])).label).toBe('**not met**');
  });

  it('is not resolved when the origin alone had a tail over the goal', () => {
    // The slower machine's run of 2026-11-30: added 1.3 / −23 ms over an origin at 5.1 / 40.7.
    const verdict = latencyVerdict(half([trial(6.4, 17.7)], [trial(5.1, 40.7)]));
    expect(verdict.met).toBe(false);
    expect(verdict.label).toBe('**not resolved**');
    expect(verdict.reason).toContain('p99 5.100 / p99.9 40.700');
  });

  it('is not met when no trial of a side was valid', () => {
    expect(latencyVerdict(half([trial(1, 2, false)], [trial(1, 2)])).met).toBe(false);
    expect(latencyVerdict(half([trial(1, 2)], [trial(1, 2, false)])).met).toBe(false);
  });
});

describe("the bench's per-core busy shares from /proc/stat samples", () => {
  it('divides each CPU’s busy time by its elapsed time', () => {
    const before: Array<[number, number]> = [
      [100, 1000],
      [500, 1000],
    ];
    const after: Array<[number, number]> = [
      [150, 1100],
      [590, 1100],
    ];
    expect(coresBusyBetween(before, after)).toEqual([0.5, 0.9]);
  });

  it('reads 0 for a CPU whose time did not advance', () => {
    expect(coresBusyBetween([[5, 10]], [[5, 10]])).toEqual([0]);
  });
});
