import { describe, expect, it } from 'vitest';
import { callOutcomes, unpublishedOf, unsuccessfulBetween } from '../bench/harness/metrics-page';

// The usage counters of a B3 proxy's metrics page in the bench run of 2026-12-05 21:23, after a
// Kafka stall had put its queue over the bound once: 2,041 records spilled, then replayed.
const page = (replayed: number, dropped = 0) => `# HELP mcpmeter_usage_emitted_total x
# TYPE mcpmeter_usage_emitted_total counter
mcpmeter_usage_emitted_total 1081671
mcpmeter_usage_published_total 1079630
mcpmeter_usage_retried_total 0
mcpmeter_usage_spilled_total 2041
mcpmeter_usage_replayed_total ${replayed}
mcpmeter_usage_dropped_total ${dropped}
mcpmeter_usage_emitter_queue_depth 0
`;

describe("the bench's count of a proxy's records the bus has not taken", () => {
  it('counts spilled records sent again from disk as taken', () => {
    expect(unpublishedOf(page(2041))).toBe(0);
  });

  it('waits for spilled records not yet sent again', () => {
    expect(unpublishedOf(page(0))).toBe(2041);
    expect(unpublishedOf(page(1000))).toBe(1041);
  });

  it('does not wait for dropped records, which are never sent', () => {
    expect(unpublishedOf(page(0, 2041))).toBe(0);
  });

  it("sums the workers' series and says when the page has no emitter", () => {
    const workers = `mcpmeter_usage_emitted_total{worker="0"} 10
mcpmeter_usage_emitted_total{worker="1"} 15
mcpmeter_usage_published_total{worker="0"} 10
mcpmeter_usage_published_total{worker="1"} 12
`;
    expect(unpublishedOf(workers)).toBe(3);
    expect(unpublishedOf('mcpmeter_proxy_requests_total 5\n')).toBeNaN();
  });
});

describe("the bench's reading of a proxy's tool calls by outcome", () => {
  const page = (
    success: number,
    busy: number,
  ) => `# HELP mcpmeter_proxy_tool_calls_total tools/call requests, by outcome
# TYPE mcpmeter_proxy_tool_calls_total counter
mcpmeter_proxy_tool_calls_total{outcome="success",worker="0"} ${success}
mcpmeter_proxy_tool_calls_total{outcome="success",worker="1"} 5
mcpmeter_proxy_tool_calls_total{outcome="upstream_error",worker="0"} ${busy}
mcpmeter_proxy_origin_failures_total{code="origin_busy"} ${busy}
`;

  it('sums each outcome over the workers', () => {
    expect(Object.fromEntries(callOutcomes(page(100, 2)))).toEqual({ success: 105, upstream_error: 2 });
  });

  it('counts the calls that did not end as a success between two readings', () => {
    expect(unsuccessfulBetween(callOutcomes(page(100, 2)), callOutcomes(page(900, 2)))).toBe(0);
    expect(unsuccessfulBetween(callOutcomes(page(100, 2)), callOutcomes(page(900, 9)))).toBe(7);
    // An outcome first seen after the first reading counts whole.
    expect(
      unsuccessfulBetween(
        callOutcomes(page(100, 0).replace(/.*upstream_error.*\n/, '')),
        callOutcomes(page(900, 3)),
      ),
    ).toBe(3);
  });

  it('leaves out the outcomes a trial names: the cancelled calls wrk leaves in flight', () => {
    const withCancelled = (cancelled: number) =>
      callOutcomes(
        `${page(100, 2)}mcpmeter_proxy_tool_calls_total{outcome="cancelled",worker="0"} ${cancelled}\n`,
      );
    expect(unsuccessfulBetween(withCancelled(1), withCancelled(33))).toBe(32);
    expect(unsuccessfulBetween(withCancelled(1), withCancelled(33), ['cancelled'])).toBe(0);
  });
});
