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
