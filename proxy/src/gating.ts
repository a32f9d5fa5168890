import type { Logger } from '@mcp-meter/contracts/kit';
import { CREDIT_PREFIX } from '@mcp-meter/contracts/limits';
import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import type { Admitted } from './admission';
import type { CallFacts, Gated, ToolCall } from './calls';
import type { ProxyConfig } from './config';
import type { Era } from './era';
import type { Gatekeeper, Verdict } from './gatekeeper';
import { type Exchange, respond } from './http-io';
import type { ProxyRequest } from './intake';
import { type Meter, Tally } from './metering';
import { paywallShownOf } from './paywall/answer';
import { askInCall, asksInCall, checkoutOf, type PaywallAsks } from './paywall/ask';
import type { PaywallOffers, Refused } from './paywall/offer';
import { paywallRetryOf } from './paywall/retry';
import type { PaywallStates } from './paywall/state';
import { admittedAfterPayment, waitForPayment } from './paywall/wait';
import { CallRound, type CallRounds } from './rounds';
import { type RecentSessions, sessionOf } from './sessions';

/**
 * Gating: whether each tool call of a request may run. The gatekeeper (gatekeeper.ts) decides
 * one call by the customer's plan and its limit; here a request's calls are decided together,
 * the refused ones answered by the proxy (the paywall, paywall/), the paywall's retries and the
 * wait for payment handled, and what the origin is to receive is settled.
 */

const NO_ANSWERS: readonly Record<string, unknown>[] = Object.freeze([]);
const NO_IDS: ReadonlySet<string | number> = new Set();

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The messages of a request less the tools/calls with these ids (refused ones, answered by the proxy). */
export function withoutCalls(parsed: unknown, ids: ReadonlySet<string | number>): unknown[] {
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  return messages.filter(
    (m) => !(isObject(m) && m.method === 'tools/call' && ids.has(m.id as string | number)),
  );
}

/** The verdicts on a request's calls: each admitted, or refused with the answer the proxy gives. */
export class CallGate {
  constructor(private readonly offers: PaywallOffers) {}

  /**
   * Decides every call; refused calls get their answers here and never reach the origin.
   * Synchronous when every call is decided at once and admitted (nearly always).
   */
  decide(
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
        if (verdict?.planId !== undefined) fact.planId = verdict.planId;
        facts.set(call, fact);
      } else refused.push([call, verdict]);
    }
    if (refused.length === 0) return { facts, answers: NO_ANSWERS, refusedIds: NO_IDS };
    return Promise.all(
      refused.map(([call, verdict]) => this.offers.answer(server, customerRef, call, verdict, era)),
    ).then((answers) => {
      refused.forEach(([call, verdict], i) => {
        const fact: CallFacts = {
          outcome: verdict.kind === 'paywall' ? 'paywall' : 'unavailable',
          admitted: false,
          refused: true,
        };
        const shown = verdict.kind === 'paywall' ? paywallShownOf(answers[i] ?? {}, era) : undefined;
        if (shown !== undefined) fact.paywall = shown;
        if (verdict.kind === 'paywall' && verdict.planId !== undefined) fact.planId = verdict.planId;
        facts.set(call, fact);
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
      if (known.planId !== undefined) unspent.planId = known.planId;
      if (!unspent.admitted && credits === undefined) unspent.refused = true;
      facts.set(call, unspent);
    }
  }
}

/** What the gating step uses, shared by every request. */
export interface GatingDeps {
  config: ProxyConfig;
  /** Absent: no gating or limits (every call is forwarded and metered). */
  gatekeeper: Gatekeeper | undefined;
  rounds: CallRounds | undefined;
  logger: Logger;
  gate: CallGate;
  meter: Meter;
  states: PaywallStates;
  asks: PaywallAsks;
  /** Sessions whose client declared URL elicitation at initialize (MCP 2025-11-25). */
  urlElicitationSessions: RecentSessions;
}

/** A request gating let through: what the origin receives, and the tally that records its calls. */
export interface GatedRequest {
  body: Buffer;
  tally: Tally;
  /** The refused calls' answers, which join the origin's answer (a batch with refused calls). */
  extra: readonly Record<string, unknown>[];
  /**
   * The one forwarded modern call whose answer may ask for input: its hold for the retry is kept
   * before the answer's last bytes reach the client, so no retry can arrive before it.
   */
  hold: CallRound | undefined;
}

/**
 * Gates a request's calls. Undefined when the request was answered here: every call refused
 * (the paywall, recorded once), a paywall state that does not check out, a paywall asked inside
 * the call that ended without a payment, or a client gone while asked.
 */
export async function gateRequest(
  deps: GatingDeps,
  exchange: Exchange,
  request: ProxyRequest,
  admitted: Admitted,
): Promise<GatedRequest | undefined> {
  const { config, gatekeeper } = deps;
  const { server, customerRef, calls, era, parsed } = admitted;
  const tally = new Tally(deps.meter, server, customerRef, calls, request.arrived);
  let body = request.body;
  const single = era.modern && calls.length === 1 ? calls[0] : undefined;
  // A modern retry after the paywall's checkout carries the proxy's own requestState: checked,
  // then taken out, so the origin sees the original call (which is gated again below).
  const retrying = paywallRetryOf(deps.states, parsed, single, {
    customer: customerRef,
    server: server.serverId,
  });
  const retry = retrying instanceof Promise ? await retrying : retrying;
  if (retry.kind === 'invalid') {
    tally.refuse('error');
    respond(exchange, 200, 'application/json', retry.answer);
    return undefined;
  }
  if (retry.kind === 'retry') body = retry.body;
  // A multi-round call's retry (MCP 2026-07-28) bringing back the state an origin issued to this
  // customer: the call was admitted at its first round, so this round is not admitted again.
  const finding = CallRound.of(deps.rounds, deps.logger, single, customerRef, server.serverId);
  const round = finding instanceof Promise ? await finding : finding;
  const continuing = round?.continuing;

  // Refused calls are answered here and never reach the origin.
  const gating =
    calls.length > 0 && gatekeeper !== undefined && config.requireAuth && continuing === undefined
      ? deps.gate.decide(
          gatekeeper,
          server,
          customerRef,
          calls,
          era.modern
            ? { ...era, urlElicitation: era.urlElicitation && retry.kind === 'none' }
            : { modern: false, urlElicitation: deps.urlElicitationSessions.has(sessionOf(request.headers)) },
        )
      : undefined;
  let gated = gating instanceof Promise ? await gating : gating;
  if (
    retry.kind === 'retry' &&
    retry.accepted &&
    gatekeeper !== undefined &&
    gated !== undefined &&
    single !== undefined &&
    gated.refusedIds.has(single.id)
  ) {
    const paid = await waitForPayment(
      gatekeeper,
      server,
      customerRef,
      single.tool,
      config.paywallWaitMs,
      () => exchange.aborted || exchange.stopped,
    );
    if (paid !== undefined) gated = admittedAfterPayment(single, paid);
  }
  // MCP 2025-11-25: a client that declared URL elicitation is asked inside the call (on an event
  // stream the proxy opens) rather than failed with -32042, so the call can wait for payment.
  const checkout = era.modern ? undefined : checkoutOf(gated?.answers[0]);
  if (
    checkout !== undefined &&
    gatekeeper !== undefined &&
    asksInCall(parsed, calls, request.headers, config)
  ) {
    request.ticket?.done();
    gated = await askInCall(
      {
        asks: deps.asks,
        gatekeeper,
        exchange,
        server,
        customerRef,
        call: calls[0] as ToolCall,
        // The call met the paywall, asked as a URL elicitation inside it: recorded once, now.
        recordPaywall: () => {
          const asked = new Tally(deps.meter, server, customerRef, calls, request.arrived);
          asked.facts.set(calls[0] as ToolCall, {
            outcome: 'paywall',
            admitted: false,
            refused: true,
            paywall: { form: 'url_elicitation', era: 'legacy', checkoutSessionId: checkout.elicitationId },
          });
          asked.refuse('paywall');
        },
        decideReadable: () =>
          deps.gate.decide(gatekeeper, server, customerRef, calls, { modern: false, urlElicitation: false }),
      },
      checkout,
      config.paywallWaitMs,
    );
    if (gated === undefined) return undefined;
  }
  const facts = gated?.facts ?? new Map<ToolCall, CallFacts>();
  if (continuing !== undefined && single !== undefined)
    facts.set(single, {
      admitted: continuing.admitted,
      credits: continuing.credits,
      planId: continuing.planId,
    });
  tally.facts = facts;
  const extra = gated?.answers ?? NO_ANSWERS;
  if (gated !== undefined && gated.answers.length > 0) {
    const rest = withoutCalls(parsed, gated.refusedIds);
    if (rest.length === 0) {
      // The paywall was recorded once, on the round that showed it; its retry, still refused,
      // ends that same call and adds no record.
      if (retry.kind === 'retry') tally.onRecord();
      else tally.refuse('paywall');
      respond(exchange, 200, 'application/json', JSON.stringify(Array.isArray(parsed) ? extra : extra[0]));
      return undefined;
    }
    body = Buffer.from(JSON.stringify(Array.isArray(parsed) ? rest : rest[0]));
  }
  const hold = round !== undefined && facts.get(round.of)?.refused !== true ? round : undefined;
  return { body, tally, extra, hold };
}
