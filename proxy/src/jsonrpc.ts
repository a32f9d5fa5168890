import type { CallAnswer, ToolCall, ToolOutcome } from './calls';

export type { ToolCall, ToolOutcome };

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

/** The `_meta` key of the machine-readable paywall on a paywall tool result. */
export const PAYWALL_META_KEY = 'dev.mcp-meter/paywall';
/** MCP 2025-11-25: the request needs the user to complete a URL-mode elicitation first. */
export const URL_ELICITATION_REQUIRED = -32042;

type PaywallVerdict = {
  reason: 'limit_reached' | 'plan_required' | 'no_plan' | 'credits_exhausted';
  limit?: number;
  used?: number;
  creditsPerUnit?: number;
};
type PaywallOffer =
  | { checkoutUrl: string; checkoutSessionId: string; product: { id: string; name: string } }
  | null
  | undefined;

function paywallText(
  call: ToolCall,
  verdict: PaywallVerdict,
  offer: PaywallOffer,
): { what: string; next: string } {
  const credits = verdict.reason === 'credits_exhausted';
  const what =
    verdict.reason === 'limit_reached'
      ? `You have used all ${verdict.limit ?? ''} calls your plan includes for this period.`
      : credits
        ? `Your credits have run out: each call costs ${verdict.creditsPerUnit ?? 1} ${verdict.creditsPerUnit === 1 ? 'credit' : 'credits'}.`
        : verdict.reason === 'plan_required'
          ? `The tool "${call.tool}" needs a plan that includes it.`
          : 'This MCP server needs a plan before its tools can be used.';
  const next =
    offer === null
      ? credits
        ? 'No top-up is on sale; ask the provider to add credits.'
        : 'No plan with a higher limit is on sale; your allowance renews at the start of the next period.'
      : offer === undefined
        ? 'A checkout link could not be created right now; please try again shortly.'
        : credits
          ? `To continue, top up your credits: ${offer.checkoutUrl}`
          : `To continue, complete checkout for ${offer.product.name}: ${offer.checkoutUrl}`;
  return { what, next };
}

/** The machine-readable paywall every paywall result carries in `_meta`. */
function paywallMeta(verdict: PaywallVerdict, offer: PaywallOffer) {
  return {
    [PAYWALL_META_KEY]: {
      kind: 'payment_required',
      reason: verdict.reason,
      checkoutUrl: offer?.checkoutUrl ?? null,
      checkoutSessionId: offer?.checkoutSessionId ?? null,
      limit: verdict.limit ?? null,
      used: verdict.used ?? null,
      ...(verdict.creditsPerUnit === undefined ? {} : { creditsPerUnit: verdict.creditsPerUnit }),
      product: offer?.product ?? null,
    },
  };
}

/** The key of the paywall's one input request in a modern `input_required` result. */
export const CHECKOUT_INPUT = 'checkout';

/**
 * The paywall as MCP clients see it, in the shape of the client's revision:
 * - MCP 2026-07-28, client declared URL elicitation in this request's capabilities: an
 *   `input_required` result whose one input request is a URL-mode elicitation of the checkout
 *   page, with the proxy's signed `requestState`; the client retries the same call with it after
 *   checkout, and the proxy checks the limit again.
 * - MCP 2025-11-25, client declared URL elicitation at initialize: the JSON-RPC error -32042
 *   whose one URL-mode elicitation is the checkout page.
 * - Any other client: a tool result with `isError: true`, the checkout URL in its text and the
 *   machine-readable paywall in `_meta` (modern results also carry `resultType: "complete"`).
 * Never `structuredContent`: clients validate it against the tool's `outputSchema`, even on
 * errors, and would refuse the answer instead of showing the link.
 */
export function paywallAnswer(
  call: ToolCall,
  verdict: PaywallVerdict,
  offer: PaywallOffer,
  era: { modern: boolean; urlElicitation: boolean },
  requestState?: string,
): Record<string, unknown> {
  const { what, next } = paywallText(call, verdict, offer);
  const hasOffer = offer !== null && offer !== undefined;
  if (era.modern && era.urlElicitation && hasOffer && requestState !== undefined) {
    return {
      jsonrpc: '2.0',
      id: call.id,
      result: {
        resultType: 'input_required',
        inputRequests: {
          [CHECKOUT_INPUT]: {
            method: 'elicitation/create',
            params: { mode: 'url', message: `${what} ${next}`, url: offer.checkoutUrl },
          },
        },
        requestState,
        _meta: paywallMeta(verdict, offer),
      },
    };
  }
  if (!era.modern && era.urlElicitation && hasOffer) {
    return {
      jsonrpc: '2.0',
      id: call.id,
      error: {
        // The message names the link and what to do: a client that shows only the message (most
        // do) still shows where to pay; `data` carries it for clients that open it.
        code: URL_ELICITATION_REQUIRED,
        message: `${what} ${next}`,
        data: {
          elicitations: [
            {
              mode: 'url',
              elicitationId: offer.checkoutSessionId,
              url: offer.checkoutUrl,
              message: `${what} Complete checkout for ${offer.product.name} to continue.`,
            },
          ],
        },
      },
    };
  }
  return {
    jsonrpc: '2.0',
    id: call.id,
    result: {
      ...(era.modern ? { resultType: 'complete' } : {}),
      content: [{ type: 'text', text: `${what} ${next}` }],
      isError: true,
      _meta: paywallMeta(verdict, offer),
    },
  };
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
