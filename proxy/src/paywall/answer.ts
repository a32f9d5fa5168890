import type { PaywallShown } from '@mcp-meter/contracts/usage-record';
import type { ToolCall } from '../calls';

/**
 * The paywall's answer to a refused call, in the shape of the client's revision: its words (what
 * happened, what to do next, with the checkout link) and its machine-readable `_meta`.
 */

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
  | {
      checkoutUrl: string;
      checkoutSessionId: string;
      product: { id: string; name: string };
      /** The customer portal's sign-in, for a customer with an account (null or absent: none). */
      portalUrl?: string | null | undefined;
    }
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
  // A customer with an account is also shown where to see their usage, invoices and credits.
  const portal =
    offer?.portalUrl === undefined || offer.portalUrl === null
      ? ''
      : ` Your usage, invoices and credits: ${offer.portalUrl}`;
  return { what, next: `${next}${portal}` };
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
      portalUrl: offer?.portalUrl ?? null,
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

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * How a paywall answer `paywallAnswer` made shows the paywall, read back from its shape, with
 * the checkout it offers; undefined for any other answer (a retry-later error).
 */
export function paywallShownOf(
  answer: Record<string, unknown>,
  era: { modern: boolean },
): PaywallShown | undefined {
  const on = era.modern ? 'modern' : 'legacy';
  const { result, error } = answer;
  if (isObject(error) && error.code === URL_ELICITATION_REQUIRED && isObject(error.data)) {
    const first = Array.isArray(error.data.elicitations) ? error.data.elicitations[0] : undefined;
    const id = isObject(first) && typeof first.elicitationId === 'string' ? first.elicitationId : null;
    return { form: 'error_32042', era: on, checkoutSessionId: id };
  }
  if (!isObject(result) || !isObject(result._meta)) return undefined;
  const meta = result._meta[PAYWALL_META_KEY];
  if (!isObject(meta)) return undefined;
  const id = typeof meta.checkoutSessionId === 'string' ? meta.checkoutSessionId : null;
  return {
    form: result.resultType === 'input_required' ? 'url_elicitation' : 'text_link',
    era: on,
    checkoutSessionId: id,
  };
}
