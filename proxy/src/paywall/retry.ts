import type { ToolCall } from '../calls';
import { INVALID_PARAMS, jsonRpcError } from '../jsonrpc';
import { CHECKOUT_INPUT } from './answer';
import { PaywallStates, STATE_PROBLEMS } from './state';

/**
 * What a modern call (MCP 2026-07-28) brings back of the paywall's own `requestState`: nothing
 * (`none`), a state that does not check out (`invalid`, with the answer that says why), or the
 * retry of a call the paywall refused (`retry`): the same logical call, whose state and input
 * responses are taken out so the origin sees the original call, which is gated again.
 */
export type PaywallRetry =
  | { kind: 'none' }
  | { kind: 'invalid'; answer: string }
  | {
      kind: 'retry';
      /**
       * The customer accepted the checkout elicitation: agreed to open the page, which is not
       * yet paying, so a call still refused waits for the purchase. Declined or cancelled:
       * asking again would loop until the client gives up, so a call still refused ends with
       * the readable paywall.
       */
      accepted: boolean;
      /** The request as the origin is to see it. */
      body: Buffer;
    };

const NONE: PaywallRetry = { kind: 'none' };

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

export function paywallRetryOf(
  states: PaywallStates,
  parsed: unknown,
  call: ToolCall | undefined,
  binding: { customer: string; server: string },
): PaywallRetry | Promise<PaywallRetry> {
  // Nearly every call: no state of the paywall's, answered at once (no await on the hot path).
  if (call === undefined || !PaywallStates.isOurs(call.requestState)) return NONE;
  return checkRetry(states, parsed, call, call.requestState, binding);
}

async function checkRetry(
  states: PaywallStates,
  parsed: unknown,
  call: ToolCall,
  state: string,
  binding: { customer: string; server: string },
): Promise<PaywallRetry> {
  const check = await states.check(state, { ...binding, tool: call.tool, arguments: call.arguments });
  if (check !== 'ok')
    return {
      kind: 'invalid',
      answer: jsonRpcError(
        call.id,
        INVALID_PARAMS,
        `requestState ${STATE_PROBLEMS[check]}; call the tool again without it`,
        { code: 'request_state_invalid' },
      ),
    };
  const params = (parsed as { params: Record<string, unknown> }).params;
  const checkout = isObject(params.inputResponses) ? params.inputResponses[CHECKOUT_INPUT] : undefined;
  delete params.requestState;
  delete params.inputResponses;
  return {
    kind: 'retry',
    accepted: isObject(checkout) && checkout.action === 'accept',
    body: Buffer.from(JSON.stringify(parsed)),
  };
}
