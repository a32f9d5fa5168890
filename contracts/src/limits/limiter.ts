import { randomToken } from '../kit/ids';
import type { CounterStore, LeaseCall } from './counter';

/** One limit to enforce: the counter's key, the cap, and how to build the counter when it is missing. */
export interface LimitTarget {
  key: string;
  limit: number;
  /**
   * Units one admission spends: 1 for a call against a plan's limit, the plan's creditsPerUnit
   * against a customer's credit balance. Leases are never smaller than one admission.
   */
  cost?: number;
  /** Usage already admitted in the period (from ClickHouse) and when the counter may be dropped. */
  seed(): Promise<{ used: number; expiresAtMs: number }>;
}

/**
 * What one admission spent of which lease: a usage record carries it into the write-ahead spool,
 * so that after a crash the next process settles the dead one's open leases at what was recorded.
 */
export interface LeaseCharge {
  key: string;
  lease: string;
  units: number;
}

/**
 * Told when this process's leases open (before the store is asked, so before any call spends
 * from them) and when the store has them settled.
 */
export interface LeaseWatcher {
  opened(key: string, lease: string): void;
  closed(lease: string): void;
}

export type LimitDecision =
  /** `charge`: the lease the admission came from (absent when there was none: grace, checks). */
  | { allowed: true; charge?: LeaseCharge }
  /** `used` counts every admitted call, so `used >= limit` here. */
  | { allowed: false; used: number; limit: number };

export interface LimiterOptions {
  /** Largest lease; away from the limit one store call serves this many admissions. */
  maxLease: number;
  /** A lease gets the remaining budget divided by this: several processes share what is left. */
  divisor: number;
  /** A lease is spent for at most this long, then settled; also how long a caller may wait at the edge. */
  holdMs: number;
  /** An unused lease is settled after this long, returning its budget to the others. */
  idleMs: number;
  /** Expiry of a lease in the store (its holder vanished): longer than holdMs. */
  leaseTtlMs: number;
}

export const DEFAULT_LIMITER_OPTIONS: LimiterOptions = {
  maxLease: 100,
  divisor: 4,
  holdMs: 1_000,
  idleMs: 200,
  leaseTtlMs: 10_000,
};

/** The store is unreachable; the caller applies its outage policy. */
export class LimiterUnavailableError extends Error {
  constructor(cause: unknown) {
    super('usage limit store unavailable', { cause });
  }
}

interface Held {
  id: string;
  /** The decision every admission from this lease returns (one object per lease, not per call). */
  decision: { allowed: true; charge: LeaseCharge };
  left: number;
  spent: number;
  acquiredAt: number;
  lastUsedAt: number;
}

interface KeyState {
  held: Held | undefined;
  /** The counter as the store last answered a lease call of this process: used, and leased by all. */
  seen: { used: number; leased: number } | undefined;
  acquiring: Promise<{ granted: number; leasedElsewhere: number; used: number }> | undefined;
  touchedAt: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A store call that only settles lease `leaseId` of counter `key` at `spent`, leasing nothing. */
const settleCall = (key: string, leaseId: string, spent: number): LeaseCall => ({
  key,
  limit: 0,
  want: 0,
  divisor: 1,
  leaseTtlMs: 0,
  leaseId: '',
  settle: { leaseId, spent },
});

/**
 * Exact usage caps at local speed. Each process leases a chunk of a counter's remaining budget
 * (one atomic store call) and admits calls from it in memory; chunks shrink as the budget runs
 * out, down to one call at a time at the very edge. Because every admission is backed by a
 * lease, the processes together never admit more than the limit. When the budget is gone but
 * other processes still hold unspent leases, a caller waits (up to `holdMs`) for them to be
 * settled rather than being refused while budget remains.
 */
export class LeasedLimiter {
  private readonly states = new Map<string, KeyState>();
  /** Runs the sweep while any counter is known; an idle process wakes for nothing. */
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  admitted = 0;
  denied = 0;
  leases = 0;

  /**
   * Settlements the store has not taken yet: a dead process's leases at what its spool recorded,
   * and leases whose grant was lost with the store's answer. Retried by the sweep.
   */
  private pending: LeaseCall[] = [];
  private settling: Promise<void> | undefined;

  constructor(
    private readonly store: CounterStore,
    private readonly options: LimiterOptions = DEFAULT_LIMITER_OPTIONS,
    private readonly watcher?: LeaseWatcher,
  ) {}

  get storeCommands(): number {
    return this.store.commands;
  }

  /** Synchronous while a lease has budget left; otherwise one store call (or a short wait at the limit). */
  admit(target: LimitTarget): LimitDecision | Promise<LimitDecision> {
    const state = this.states.get(target.key);
    const held = state === undefined ? undefined : this.take(state, target.cost ?? 1);
    return held?.decision ?? this.slowAdmit(target);
  }

  /**
   * Undoes one admission of `target` (another check refused the same call): back into the lease
   * it came from while that is held, else subtracted from the counter's reported usage.
   */
  async giveBack(target: LimitTarget): Promise<void> {
    const cost = target.cost ?? 1;
    const held = this.states.get(target.key)?.held;
    this.admitted--;
    if (held !== undefined && held.spent >= cost) {
      held.spent -= cost;
      held.left += cost;
      return;
    }
    try {
      await this.store.report(target.key, -cost);
    } catch (error) {
      throw new LimiterUnavailableError(error);
    }
  }

  /**
   * Undoes an admission whose call never ran (the origin never read it): back into its lease
   * while this process still holds that lease, else subtracted from the counter in the store.
   */
  async giveBackCharge(charge: LeaseCharge): Promise<void> {
    const held = this.states.get(charge.key)?.held;
    this.admitted--;
    if (held !== undefined && held.id === charge.lease && held.spent >= charge.units) {
      held.spent -= charge.units;
      held.left += charge.units;
      return;
    }
    try {
      await this.store.report(charge.key, -charge.units);
    } catch (error) {
      this.admitted++;
      throw new LimiterUnavailableError(error);
    }
  }

  /** Spends `cost` of the held lease; the lease, or undefined when it cannot pay. */
  private take(state: KeyState, cost: number, anyAge = false): Held | undefined {
    const held = state.held;
    if (held === undefined || held.left < cost) return undefined;
    const now = performance.now();
    if (!anyAge && now - held.acquiredAt > this.options.holdMs) return undefined;
    held.left -= cost;
    held.spent += cost;
    held.lastUsedAt = now;
    state.touchedAt = now;
    this.admitted++;
    return held;
  }

  private async slowAdmit(target: LimitTarget): Promise<LimitDecision> {
    let state = this.states.get(target.key);
    if (state === undefined) {
      state = { held: undefined, seen: undefined, acquiring: undefined, touchedAt: performance.now() };
      this.states.set(target.key, state);
      this.startSweeping();
    }
    const deadline = performance.now() + this.options.holdMs + 250;
    const cost = target.cost ?? 1;
    for (;;) {
      let held = this.take(state, cost);
      if (held !== undefined) return held.decision;
      if (state.acquiring === undefined) {
        state.acquiring = this.acquire(state, target).finally(() => {
          if (state !== undefined) state.acquiring = undefined;
        });
      }
      let reply: Awaited<NonNullable<KeyState['acquiring']>>;
      try {
        reply = await state.acquiring;
      } catch (error) {
        // The store is unreachable: what this process already leased was reserved there and is
        // still this process's to spend, however old (an expired lease counts as fully spent).
        held = this.take(state, cost, true);
        if (held !== undefined) return held.decision;
        throw error;
      }
      held = this.take(state, cost);
      if (held !== undefined) return held.decision;
      // Budget was granted but taken by the other waiters: lease again.
      if (reply.granted > 0) continue;
      if (reply.leasedElsewhere > 0 && performance.now() < deadline) {
        await sleep(5);
        continue;
      }
      this.denied++;
      // With a cost above 1 the budget can end short of the limit (2 credits left, 3 a call).
      const used = cost === 1 ? Math.max(reply.used, target.limit) : reply.used;
      return { allowed: false, used, limit: target.limit };
    }
  }

  private async acquire(state: KeyState, target: LimitTarget) {
    const previous = state.held;
    state.held = undefined;
    const cost = target.cost ?? 1;
    const call: LeaseCall = {
      key: target.key,
      limit: target.limit,
      want: this.closed ? 0 : this.options.maxLease * cost,
      minGrant: cost,
      divisor: this.options.divisor,
      leaseTtlMs: this.options.leaseTtlMs,
      // 48 random bits, from the pool ids are drawn from.
      leaseId: randomToken(6),
      settle: previous === undefined ? undefined : { leaseId: previous.id, spent: previous.spent },
    };
    try {
      // Told before the store grants it: a record may name the lease as soon as it exists.
      if (call.want > 0) this.watcher?.opened(target.key, call.leaseId);
      const reply = await this.leaseSeeded(call, target);
      this.leases++;
      state.seen = { used: reply.used, leased: reply.leased };
      if (previous !== undefined) this.watcher?.closed(previous.id);
      const now = performance.now();
      if (reply.granted > 0) {
        const charge = { key: target.key, lease: call.leaseId, units: cost };
        state.held = {
          id: call.leaseId,
          decision: { allowed: true, charge },
          left: reply.granted,
          spent: 0,
          acquiredAt: now,
          lastUsedAt: now,
        };
      } else if (call.want > 0) this.watcher?.closed(call.leaseId);
      return { granted: reply.granted, leasedElsewhere: reply.leased - reply.granted, used: reply.used };
    } catch (error) {
      // The lease could not be settled or renewed: it stays held, to be spent while the store is away.
      if (previous !== undefined && state.held === undefined) state.held = previous;
      // The new lease may have been granted before the answer was lost: settled at nothing later.
      if (call.want > 0) {
        this.settleLater([{ key: target.key, lease: call.leaseId, units: 0 }]);
        this.watcher?.closed(call.leaseId);
      }
      throw new LimiterUnavailableError(error);
    }
  }

  /**
   * Adds `units` admitted without the store (an outage's grace) to the counter's reported usage,
   * so the counter counts them once the store is back.
   */
  async report(key: string, units: number): Promise<void> {
    try {
      await this.store.report(key, units);
    } catch (error) {
      throw new LimiterUnavailableError(error);
    }
  }

  /**
   * Reported usage plus open leases of a counter as the store answered this process's latest
   * lease call for it, less what this process's own lease has unspent: what `peek` would read, for
   * a caller whose admission came from this process's lease, without a second call. It counts
   * every admission of this process; the others' as of that lease call (at most `holdMs` ago).
   */
  seenReserved(key: string): number | undefined {
    const state = this.states.get(key);
    if (state?.seen === undefined) return undefined;
    return state.seen.used + Math.max(0, state.seen.leased - (state.held?.left ?? 0));
  }

  /** One lease call; a missing counter is seeded first (from the target's usage) and asked again. */
  private async leaseSeeded(call: LeaseCall, target: LimitTarget) {
    let reply = await this.store.lease(call);
    if (reply.missing) {
      const seed = await target.seed();
      await this.store.seed(target.key, seed.used, seed.expiresAtMs);
      reply = await this.store.lease(call);
    }
    if (reply.missing) throw new Error(`limit counter ${target.key} vanished while seeding`);
    return reply;
  }

  /**
   * Reported usage and open leases of a counter, without leasing (seeds a missing counter).
   * `leased` leaves out the units this process's own lease still has unspent (a given-back unit
   * returns there), so a read right after a refusal does not count that unit as used; other
   * processes' leases count whole, as nothing tells what they spent.
   */
  async peek(target: LimitTarget): Promise<{ used: number; leased: number }> {
    const call: LeaseCall = {
      key: target.key,
      limit: target.limit,
      want: 0,
      divisor: 1,
      leaseTtlMs: 0,
      leaseId: '',
    };
    try {
      const reply = await this.leaseSeeded(call, target);
      const unspent = this.states.get(target.key)?.held?.left ?? 0;
      return { used: reply.used, leased: Math.max(0, reply.leased - unspent) };
    } catch (error) {
      throw new LimiterUnavailableError(error);
    }
  }

  /**
   * Settles leases this process does not hold at the units recorded against them: those of a
   * process that died (read from the spool it left). An open lease adds them; one that expired
   * meanwhile (counted whole) gives back the rest; one the store no longer knows is left alone.
   * Retried while the store is away.
   */
  settleLater(charges: readonly LeaseCharge[]): void {
    for (const charge of charges) this.pending.push(settleCall(charge.key, charge.lease, charge.units));
    if (this.pending.length > 0) {
      this.startSweeping();
      void this.settlePending();
    }
  }

  /** Settlements still waiting for the store. */
  get unsettled(): number {
    return this.pending.length;
  }

  /** Sends the waiting settlements in one round trip; resolves when that was tried. */
  settlePending(): Promise<void> {
    this.settling ??= (async () => {
      const calls = this.pending;
      this.pending = [];
      if (calls.length === 0) return;
      try {
        await this.store.settleMany(calls);
      } catch {
        this.pending.unshift(...calls);
      }
    })().finally(() => {
      this.settling = undefined;
    });
    return this.settling;
  }

  private startSweeping(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setInterval(() => void this.sweep(), Math.max(20, Math.min(this.options.idleMs, 100)));
    this.timer.unref();
  }

  /** Settles idle or old leases in one round trip, and forgets counters not used for a while. */
  private async sweep(force = false): Promise<void> {
    const now = performance.now();
    const calls: LeaseCall[] = [];
    const swept: Array<[KeyState, NonNullable<KeyState['held']>]> = [];
    for (const [key, state] of this.states) {
      const held = state.held;
      if (state.acquiring !== undefined) continue;
      if (
        held !== undefined &&
        (force || now - held.lastUsedAt > this.options.idleMs || now - held.acquiredAt > this.options.holdMs)
      ) {
        state.held = undefined;
        swept.push([state, held]);
        calls.push(settleCall(key, held.id, held.spent));
      }
      if (state.held === undefined && now - state.touchedAt > 60_000) this.states.delete(key);
    }
    if (this.pending.length > 0) void this.settlePending();
    if (this.states.size === 0 && this.pending.length === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
    if (calls.length === 0) return;
    try {
      await this.store.settleMany(calls);
      for (const [, held] of swept) this.watcher?.closed(held.id);
    } catch {
      // The store is away: the lease expires there and counts as fully spent, so its unspent
      // units stay this process's to use until the store is back (a stop gives them up).
      if (!force) for (const [state, held] of swept) state.held ??= held;
    }
  }

  /** Returns every unspent lease, so a clean shutdown leaves the whole budget to the other processes. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.allSettled([...this.states.values()].map((s) => s.acquiring));
    await this.sweep(true);
    await this.settlePending();
  }
}
