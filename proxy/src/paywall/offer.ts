import type { Logger } from '@mcp-meter/contracts/kit';
import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import type { ToolCall } from '../calls';
import type { ControlPlaneLink, PaywallAnswer } from '../control-link';
import type { Era } from '../era';
import type { Verdict } from '../gatekeeper';
import { paywallAnswer } from './answer';
import type { PaywallStates } from './state';

export type Refused = Exclude<Verdict, { kind: 'admit' }>;

/**
 * The answer to a call the gate refused, which the origin never sees: the paywall, with the
 * checkout the control plane offers for it (and, for a modern client that can open the page,
 * the signed state its retry brings back), in the shape of the client's revision; or a
 * retry-later error when the limit could not be checked.
 */
export class PaywallOffers {
  constructor(
    private readonly deps: { link: ControlPlaneLink | undefined; logger: Logger; states: PaywallStates },
  ) {}

  async answer(
    server: McpServerSnapshot,
    customerRef: string,
    call: ToolCall,
    verdict: Refused,
    era: Era,
  ): Promise<Record<string, unknown>> {
    if (verdict.kind === 'unavailable') {
      return {
        jsonrpc: '2.0',
        id: call.id,
        error: { code: -32000, message: 'Usage limits cannot be checked right now; try again shortly' },
      };
    }
    let paywall: PaywallAnswer | null | undefined;
    const { link } = this.deps;
    if (link !== undefined && server.productId !== null) {
      try {
        paywall = await link.paywall({
          providerId: server.providerId,
          environment: server.environment,
          customerId: customerRef,
          productId: server.productId,
          reason: verdict.reason,
          planIds: verdict.planIds,
          ...(verdict.planId === undefined ? {} : { planId: verdict.planId }),
        });
      } catch (error) {
        this.deps.logger.warn(
          { err: error, server: server.serverId },
          'paywall checkout session not created',
        );
      }
    }
    // A modern client that can open the checkout page retries the call with this state after it.
    const state =
      era.modern && era.urlElicitation && paywall !== null && paywall !== undefined
        ? await this.deps.states.mint({
            customer: customerRef,
            server: server.serverId,
            tool: call.tool,
            arguments: call.arguments,
          })
        : undefined;
    return paywallAnswer(call, verdict, paywall, era, state);
  }
}
