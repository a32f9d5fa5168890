import type { EntitlementSnapshot, McpServerSnapshot } from '../snapshots/format';
import { type CounterScope, calendarPeriod } from './keys';

/** What decides one tool call before the limit check. */
export type Gate =
  /** A `noPlan` tool, or a server not linked to a product: admitted, metered, never limited. */
  | { kind: 'free' }
  /** Admitted under this plan; `limit` null means unlimited. */
  | {
      kind: 'plan';
      source: 'purchase' | 'default';
      planId: string;
      limit: number | null;
      periodStart: Date;
      periodEnd: Date | null;
      /** Paid from credits: each call also spends `perUnit` of the customer's credits. */
      credits: { perUnit: number; funded: number } | null;
    }
  /** Refused before any limit: the customer has no plan that opens this tool. */
  | { kind: 'paywall'; reason: 'no_plan' | 'plan_required'; planIds: string[] };

type ToolIndex = Map<string, { planIds: string[]; noPlan: boolean }>;
const toolIndexes = new WeakMap<McpServerSnapshot, ToolIndex>();

function toolsOf(server: McpServerSnapshot): ToolIndex {
  let index = toolIndexes.get(server);
  if (index === undefined) {
    index = new Map((server.tools ?? []).map((t) => [t.name, t]));
    toolIndexes.set(server, index);
  }
  return index;
}

/**
 * Tool gating. A `noPlan` tool is free. A tool with `planIds` needs an access-granting purchase
 * of one of those plans. Any other tool (listed without plans, or not listed) needs an
 * access-granting purchase of the server's product, or else falls to the server's free
 * `defaultPlanId`, whose limit counts per UTC calendar period of its cycle.
 */
export function gateFor(
  server: McpServerSnapshot,
  tool: string,
  entitlement: EntitlementSnapshot | undefined,
  now: Date,
): Gate {
  if (server.productId === null) return { kind: 'free' };
  const listed = toolsOf(server).get(tool);
  if (listed?.noPlan === true) return { kind: 'free' };
  const active = entitlement?.grantsAccess === true ? entitlement : undefined;
  const required = listed?.planIds ?? [];
  if (required.length > 0) {
    if (active === undefined || !required.includes(active.planId))
      return { kind: 'paywall', reason: 'plan_required', planIds: required };
    return purchaseGate(active);
  }
  if (active !== undefined) return purchaseGate(active);
  const fallback = server.defaultPlan;
  if (fallback === undefined || fallback === null) return { kind: 'paywall', reason: 'no_plan', planIds: [] };
  const period = calendarPeriod(fallback.billingCycle, fallback.intervalDays, now);
  return {
    kind: 'plan',
    source: 'default',
    planId: fallback.planId,
    limit: fallback.limit,
    periodStart: period.start,
    periodEnd: period.end,
    credits: null,
  };
}

const purchaseGates = new WeakMap<EntitlementSnapshot, Gate>();

/**
 * A purchase's gate depends on its snapshot alone: made once per snapshot object, so every call
 * under the same cached purchase gets the same gate (callers keep what they derive from it by it).
 */
function purchaseGate(e: EntitlementSnapshot): Gate {
  let gate = purchaseGates.get(e);
  if (gate === undefined) {
    gate = {
      kind: 'plan',
      source: 'purchase',
      planId: e.planId,
      limit: e.limit,
      periodStart: new Date(e.periodStart),
      periodEnd: e.periodEnd === null ? null : new Date(e.periodEnd),
      credits: e.credits ?? null,
    };
    purchaseGates.set(e, gate);
  }
  return gate;
}

export function scopeOf(
  server: Pick<McpServerSnapshot, 'providerId' | 'environment'>,
  customerId: string,
  productId: string,
  gate: Extract<Gate, { kind: 'plan' }>,
): CounterScope {
  return {
    providerId: server.providerId,
    environment: server.environment,
    customerId,
    productId,
    planId: gate.planId,
    periodStart: gate.periodStart,
  };
}
