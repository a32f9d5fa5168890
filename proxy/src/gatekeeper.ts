import {
  counterKey,
  creditKey,
  gateFor,
  type LeaseCharge,
  type LeasedLimiter,
  LimiterUnavailableError,
  scopeOf,
} from '@mcp-meter/contracts/limits';
import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import type { ControlPlaneLink } from './control-link';
import { type EntitlementDirectory, SnapshotUnavailableError } from './directory';

export type Verdict =
  /**
   * `counted`: the call spent a unit of a plan's allowance (recorded as `admitted: true`);
   * `credits`: what it spent of the customer's credits (plans paid from credits).
   */
  /** `charges`: what the call spent of which of this process's leases (its record carries them). */
  | { kind: 'admit'; counted: boolean; credits?: number; charges?: LeaseCharge[] }
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

const FREE: Verdict = { kind: 'admit', counted: false };
const COUNTED: Verdict = { kind: 'admit', counted: true };

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

  constructor(
    private readonly entitlements: EntitlementDirectory,
    private readonly limiter: LeasedLimiter,
    private readonly link: ControlPlaneLink,
    private readonly policy: OutagePolicy,
    private readonly grace: OutageGrace = { percent: 1, max: 100 },
  ) {}

  /** A call admitted in grace, or undefined when the counter's grace is spent (or there is none). */
  private admitInGrace(key: string, limit: number): Verdict | undefined {
    const allowance = Math.min(Math.ceil((limit * this.grace.percent) / 100), this.grace.max);
    const used = this.graceUsed.get(key) ?? 0;
    if (used >= allowance) return undefined;
    this.graceUsed.set(key, used + 1);
    this.stats.decisions.grace++;
    this.stats.graceUnreported++;
    this.reporting ??= setInterval(() => void this.reportGrace(), 1_000);
    this.reporting.unref();
    return COUNTED;
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

  async decide(server: McpServerSnapshot, customerId: string, tool: string): Promise<Verdict> {
    const productId = server.productId;
    if (productId === null) {
      this.stats.decisions.free++;
      return FREE;
    }
    let entitlement: Awaited<ReturnType<EntitlementDirectory['lookup']>>;
    try {
      entitlement = await this.entitlements.lookup(server, customerId, productId);
    } catch (error) {
      // Redis is away and this customer's purchase is not cached: which plan applies is unknown.
      if (!(error instanceof SnapshotUnavailableError)) throw error;
      this.stats.decisions.unavailable++;
      return { kind: 'unavailable' };
    }
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
      return COUNTED;
    }
    const scope = scopeOf(server, customerId, productId, gate);
    try {
      const limitTarget =
        gate.limit === null
          ? undefined
          : { key: counterKey(scope), limit: gate.limit, seed: () => this.link.seed(scope, gate.periodEnd) };
      let charges: LeaseCharge[] | undefined;
      if (limitTarget !== undefined) {
        const decision = await this.limiter.admit(limitTarget);
        if (decision.allowed && decision.charge !== undefined) charges = [decision.charge];
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
      }
      if (gate.credits === null) {
        this.stats.decisions.admitted++;
        return charges === undefined ? COUNTED : { kind: 'admit', counted: true, charges };
      }
      const perUnit = gate.credits.perUnit;
      const credits = await this.limiter.admit({
        key: creditKey(scope),
        limit: gate.credits.funded,
        cost: perUnit,
        seed: () => this.link.creditSeed(scope),
      });
      if (credits.allowed) {
        this.stats.decisions.admitted++;
        if (credits.charge !== undefined) charges = [...(charges ?? []), credits.charge];
        return {
          kind: 'admit',
          counted: true,
          credits: perUnit,
          ...(charges === undefined ? {} : { charges }),
        };
      }
      // Refused for want of credits: the unit of the plan's limit it took goes back.
      if (limitTarget !== undefined) await this.limiter.giveBack(limitTarget);
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
    } catch (error) {
      if (!(error instanceof LimiterUnavailableError)) throw error;
      if (this.policy === 'open') {
        this.stats.decisions.open++;
        return COUNTED;
      }
      // Credits are money: a plan paid from them never runs on grace.
      if (this.policy === 'grace' && gate.limit !== null && gate.credits === null) {
        const admitted = this.admitInGrace(counterKey(scope), gate.limit);
        if (admitted !== undefined) return admitted;
      }
      this.stats.decisions.unavailable++;
      return { kind: 'unavailable' };
    }
  }
}
