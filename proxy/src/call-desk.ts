import type { Logger } from '@mcp-meter/contracts/kit';
import { CREDIT_PREFIX, type LeaseCharge } from '@mcp-meter/contracts/limits';
import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import { callRecord, recordTimestamp } from '@mcp-meter/contracts/usage-record';
import type { UsageEmitter } from '@mcp-meter/ingest/producer';
import type { ToolCall, ToolOutcome } from './calls';
import type { ControlPlaneLink, PaywallAnswer } from './control-link';
import type { Era } from './era';
import type { Gatekeeper, Verdict } from './gatekeeper';
import { paywallAnswer } from './jsonrpc';
import type { ProxyMetrics } from './metrics-page';
import type { PaywallStates } from './paywall-state';

type Refused = Exclude<Verdict, { kind: 'admit' }>;

/** What gating decided for a request's calls. */
export interface Gated {
  facts: Map<ToolCall, CallFacts>;
  /** The refused calls' answers, in the order of the calls. */
  answers: readonly Record<string, unknown>[];
  refusedIds: ReadonlySet<string | number>;
}

const NO_ANSWERS: readonly Record<string, unknown>[] = Object.freeze([]);
const NO_IDS: ReadonlySet<string | number> = new Set();

/** What the gate decided for a call: its outcome when refused, and whether it spent a unit. */
export interface CallFacts {
  outcome?: ToolOutcome;
  admitted: boolean;
  /** The proxy answered the call itself instead of serving it. */
  refused?: boolean;
  /** Credits the call spent (plans paid from credits). */
  credits?: number;
  /** What the admission spent of which lease. */
  charges?: LeaseCharge[];
}

/** What a call's usage record says. */
export interface RecordedFacts {
  outcome: ToolOutcome;
  admitted: boolean;
  /** The proxy answered the call itself instead of serving it: never billable. */
  refused?: boolean | undefined;
  /** Credits the call spent (plans paid from credits). */
  credits?: number | undefined;
  /** The client went away before the call's answer reached it. */
  cancelled?: boolean;
  /** What this request's admission of the call spent of which lease (kept with the record in the spool). */
  charges?: LeaseCharge[] | undefined;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The messages of a request less the tools/calls with these ids (refused ones, answered by the proxy). */
export function withoutCalls(parsed: unknown, ids: ReadonlySet<string | number>): unknown[] {
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  return messages.filter(
    (m) => !(isObject(m) && m.method === 'tools/call' && ids.has(m.id as string | number)),
  );
}

/**
 * Gating and metering of tool calls: each call of a request is admitted or refused (with its
 * paywall or retry-later answer), and each is recorded once, by what happened to it.
 */
export class CallDesk {
  constructor(
    private readonly deps: {
      emitter: UsageEmitter | undefined;
      link: ControlPlaneLink | undefined;
      metrics: ProxyMetrics;
      logger: Logger;
      states: PaywallStates;
    },
  ) {}

  /**
   * Decides every call; refused calls get their answers here and never reach the origin.
   * Synchronous when every call is decided at once and admitted (nearly always).
   */
  gate(
    gatekeeper: Gatekeeper,
    server: McpServerSnapshot,
    customerRef: string,
    calls: ToolCall[],
    era: Era,
  ): Gated | Promise<Gated> {
    const verdicts = calls.map((call) => {
      try {
        return gatekeeper.decide(server, customerRef, call.tool);
      } catch (error) {
        // As a rejection, like the others': the Promise.all below sees every one.
        return Promise.reject(error);
      }
    });
    if (verdicts.some((verdict) => verdict instanceof Promise))
      return Promise.all(verdicts).then((decided) => this.sort(server, customerRef, calls, decided, era));
    return this.sort(server, customerRef, calls, verdicts as Verdict[], era);
  }

  /** The calls' facts by their verdicts, with the refused calls' answers. */
  private sort(
    server: McpServerSnapshot,
    customerRef: string,
    calls: ToolCall[],
    verdicts: Verdict[],
    era: Era,
  ): Gated | Promise<Gated> {
    const facts = new Map<ToolCall, CallFacts>();
    const refused: Array<[ToolCall, Refused]> = [];
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i] as ToolCall;
      const verdict = verdicts[i];
      if (verdict === undefined || verdict.kind === 'admit') {
        const fact: CallFacts = { admitted: verdict?.counted ?? false };
        if (verdict?.credits !== undefined) fact.credits = verdict.credits;
        if (verdict?.charges !== undefined) fact.charges = verdict.charges;
        facts.set(call, fact);
      } else refused.push([call, verdict]);
    }
    if (refused.length === 0) return { facts, answers: NO_ANSWERS, refusedIds: NO_IDS };
    return Promise.all(
      refused.map(([call, verdict]) => this.refusal(server, customerRef, call, verdict, era)),
    ).then((answers) => {
      for (const [call, verdict] of refused)
        facts.set(call, {
          outcome: verdict.kind === 'paywall' ? 'paywall' : 'unavailable',
          admitted: false,
          refused: true,
        });
      return { facts, answers, refusedIds: new Set(refused.map(([call]) => call.id)) };
    });
  }

  /**
   * The origin never read the request (it could not be reached, or TCP proved it unread): its
   * calls did not run, so what their admissions spent of this process's leases goes back, and a
   * call that spent nothing any more is recorded as the proxy's own answer, never billed. What
   * could not be given back (the limit store away, the lease settled; or spent elsewhere: a
   * retry's earlier round, a grace admission) stays spent and recorded as such.
   */
  async unspend(gatekeeper: Gatekeeper | undefined, calls: ToolCall[], facts: Map<ToolCall, CallFacts>) {
    for (const call of calls) {
      const known = facts.get(call);
      if (known === undefined || known.refused === true) continue;
      const charges = known.charges ?? [];
      const kept =
        gatekeeper === undefined || charges.length === 0 ? charges : await gatekeeper.giveBack(charges);
      const keptLimit = kept.some((charge) => !charge.key.startsWith(CREDIT_PREFIX));
      const keptCredits = kept.some((charge) => charge.key.startsWith(CREDIT_PREFIX));
      const unspent: CallFacts = {
        // Spent without a charge of this process (nothing to give back), or kept: still spent.
        admitted: known.admitted && (charges.length === 0 || keptLimit),
      };
      const credits =
        known.credits !== undefined && (charges.length === 0 || keptCredits) ? known.credits : undefined;
      if (credits !== undefined) unspent.credits = credits;
      if (kept.length > 0) unspent.charges = kept;
      if (!unspent.admitted && credits === undefined) unspent.refused = true;
      facts.set(call, unspent);
    }
  }

  meter(
    server: McpServerSnapshot,
    customerRef: string,
    calls: ToolCall[],
    factsFor: (call: ToolCall) => RecordedFacts,
    started: number,
  ) {
    if (calls.length === 0) return;
    const latencyMs = Math.round((performance.now() - started) * 1000) / 1000;
    const timestamp = recordTimestamp();
    for (const call of calls) {
      const facts = factsFor(call);
      this.deps.metrics.toolCalls.incLabel('outcome', facts.outcome);
      if (this.deps.emitter === undefined) continue;
      this.deps.emitter.emit(
        callRecord(server, customerRef, timestamp, {
          tool: call.tool,
          outcome: facts.outcome,
          server: server.serverId,
          latencyMs,
          productId: server.productId,
          admitted: facts.admitted,
          // Passed as they are: the record carries each only when set (callRecord).
          refused: facts.refused,
          credits: facts.credits,
          cancelled: facts.cancelled,
        }),
        facts.charges,
      );
    }
  }

  /**
   * The JSON-RPC answer to a call the origin never sees: the paywall in the shape of the
   * client's revision (jsonrpc.ts), or a retry-later error.
   */
  private async refusal(
    server: McpServerSnapshot,
    customerRef: string,
    call: ToolCall,
    verdict: Refused,
    era: Era,
  ): Promise<Record<string, unknown>> {
    if (verdict.kind === 'unavailable') {
      return {
        jsonrpc: '2.0',
        id: call.id,
        error: { code: -32000, message: 'Usage limits cannot be checked right now; try again shortly' },
      };
    }
    let paywall: PaywallAnswer | null | undefined;
    const { link } = this.deps;
    if (link !== undefined && server.productId !== null) {
      try {
        paywall = await link.paywall({
          providerId: server.providerId,
          environment: server.environment,
          customerId: customerRef,
          productId: server.productId,
          reason: verdict.reason,
          planIds: verdict.planIds,
          ...(verdict.planId === undefined ? {} : { planId: verdict.planId }),
        });
      } catch (error) {
        this.deps.logger.warn(
          { err: error, server: server.serverId },
          'paywall checkout session not created',
        );
      }
    }
    // A modern client that can open the checkout page retries the call with this state after it.
    const state =
      era.modern && era.urlElicitation && paywall !== null && paywall !== undefined
        ? await this.deps.states.mint({
            customer: customerRef,
            server: server.serverId,
            tool: call.tool,
            arguments: call.arguments,
          })
        : undefined;
    return paywallAnswer(call, verdict, paywall, era, state);
  }
}
