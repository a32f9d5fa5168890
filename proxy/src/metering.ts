import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import { callRecord, recordTimestamp } from '@mcp-meter/contracts/usage-record';
import type { UsageEmitter } from '@mcp-meter/ingest/producer';
import type { CallFacts, RecordedFacts, ToolCall, ToolOutcome } from './calls';
import type { ProxyMetrics } from './metrics-page';

/**
 * Metering: every tool call a request carried is recorded once, by what happened to it. The
 * records go to the emitter (which spools them before the answer's last byte, issue 32) and the
 * outcome counter of the metrics page.
 */
export class Meter {
  constructor(private readonly deps: { emitter: UsageEmitter | undefined; metrics: ProxyMetrics }) {}

  /** One usage record per call, stamped now, with the request's latency since `started`. */
  record(
    server: McpServerSnapshot,
    customerRef: string,
    calls: readonly ToolCall[],
    factsFor: (call: ToolCall) => RecordedFacts,
    started: number,
  ): void {
    if (calls.length === 0) return;
    const latencyMs = Math.round((performance.now() - started) * 1000) / 1000;
    const timestamp = recordTimestamp();
    for (const call of calls) {
      const facts = factsFor(call);
      // A call its client left before the answer is recorded as an error; an SRE tells clients
      // giving up from tools failing, so the metrics page counts it apart.
      this.deps.metrics.toolCalls.incLabel('outcome', facts.cancelled === true ? 'cancelled' : facts.outcome);
      if (this.deps.emitter === undefined) continue;
      this.deps.emitter.emit(
        callRecord(server, customerRef, timestamp, {
          tool: call.tool,
          outcome: facts.outcome,
          server: server.serverId,
          latencyMs,
          productId: server.productId,
          planId: facts.planId,
          admitted: facts.admitted,
          // Passed as they are: the record carries each only when set (callRecord).
          refused: facts.refused,
          credits: facts.credits,
          cancelled: facts.cancelled,
          paywall: facts.paywall,
        }),
        facts.charges,
      );
    }
  }
}

/**
 * One request's tally: what gating decided for each of its calls (`facts`), and the one place
 * that records them. However the request ends (answered, refused here, failed at the origin,
 * its client gone, the proxy stopping), `settle` records each call exactly once; a second
 * settlement of the same request records nothing.
 */
export class Tally {
  facts: Map<ToolCall, CallFacts> = new Map();
  private settled = false;

  constructor(
    private readonly meter: Meter,
    readonly server: McpServerSnapshot,
    readonly customerRef: string,
    readonly calls: readonly ToolCall[],
    readonly started: number,
  ) {}

  /**
   * What `call`'s record says: gating's outcome for a call it refused, else `fallback`'s (what
   * the answer said). A round that asked for input is not the call: its unit and credits go on
   * the final round's record.
   */
  factsOf(call: ToolCall, fallback: () => ToolOutcome): RecordedFacts {
    const known = this.facts.get(call);
    const outcome = known?.outcome ?? fallback();
    const round = outcome === 'input_required';
    return {
      outcome,
      admitted: round ? false : (known?.admitted ?? false),
      refused: known?.refused,
      credits: round ? undefined : known?.credits,
      // The unit was spent in this request whatever the round: a crash settles its lease with it.
      charges: known?.charges,
      paywall: known?.paywall,
      planId: known?.planId,
    };
  }

  /** Records every call as `factsFor` says, once per request. */
  settle(factsFor: (call: ToolCall) => RecordedFacts): void {
    if (this.settled) return;
    this.settled = true;
    this.meter.record(this.server, this.customerRef, this.calls, factsFor, this.started);
  }

  /** Records every call by its facts, with `outcome` for those gating did not decide. */
  settleAs(outcome: (call: ToolCall) => ToolOutcome): void {
    this.settle((call) => this.factsOf(call, () => outcome(call)));
  }

  /**
   * Records every call as answered here and never run: not admitted, refused, with gating's
   * outcome (paywall, unavailable) or else `outcome`.
   */
  refuse(outcome: ToolOutcome): void {
    this.settle((call) => ({
      outcome: this.facts.get(call)?.outcome ?? outcome,
      admitted: false,
      refused: true,
      paywall: this.facts.get(call)?.paywall,
      planId: this.facts.get(call)?.planId,
    }));
  }

  /** The request's calls are already on record (a paywall retry still refused adds none). */
  onRecord(): void {
    this.settled = true;
  }

  /** Whether the request's calls were recorded. */
  get recorded(): boolean {
    return this.settled;
  }
}
