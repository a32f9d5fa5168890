import { createHash } from 'node:crypto';
import type { CounterStore } from '@mcp-meter/contracts/limits';

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
      return typeof hold.rounds === 'number' && typeof hold.admitted === 'boolean' ? hold : undefined;
    } catch {
      return undefined;
    }
  }
}
