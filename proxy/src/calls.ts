import type { LeaseCharge } from '@mcp-meter/contracts/limits';
import type { PaywallShown } from '@mcp-meter/contracts/usage-record';

/** A tools/call request of a JSON-RPC message or batch, as the proxy gates and meters it. */
export interface ToolCall {
  id: string | number;
  tool: string;
  /** The call's `params.arguments`, as sent. */
  arguments?: unknown;
  /** A retry's `params.requestState` (MCP 2026-07-28), the proxy's or the origin's. */
  requestState?: unknown;
  /** The call carries `params.inputResponses`: a retry answering the input an earlier round asked for. */
  answersInput?: boolean;
}

/** What the origin's JSON-RPC response to one call said. */
export interface CallAnswer {
  /** A JSON-RPC error. */
  error: boolean;
  /** A tool result flagged `isError: true`. */
  toolError: boolean;
  /** A result with `resultType: "input_required"` (MCP 2026-07-28): a round, not the call's end. */
  inputRequired: boolean;
  /**
   * A result with `resultType: "task"` (the MCP tasks extension, SEP-2663): the origin runs the
   * call as a task and answers with its handle; the client polls `tasks/get` for the result.
   */
  task?: boolean;
  /** That result's `requestState`, which the client's retry carries back. */
  requestState?: string;
}

/** Outcome of one tool call as recorded on the usage record. */
export type ToolOutcome =
  | 'success'
  | 'error'
  | 'paywall'
  /** Refused because the usage limit could not be checked (its store was away): retry later. */
  | 'unavailable'
  | 'upstream_error'
  | 'input_required'
  | 'task';

/** What gating decided for a request's calls. */
export interface Gated {
  facts: Map<ToolCall, CallFacts>;
  /** The refused calls' answers, in the order of the calls. */
  answers: readonly Record<string, unknown>[];
  refusedIds: ReadonlySet<string | number>;
}

/** What the gate decided for a call: its outcome when refused, and whether it spent a unit. */
export interface CallFacts {
  outcome?: ToolOutcome;
  admitted: boolean;
  /** The paywall answered the call: how it was shown. */
  paywall?: PaywallShown;
  /** The proxy answered the call itself instead of serving it. */
  refused?: boolean;
  /** Credits the call spent (plans paid from credits). */
  credits?: number;
  /** What the admission spent of which lease. */
  charges?: LeaseCharge[];
  /** The plan the call was judged by (admitted under it, or refused at its limit). */
  planId?: string | undefined;
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
  /** The paywall answered the call: how it was shown. */
  paywall?: PaywallShown | undefined;
  /** The plan the call was judged by. */
  planId?: string | undefined;
}
