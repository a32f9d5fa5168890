import { Histogram } from '@mcp-meter/contracts/metrics';
import { describe, expect, it } from 'vitest';
import type { LatencyTrial } from '../bench/harness/load';
import {
  betterFirst,
  type LimitCheckLatency,
  type LimitCheckResult,
  limitCheckBetween,
  limitCheckBuckets,
  limitCheckLatencyGoalRow,
  limitCheckLatencySection,
  processBetween,
} from '../bench/limit-check';

// The limit check's SLI as the control plane renders it (the same Histogram class and name).
const histogram = () =>
  new Histogram(
    'mcpmeter_control_plane_limit_check_seconds',
    'Time per SDK limit check (POST /v1/sdk/limits), arrival to the end of its answer',
  );

describe("the limit-check bench's reading of the control plane's histogram", () => {
  it('counts checks within the objective and the bounds of p99 and p99.9 over a trial', () => {
    const h = histogram();
    for (let i = 0; i < 500; i++) h.observe(0.2); // before the trial: slow checks, not counted
    const before = limitCheckBuckets(h.render());
    for (let i = 0; i < 9_950; i++) h.observe(0.0008);
    for (let i = 0; i < 40; i++) h.observe(0.02);
    for (let i = 0; i < 10; i++) h.observe(0.04);
    const during = limitCheckBetween(before, limitCheckBuckets(h.render()));
    expect(during.timed).toBe(10_000);
    expect(during.withinObjective).toBe(9_990);
    expect(during.p99AtMostMs).toBe(1);
    expect(during.p999AtMostMs).toBe(25);
  });

  it('sums the series of several label sets and ignores other metrics', () => {
    const page = `mcpmeter_control_plane_limit_check_seconds_bucket{le="0.025"} 3
mcpmeter_control_plane_limit_check_seconds_bucket{instance="b",le="0.025"} 4
mcpmeter_control_plane_limit_check_seconds_bucket{le="+Inf"} 5
mcpmeter_control_plane_request_seconds_bucket{le="0.025"} 100
`;
    const buckets = limitCheckBuckets(page);
    expect(buckets.get(0.025)).toBe(7);
    expect(buckets.get(Number.POSITIVE_INFINITY)).toBe(5);
    expect(buckets.size).toBe(2);
  });

  it('refuses a histogram without a bucket at the objective rather than guess', () => {
    const page = 'mcpmeter_control_plane_limit_check_seconds_bucket{le="0.05"} 3\n';
    expect(() => limitCheckBetween(new Map(), limitCheckBuckets(page))).toThrow(/no bucket at 0.025/);
  });
});

describe("the limit-check bench's reading of what held the control plane's process", () => {
  const page = (loopMax: number, gcMax: number, gcTotal: number, batches: number, batchSum: number) => `
mcpmeter_control_plane_event_loop_delay_seconds{quantile="0.5"} 0.000100
mcpmeter_control_plane_event_loop_delay_seconds{quantile="0.99"} 0.002000
mcpmeter_control_plane_event_loop_delay_seconds{quantile="1"} ${loopMax}
mcpmeter_control_plane_gc_pause_seconds_total{kind="minor"} ${gcTotal / 2}
mcpmeter_control_plane_gc_pause_seconds_total{kind="major"} ${gcTotal / 2}
mcpmeter_control_plane_gc_pause_max_seconds{kind="minor"} ${gcMax / 3}
mcpmeter_control_plane_gc_pause_max_seconds{kind="major"} ${gcMax}
mcpmeter_ingest_batch_seconds_count ${batches}
mcpmeter_ingest_batch_seconds_sum ${batchSum}
`;

  it("takes the loop's and collector's longest from the page after, and counters as differences", () => {
    const held = processBetween(page(0.5, 0.4, 2, 10, 1), page(0.09, 0.012, 2.5, 14, 1.2));
    expect(held.loopMaxMs).toBeCloseTo(90, 6);
    expect(held.gcLongestMs).toBeCloseTo(12, 6);
    expect(held.gcTotalMs).toBeCloseTo(500, 6);
    expect(held.batches).toBe(4);
    expect(held.batchMs).toBeCloseTo(200, 6);
  });
});

describe("the limit-check bench's choice between a share's two trials", () => {
  const trial = (valid: boolean): LatencyTrial => ({
    target: 'L',
    rate: 1000,
    requests: 8000,
    achievedRate: 1000,
    success: valid ? 1 : 0.9,
    p50: 1,
    p99: 10,
    p999: 20,
    valid,
  });
  const run = (valid: boolean, withinObjective: number): LimitCheckLatency => ({
    share: 0.5,
    trial: trial(valid),
    timed: 8000,
    withinObjective,
    p99AtMostMs: 25,
    p999AtMostMs: 50,
  });

  it('reads the trial with more checks within the objective', () => {
    const [a, b] = [run(true, 7990), run(true, 7900)];
    expect(betterFirst(a, b)).toEqual([a, b]);
    expect(betterFirst(b, a)).toEqual([a, b]);
  });

  it('reads a valid trial over an invalid one whatever their shares', () => {
    const [valid, invalid] = [run(true, 7000), run(false, 8000)];
    expect(betterFirst(invalid, valid)).toEqual([valid, invalid]);
  });
});

describe("the limit-check report's maximum", () => {
  const half: LimitCheckLatency = {
    share: 0.5,
    trial: {
      target: 'L',
      rate: 2800,
      requests: 22400,
      achievedRate: 2800,
      success: 1,
      p50: 0.6,
      p99: 9,
      p999: 20,
      valid: true,
    },
    timed: 22400,
    withinObjective: 22390,
    p99AtMostMs: 10,
    p999AtMostMs: 25,
  };
  const result = (openMax?: LimitCheckResult['openMax']): LimitCheckResult => ({
    rps: 7471.2,
    answered: 72000,
    errors: 0,
    counted: 72000,
    latency: [half],
    ...(openMax === undefined ? {} : { openMax }),
  });
  const tried = [
    { rate: 7500, carried: false, achievedRate: 7100, success: 1, p50: 3.2 },
    { rate: 4200, carried: true, achievedRate: 4200, success: 1, p50: 0.6 },
    { rate: 5600, carried: true, achievedRate: 5600, success: 1, p50: 0.7 },
  ];

  it("states the shares as of the open-model maximum, with wrk's rate beside it", () => {
    const r = result({ max: 5600, tried });
    expect(limitCheckLatencyGoalRow(r)).toContain(
      "its open-model maximum (5600/s; wrk's closed model 7471/s)",
    );
    const section = limitCheckLatencySection(r);
    expect(section).toContain('The open-model maximum, 5600 checks/s');
    expect(section).toContain('7500 (3.200 ms, no), 4200 (0.600 ms, yes), 5600 (0.700 ms, yes)');
  });

  it('names the share given two trials', () => {
    const r = {
      ...result({ max: 5600, tried }),
      latency: [
        { ...half, share: 0.25 },
        { ...half, worse: half },
      ],
    };
    expect(limitCheckLatencySection(r)).toContain("two trials at 50 % (the goal's), one at the others");
  });

  it("says so when the shares were of wrk's rate: runs before the search, or nothing carried", () => {
    expect(limitCheckLatencyGoalRow(result())).toContain('of its maximum (wrk, closed model)');
    expect(limitCheckLatencySection(result())).not.toContain('open-model maximum');
    expect(limitCheckLatencySection(result({ max: 5600, tried }))).not.toContain('come to');
    const none = result({ max: 0, tried: tried.map((t) => ({ ...t, carried: false })) });
    expect(limitCheckLatencyGoalRow(none)).toContain('no rate carried under the open model');
    expect(limitCheckLatencySection(none)).toContain('none: no rate was carried');
  });
});
