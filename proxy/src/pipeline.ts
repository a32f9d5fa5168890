import { type AdmissionDeps, admit } from './admission';
import { type GatingDeps, gateRequest } from './gating';
import type { Exchange } from './http-io';
import type { ProxyRequest } from './intake';
import { Relay, type RelayDeps } from './relay';

/**
 * One MCP request's way through the proxy, once intake has read it, a step per file:
 * admission (may it come in: token, server, era; admission.ts), gating (may its calls run: the
 * plan, the limit, the paywall; gating.ts), relay (to the origin and back, each call recorded
 * once; relay.ts, metering.ts). A step that answers the request itself ends the way there.
 */
export async function forward(
  deps: AdmissionDeps & GatingDeps & RelayDeps,
  exchange: Exchange,
  request: ProxyRequest,
): Promise<void> {
  const admitted = await admit(deps, exchange, request);
  if (admitted === undefined) return;
  const gated = await gateRequest(deps, exchange, request, admitted);
  if (gated === undefined) return;
  await new Relay(deps, exchange, request, admitted, gated).run();
}
