import type { CallAnswer, ToolCall, ToolOutcome } from './calls';

export type { ToolCall, ToolOutcome };

type JsonObject = Record<string, unknown>;

const isObject = (value: unknown): value is JsonObject =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The id of a single JSON-RPC request, which an error answer must carry; null otherwise (a batch). */
export const idOf = (parsed: unknown): string | number | null =>
  isObject(parsed) && (typeof parsed.id === 'string' || typeof parsed.id === 'number') ? parsed.id : null;

/** The `tools/call` requests in a JSON-RPC message or batch (notifications have no id and are not calls). */
export function toolCallsIn(body: unknown): ToolCall[] {
  const messages = Array.isArray(body) ? body : [body];
  const calls: ToolCall[] = [];
  for (const message of messages) {
    if (!isObject(message) || message.method !== 'tools/call') continue;
    const id = message.id;
    if (typeof id !== 'string' && typeof id !== 'number') continue;
    const params = isObject(message.params) ? message.params : {};
    calls.push({
      id,
      tool: typeof params.name === 'string' ? params.name : '',
      arguments: params.arguments,
      ...(params.requestState === undefined ? {} : { requestState: params.requestState }),
      ...(params.inputResponses === undefined ? {} : { answersInput: true }),
    });
  }
  return calls;
}

/**
 * A call succeeded when its response has a result that is not flagged `isError`. A JSON-RPC
 * error or a tool error is `error`; an unusable answer from the origin is `upstream_error`; an
 * input round is `input_required`; a task handle (the tasks extension) is `task`: the call was
 * admitted and runs on at the origin, whose later `tasks/get` answers the proxy does not meter.
 */
export function outcomeOf(httpStatus: number, answer: CallAnswer | undefined): ToolOutcome {
  if (httpStatus >= 500) return 'upstream_error';
  if (httpStatus >= 400) return 'error';
  if (answer === undefined) return httpStatus >= 200 && httpStatus < 300 ? 'success' : 'upstream_error';
  if (answer.inputRequired) return 'input_required';
  if (answer.task === true && !answer.error) return 'task';
  return answer.error || answer.toolError ? 'error' : 'success';
}

/** JSON-RPC: the params are not valid for the method. */
export const INVALID_PARAMS = -32602;

export function jsonRpcError(
  id: string | number | null,
  code: number,
  message: string,
  data?: Record<string, unknown>,
): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: data === undefined ? { code, message } : { code, message, data },
  });
}

/** Whether an `initialize` request's client declared URL-mode elicitation (MCP 2025-11-25). */
export function declaresUrlElicitation(message: unknown): boolean {
  if (!isObject(message) || message.method !== 'initialize' || !isObject(message.params)) return false;
  const capabilities = message.params.capabilities;
  if (!isObject(capabilities) || !isObject(capabilities.elicitation)) return false;
  return isObject(capabilities.elicitation.url);
}

/** The session header of an origin answer, to carry over when the proxy rewrites the body. */
export function sessionHeader(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const id = headers['mcp-session-id'];
  return typeof id === 'string' ? { 'mcp-session-id': id } : {};
}
