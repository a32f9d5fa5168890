import {
  counterKey,
  creditKey,
  type Gate,
  gateFor,
  type LeaseCharge,
  type LeasedLimiter,
  type LimitDecision,
  LimiterUnavailableError,
  type LimitTarget,
  scopeOf,
} from '@mcp-meter/contracts/limits';
import type { EntitlementSnapshot, McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import type { ControlPlaneLink } from './control-link';
import { type EntitlementDirectory, SnapshotUnavailableError } from './directory';

export type Verdict =
  /**
   * `counted`: the call spent a unit of a plan's allowance (recorded as `admitted: true`);
   * `credits`: what it spent of the customer's credits (plans paid from credits).
   */
  /** `charges`: what the call spent of which of this process's leases (its record carries them). */
  /** `planId`: the plan that admitted it (absent for a free tool or a server with no product). */
  | { kind: 'admit'; counted: boolean; credits?: number; charges?: LeaseCharge[]; planId?: string }
  | {
      kind: 'paywall';
      reason: 'limit_reached' | 'plan_required' | 'no_plan' | 'credits_exhausted';
      planIds: string[];
      planId?: string;
      /** limit_reached: calls; credits_exhausted: credits (every credit funded, and spent). */
      limit?: number;
      used?: number;
      creditsPerUnit?: number;
    }
  /** The limit store is down and the policy is to refuse rather than risk going over. */
  | { kind: 'unavailable' };

/**
 * What the proxy does with a limited call while the limit store (Redis) is unreachable and this
 * process's own leases are spent: `grace` admits a bounded number more per counter (recorded as
 * admitted, added to the counter once the store is back), `closed` refuses at once, `open`
 * admits everything (no bound).
 */
export type OutagePolicy = 'grace' | 'closed' | 'open';

export interface OutageGrace {
  /** Share of the plan's limit, in percent, admitted per counter and outage... */
  percent: number;
  /** ...and never more than this many calls; 0 fails closed. */
  max: number;
}

const FREE: Verdict = Object.freeze({ kind: 'admit', counted: false });
const UNAVAILABLE: Verdict = Object.freeze({ kind: 'unavailable' });

type PlanGate = Extract<Gate, { kind: 'plan' }>;

/** A purchase's gate is one object while its snapshot is cached: its plain admission is made once. */
const countedVerdicts = new WeakMap<PlanGate, Verdict>();

/** A call admitted under the gate's plan, spending a unit and nothing from a lease. */
function counted(gate: PlanGate): Verdict {
  let verdict = countedVerdicts.get(gate);
  if (verdict === undefined) {
    verdict = Object.freeze({ kind: 'admit', counted: true, planId: gate.planId });
    if (gate.source === 'purchase') countedVerdicts.set(gate, verdict);
  }
  return verdict;
}

/** The counters one plan's calls are checked against: its limit's, and its credits' when paid from them. */
interface Targets {
  limit: LimitTarget | undefined;
  credits: LimitTarget | undefined;
}

export interface GateStats {
  decisions: Record<'free' | 'admitted' | 'paywall' | 'unavailable' | 'open' | 'grace', number>;
  /** Calls admitted in grace whose counter has not yet been told (the store is still away). */
  graceUnreported: number;
}

/** Tool gating then the exact limit check, for one tool call of one customer. */
export class Gatekeeper {
  readonly stats: GateStats = {
    decisions: { free: 0, admitted: 0, paywall: 0, unavailable: 0, open: 0, grace: 0 },
    graceUnreported: 0,
  };
  /** Grace spent per counter in the current outage, and not yet added to the counter. */
  private readonly graceUsed = new Map<string, number>();
  private reporting: NodeJS.Timeout | undefined;
  /** Each cached purchase's counters, by its gate (one object per purchase snapshot). */
  private readonly targets = new WeakMap<PlanGate, Targets>();

  constructor(
    private readonly entitlements: EntitlementDirectory,
    private readonly limiter: LeasedLimiter,
    private readonly link: ControlPlaneLink,
    private readonly policy: OutagePolicy,
    private readonly grace: OutageGrace = { percent: 1, max: 100 },
  ) {}

  /** A call admitted in grace, or undefined when the counter's grace is spent (or there is none). */
  private admitInGrace(gate: PlanGate, key: string, limit: number): Verdict | undefined {
    const allowance = Math.min(Math.ceil((limit * this.grace.percent) / 100), this.grace.max);
    const used = this.graceUsed.get(key) ?? 0;
    if (used >= allowance) return undefined;
    this.graceUsed.set(key, used + 1);
    this.stats.decisions.grace++;
    this.stats.graceUnreported++;
    this.reporting ??= setInterval(() => void this.reportGrace(), 1_000);
    this.reporting.unref();
    return counted(gate);
  }

  /** Adds the grace calls to their counters once the store answers; their grace is then renewed. */
  private async reportGrace(): Promise<void> {
    for (const [key, units] of [...this.graceUsed]) {
      try {
        await this.limiter.report(key, units);
      } catch {
        return; // still away: try again on the next tick
      }
      this.graceUsed.delete(key);
      this.stats.graceUnreported -= units;
    }
    clearInterval(this.reporting);
    this.reporting = undefined;
  }

  /** Reports what grace it can and stops the report timer. */
  async close(): Promise<void> {
    if (this.reporting !== undefined) await this.reportGrace();
    clearInterval(this.reporting);
  }

  /**
   * The verdict for one call: synchronous while the customer's purchase is cached and a lease of
   * this process pays for the call (nearly every call), a promise when the store must be asked.
   */
  decide(server: McpServerSnapshot, customerId: string, tool: string): Verdict | Promise<Verdict> {
    const productId = server.productId;
    if (productId === null) {
      this.stats.decisions.free++;
      return FREE;
    }
    const entitlement = this.entitlements.lookup(server, customerId);
    if (!(entitlement instanceof Promise))
      return this.judge(server, customerId, productId, tool, entitlement);
    return entitlement.then(
      (found) => this.judge(server, customerId, productId, tool, found),
      (error: unknown) => {
        // Redis is away and this customer's purchase is not cached: which plan applies is unknown.
        if (!(error instanceof SnapshotUnavailableError)) throw error;
        this.stats.decisions.unavailable++;
        return UNAVAILABLE;
      },
    );
  }

  private judge(
    server: McpServerSnapshot,
    customerId: string,
    productId: string,
    tool: string,
    entitlement: EntitlementSnapshot | undefined,
  ): Verdict | Promise<Verdict> {
    const gate = gateFor(server, tool, entitlement, new Date());
    if (gate.kind === 'free') {
      this.stats.decisions.free++;
      return FREE;
    }
    if (gate.kind === 'paywall') {
      this.stats.decisions.paywall++;
      return { kind: 'paywall', reason: gate.reason, planIds: gate.planIds };
    }
    if (gate.limit === null && gate.credits === null) {
      this.stats.decisions.admitted++;
      return counted(gate);
    }
    const targets = this.targetsOf(server, customerId, productId, gate);
    if (targets.limit === undefined) return this.afterLimit(gate, targets, undefined);
    const decision = this.limiter.admit(targets.limit);
    if (!(decision instanceof Promise)) return this.afterLimit(gate, targets, decision);
    return decision.then(
      (decided) => this.afterLimit(gate, targets, decided),
      (error: unknown) => this.outage(error, gate, targets),
    );
  }

  /**
   * The counters a plan's call is checked against. A purchase's gate is the same object for as
   * long as its snapshot is cached (gateFor), so its targets are built once, not per call.
   */
  private targetsOf(
    server: McpServerSnapshot,
    customerId: string,
    productId: string,
    gate: PlanGate,
  ): Targets {
    const known = this.targets.get(gate);
    if (known !== undefined) return known;
    const scope = scopeOf(server, customerId, productId, gate);
    const targets: Targets = {
      limit:
        gate.limit === null
          ? undefined
          : { key: counterKey(scope), limit: gate.limit, seed: () => this.link.seed(scope, gate.periodEnd) },
      credits:
        gate.credits === null
          ? undefined
          : {
              key: creditKey(scope),
              limit: gate.credits.funded,
              cost: gate.credits.perUnit,
              seed: () => this.link.creditSeed(scope),
            },
    };
    if (gate.source === 'purchase') this.targets.set(gate, targets);
    return targets;
  }

  private afterLimit(
    gate: PlanGate,
    targets: Targets,
    decision: LimitDecision | undefined,
  ): Verdict | Promise<Verdict> {
    let charges: LeaseCharge[] | undefined;
    if (decision !== undefined) {
      if (!decision.allowed) {
        this.stats.decisions.paywall++;
        return {
          kind: 'paywall',
          reason: 'limit_reached',
          planIds: [],
          planId: gate.planId,
          limit: decision.limit,
          used: decision.used,
        };
      }
      if (decision.charge !== undefined) charges = [decision.charge];
    }
    if (targets.credits === undefined) {
      this.stats.decisions.admitted++;
      return charges === undefined
        ? counted(gate)
        : { kind: 'admit', counted: true, charges, planId: gate.planId };
    }
    const credits = this.limiter.admit(targets.credits);
    if (!(credits instanceof Promise)) return this.afterCredits(gate, targets, charges, credits);
    return credits.then(
      (decided) => this.afterCredits(gate, targets, charges, decided),
      (error: unknown) => this.outage(error, gate, targets),
    );
  }

  private afterCredits(
    gate: PlanGate,
    targets: Targets,
    charges: LeaseCharge[] | undefined,
    credits: LimitDecision,
  ): Verdict | Promise<Verdict> {
    const perUnit = targets.credits?.cost ?? 1;
    if (credits.allowed) {
      this.stats.decisions.admitted++;
      if (credits.charge !== undefined)
        charges = charges === undefined ? [credits.charge] : [...charges, credits.charge];
      const verdict: Verdict = { kind: 'admit', counted: true, credits: perUnit, planId: gate.planId };
      if (charges !== undefined) verdict.charges = charges;
      return verdict;
    }
    return this.refuseForCredits(gate, targets, credits, perUnit);
  }

  /** Refused for want of credits: the unit of the plan's limit it took goes back. */
  private async refuseForCredits(
    gate: PlanGate,
    targets: Targets,
    credits: Extract<LimitDecision, { allowed: false }>,
    perUnit: number,
  ): Promise<Verdict> {
    try {
      if (targets.limit !== undefined) await this.limiter.giveBack(targets.limit);
    } catch (error) {
      return this.outage(error, gate, targets);
    }
    this.stats.decisions.paywall++;
    return {
      kind: 'paywall',
      reason: 'credits_exhausted',
      planIds: [],
      planId: gate.planId,
      limit: credits.limit,
      used: credits.used,
      creditsPerUnit: perUnit,
    };
  }

  /**
   * Gives back what admissions spent of this process's leases, for calls the origin never read;
   * the charges that could not be (the limit store is away and the lease is settled), which stay
   * spent.
   */
  async giveBack(charges: readonly LeaseCharge[]): Promise<LeaseCharge[]> {
    const kept: LeaseCharge[] = [];
    for (const charge of charges) {
      try {
        await this.limiter.giveBackCharge(charge);
      } catch (error) {
        if (!(error instanceof LimiterUnavailableError)) throw error;
        kept.push(charge);
      }
    }
    return kept;
  }

  /** The next change the control plane announces to the customer's purchase of the server's product. */
  purchaseChange(server: McpServerSnapshot, customerId: string) {
    return this.entitlements.whenPurchaseChanges(server, customerId);
  }

  /** The limit store could not be asked: the outage policy decides. */
  private outage(error: unknown, gate: PlanGate, targets: Targets): Verdict {
    if (!(error instanceof LimiterUnavailableError)) throw error;
    if (this.policy === 'open') {
      this.stats.decisions.open++;
      return counted(gate);
    }
    // Credits are money: a plan paid from them never runs on grace.
    if (this.policy === 'grace' && targets.limit !== undefined && gate.credits === null) {
      const admitted = this.admitInGrace(gate, targets.limit.key, targets.limit.limit);
      if (admitted !== undefined) return admitted;
    }
    this.stats.decisions.unavailable++;
    return UNAVAILABLE;
  }
}
