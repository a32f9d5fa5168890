import type { CallAnswer } from './answer-scan';

/** Outcome of one tool call as recorded on the usage record. */
export type ToolOutcome = 'success' | 'error' | 'paywall' | 'upstream_error';

export interface ToolCall {
  id: string | number;
  tool: string;
}

type JsonObject = Record<string, unknown>;

const isObject = (value: unknown): value is JsonObject =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The `tools/call` requests in a JSON-RPC message or batch (notifications have no id and are not calls). */
export function toolCallsIn(body: unknown): ToolCall[] {
  const messages = Array.isArray(body) ? body : [body];
  const calls: ToolCall[] = [];
  for (const message of messages) {
    if (!isObject(message) || message.method !== 'tools/call') continue;
    const id = message.id;
    if (typeof id !== 'string' && typeof id !== 'number') continue;
    const params = isObject(message.params) ? message.params : {};
    calls.push({ id, tool: typeof params.name === 'string' ? params.name : '' });
  }
  return calls;
}

/**
 * A call succeeded when its response has a result that is not flagged `isError`. A JSON-RPC
 * error or a tool error is `error`; an unusable answer from the origin is `upstream_error`.
 */
export function outcomeOf(httpStatus: number, answer: CallAnswer | undefined): ToolOutcome {
  if (httpStatus >= 500) return 'upstream_error';
  if (httpStatus >= 400) return 'error';
  if (answer === undefined) return httpStatus >= 200 && httpStatus < 300 ? 'success' : 'upstream_error';
  return answer.error || answer.toolError ? 'error' : 'success';
}

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

/** The paywall as MCP clients see it (architecture.md): a tool result, not a JSON-RPC error. */
export function paywallResult(
  call: ToolCall,
  verdict: { reason: 'limit_reached' | 'plan_required' | 'no_plan'; limit?: number; used?: number },
  paywall:
    | { checkoutUrl: string; checkoutSessionId: string; product: { id: string; name: string } }
    | undefined,
): Record<string, unknown> {
  const what =
    verdict.reason === 'limit_reached'
      ? `You have used all ${verdict.limit ?? ''} calls your plan includes for this period.`
      : verdict.reason === 'plan_required'
        ? `The tool "${call.tool}" needs a plan that includes it.`
        : 'This MCP server needs a plan before its tools can be used.';
  const next =
    paywall === undefined
      ? 'A checkout link could not be created right now; please try again shortly.'
      : `To continue, complete checkout for ${paywall.product.name}: ${paywall.checkoutUrl}`;
  return {
    jsonrpc: '2.0',
    id: call.id,
    result: {
      content: [{ type: 'text', text: `${what} ${next}` }],
      structuredContent: {
        kind: 'payment_required',
        reason: verdict.reason,
        checkoutUrl: paywall?.checkoutUrl ?? null,
        checkoutSessionId: paywall?.checkoutSessionId ?? null,
        limit: verdict.limit ?? null,
        used: verdict.used ?? null,
        product: paywall?.product ?? null,
      },
      isError: true,
    },
  };
}

/** The session header of an origin answer, to carry over when the proxy rewrites the body. */
export function sessionHeader(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const id = headers['mcp-session-id'];
  return typeof id === 'string' ? { 'mcp-session-id': id } : {};
}
