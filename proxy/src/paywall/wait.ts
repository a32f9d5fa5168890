import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import type { CallFacts, Gated, ToolCall } from '../calls';
import type { Gatekeeper, Verdict } from '../gatekeeper';

/** How often the decision is taken again without an announced change (one missed while disconnected). */
const RECHECK_MS = 2_000;

type Admitted = Extract<Verdict, { kind: 'admit' }>;

/**
 * The wait for payment after a modern client accepted the paywall's checkout (MCP 2026-07-28:
 * accepting a URL elicitation means the user agreed to open the page, not that they paid). The
 * call's retry is decided again each time the control plane announces a change to the customer's
 * purchase of the product (a purchase, a plan change, credits), and every RECHECK_MS besides,
 * until it is admitted or `waitMs` has passed or the client has gone.
 */
export async function waitForPayment(
  gatekeeper: Gatekeeper,
  server: McpServerSnapshot,
  customerRef: string,
  tool: string,
  waitMs: number,
  gone: () => boolean,
): Promise<Admitted | undefined> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    const left = deadline - performance.now();
    if (left <= 0 || gone()) return undefined;
    const change = gatekeeper.purchaseChange(server, customerRef);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      change?.changed,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.min(left, RECHECK_MS));
      }),
    ]);
    clearTimeout(timer);
    change?.cancel();
    if (gone()) return undefined;
    try {
      const verdict = await gatekeeper.decide(server, customerRef, tool);
      if (verdict.kind === 'admit') return verdict;
    } catch {
      // The snapshot or limit store is away for now: decided again at the next change or check.
    }
  }
}

/** The gating of a call admitted once paid for: forwarded like any admitted call, its unit spent now. */
export function admittedAfterPayment(call: ToolCall, verdict: Admitted): Gated {
  const fact: CallFacts = { admitted: verdict.counted };
  if (verdict.credits !== undefined) fact.credits = verdict.credits;
  if (verdict.charges !== undefined) fact.charges = verdict.charges;
  if (verdict.planId !== undefined) fact.planId = verdict.planId;
  return { facts: new Map([[call, fact]]), answers: [], refusedIds: new Set() };
}
