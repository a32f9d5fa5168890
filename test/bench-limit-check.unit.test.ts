import { Histogram } from '@mcp-meter/contracts/metrics';
import { describe, expect, it } from 'vitest';
import { limitCheckBetween, limitCheckBuckets } from '../bench/limit-check';

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
