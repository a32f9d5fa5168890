import { createHash } from 'node:crypto';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { CounterStore } from '@mcp-meter/contracts/limits';
import type { CallFacts, ToolCall } from './calls';
import { argumentsDigest, PaywallStates } from './paywall/state';

/**
 * Multi-round tool calls (MCP 2026-07-28): an origin may answer a `tools/call` with
 * `resultType: "input_required"` and a `requestState`; the client answers the input requests and
 * calls the same tool again with that state. That is one call, billed once. The round that asked
 * for input spent the call's unit when it was admitted; the proxy keeps a hold under the state
 * the origin issued (bound to the customer, the server, the tool and its arguments; an origin may
 * issue no state, and then the binding alone), and the retry that brings the state back (or, with
 * none, the input responses) takes the hold instead of being admitted again. The hold lives in the counter
 * store, so a retry that reaches another proxy finds it; it is taken once, and lapses after
 * `ROUND_TTL_MS` or `MAX_ROUNDS` rounds (the next retry is then a new call).
 */
export interface RoundHold {
  /** Rounds of the call so far that asked for input. */
  rounds: number;
  /** The first round spent a unit of the plan's allowance (its record is the final round's). */
  admitted: boolean;
  /** Credits the first round spent (plans paid from credits). */
  credits?: number | undefined;
  /** The plan the first round was admitted under. */
  planId?: string | undefined;
}

export interface RoundBinding {
  customer: string;
  server: string;
  tool: string;
  /** A digest of the call's arguments: the retry is the same call. */
  args: string;
  /** The origin's requestState, as the client carries it back (null: the origin issued none). */
  state: string | null;
}

export const MAX_ROUNDS = 16;
export const ROUND_TTL_MS = 10 * 60_000;
const PREFIX = 'mcpmeter:round:';

const keyOf = (b: RoundBinding) =>
  PREFIX +
  createHash('sha256')
    .update(JSON.stringify([b.customer, b.server, b.tool, b.state]))
    .digest('base64url');

export class CallRounds {
  constructor(
    private readonly store: Pick<CounterStore, 'putHold' | 'takeHold'>,
    private readonly ttlMs = ROUND_TTL_MS,
  ) {}

  /** Keeps the hold of a round that asked for input; past MAX_ROUNDS none is kept. */
  async open(binding: RoundBinding, hold: RoundHold): Promise<void> {
    if (hold.rounds > MAX_ROUNDS) return;
    await this.store.putHold(keyOf(binding), JSON.stringify(hold), this.ttlMs);
  }

  /** The hold a retry brings back, taken once; undefined when there is none (a new call). */
  async take(binding: RoundBinding): Promise<RoundHold | undefined> {
    const raw = await this.store.takeHold(keyOf(binding));
    if (raw === undefined) return undefined;
    try {
      const hold = JSON.parse(raw) as RoundHold;
      if (typeof hold.rounds !== 'number' || typeof hold.admitted !== 'boolean') return undefined;
      if (hold.planId !== undefined && typeof hold.planId !== 'string') delete hold.planId;
      return hold;
    } catch {
      return undefined;
    }
  }
}

/**
 * One request's part in a multi-round call: the hold its retry brought back (`continuing`: the
 * call was admitted at its first round, so this round is not admitted again), and the hold to
 * keep should this round's answer ask for input again.
 */
export class CallRound {
  private constructor(
    private readonly rounds: CallRounds,
    private readonly logger: Logger,
    private readonly call: ToolCall,
    private readonly customer: string,
    private readonly server: string,
    readonly continuing: RoundHold | undefined,
  ) {}

  /**
   * The round of a modern request's one call, when the proxy keeps rounds. A retry that brings
   * the origin's state back (not the paywall's own), or answers input without any, takes the
   * hold its previous round kept; an unreadable hold makes it a new call.
   */
  static of(
    rounds: CallRounds | undefined,
    logger: Logger,
    call: ToolCall | undefined,
    customer: string,
    server: string,
  ): CallRound | undefined | Promise<CallRound | undefined> {
    if (rounds === undefined || call === undefined) return undefined;
    const round = (continuing: RoundHold | undefined) =>
      new CallRound(rounds, logger, call, customer, server, continuing);
    const foreignState =
      typeof call.requestState === 'string' && !PaywallStates.isOurs(call.requestState)
        ? call.requestState
        : undefined;
    // A first round (nearly every call): nothing to take, answered at once.
    if (foreignState === undefined && call.answersInput !== true) return round(undefined);
    return rounds
      .take(bindingOf(call, customer, server, foreignState ?? null))
      .catch((error: unknown) => {
        logger.warn({ err: error }, 'multi-round hold unreadable: the retry is gated as a new call');
        return undefined;
      })
      .then(round);
  }

  /** The call this round is of. */
  get of(): ToolCall {
    return this.call;
  }

  /** Keeps the hold for the retry of a round that asked for input, under the origin's `state`. */
  keep(fact: CallFacts | undefined, state: string | null): Promise<void> {
    return this.rounds
      .open(bindingOf(this.call, this.customer, this.server, state), {
        rounds: (this.continuing?.rounds ?? 0) + 1,
        admitted: fact?.admitted ?? false,
        ...(fact?.credits === undefined ? {} : { credits: fact.credits }),
        ...(fact?.planId === undefined ? {} : { planId: fact.planId }),
      })
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, 'multi-round hold not kept: the retry will be gated as a new call'),
      );
  }
}

const bindingOf = (call: ToolCall, customer: string, server: string, state: string | null): RoundBinding => ({
  customer,
  server,
  tool: call.tool,
  args: argumentsDigest(call.arguments),
  state,
});
