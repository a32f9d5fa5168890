import { randomToken } from '../kit/ids';
import { NANOS_PER_UNIT } from '../usage/reported-units';
import type { CounterStore, LeaseCall } from './counter';
import {
  DEFAULT_LIMITER_OPTIONS,
  type Held,
  type KeyState,
  type LeaseCharge,
  type LeaseWatcher,
  type LimitDecision,
  type LimiterOptions,
  LimiterUnavailableError,
  type LimitTarget,
  newHeld,
  settleCall,
  sleep,
} from './lease-types';

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
   * Admissions that found no lease in hand and waited for the store (or for a lease on its way):
   * a counter's first call, its edge, or a lease run out before the next was taken.
   */
  waits = 0;

  /**
   * Settlements the store has not taken yet: a dead process's leases at what its spool recorded,
   * and leases whose grant was lost with the store's answer. Retried by the sweep.
   */
  private pending: LeaseCall[] = [];
  private settling: Promise<void> | undefined;
  /**
   * Leases a taken-ahead one replaced, not settled yet: the next lease call of their counter
   * settles one of them, the sweep the others once they wait longer than `idleMs`.
   */
  private retired: Array<{ key: string; held: Held; at: number }> = [];

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
    const held = state === undefined ? undefined : this.take(state, target);
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

  /** Whether `held` can pay `cost` now (`anyAge`: however old, as while the store is away). */
  private pays(held: Held | undefined, cost: number, now: number, anyAge: boolean): held is Held {
    return (
      held !== undefined && held.left >= cost && (anyAge || now - held.acquiredAt <= this.options.holdMs)
    );
  }

  /**
   * Spends one admission of `target` from the held lease, or from the lease taken ahead, which
   * then takes over (the old one is settled with the next store call); the lease, or undefined
   * when neither can pay. Renews ahead when the held lease runs low.
   */
  private take(state: KeyState, target: LimitTarget, anyAge = false): Held | undefined {
    const cost = target.cost ?? 1;
    const now = performance.now();
    let held = state.held;
    if (!this.pays(held, cost, now, anyAge)) {
      if (!this.pays(state.next, cost, now, anyAge)) return undefined;
      if (held !== undefined) this.retired.push({ key: target.key, held, at: now });
      held = state.next;
      state.held = held;
      state.next = undefined;
    }
    held.left -= cost;
    held.spent += cost;
    held.lastUsedAt = now;
    state.touchedAt = now;
    this.admitted++;
    if (
      state.next === undefined &&
      state.renewing === undefined &&
      state.acquiring === undefined &&
      this.options.renewAhead !== false &&
      (held.left * 4 < held.left + held.spent || now - held.acquiredAt > this.options.holdMs * 0.75)
    )
      this.renewAhead(state, target);
    return held;
  }

  /**
   * Leases the next chunk while the held one still pays, when the counter (as the store last
   * answered) has room for eight more leases beyond the others': near the limit the chunks
   * shrink and the budget is contended, and a lease taken ahead there would hold back units
   * other processes wait for. The call also settles one lease this one replaced.
   */
  private renewAhead(state: KeyState, target: LimitTarget): void {
    const cost = target.cost ?? 1;
    const { maxLease, divisor } = this.options;
    const seen = state.seen;
    if (seen === undefined || this.closed) return;
    if (target.limit - seen.used - seen.leased < maxLease * cost * divisor * 2) return;
    const at = this.retired.findIndex((r) => r.key === target.key);
    const replaced = at < 0 ? undefined : this.retired.splice(at, 1)[0]?.held;
    const call: LeaseCall = {
      key: target.key,
      limit: target.limit,
      want: maxLease * cost,
      minGrant: cost,
      divisor,
      leaseTtlMs: this.options.leaseTtlMs,
      leaseId: randomToken(6),
      settle: replaced === undefined ? undefined : { leaseId: replaced.id, spent: replaced.spent },
    };
    this.watcher?.opened(target.key, call.leaseId);
    state.renewing = this.leaseSeeded(call, target)
      .then(
        (reply) => {
          this.leases++;
          state.seen = { used: reply.used, leased: reply.leased };
          if (replaced !== undefined) this.watcher?.closed(replaced.id);
          if (reply.granted === 0) return this.watcher?.closed(call.leaseId);
          const now = performance.now();
          const next = newHeld(call.leaseId, target, reply.granted, now);
          // Taken while the limiter closed, or after the slow path leased meanwhile: given back.
          if (this.closed || state.next !== undefined)
            this.retired.push({ key: target.key, held: next, at: 0 });
          else state.next = next;
        },
        () => {
          // The store is away: calls go on from the held lease, then down the slow path. The
          // new lease may have been granted before the answer was lost: settled at nothing later.
          if (replaced !== undefined) this.retired.push({ key: target.key, held: replaced, at: 0 });
          this.settleLater([{ key: target.key, lease: call.leaseId, units: 0 }]);
          this.watcher?.closed(call.leaseId);
        },
      )
      .finally(() => {
        state.renewing = undefined;
      });
  }

  private async slowAdmit(target: LimitTarget): Promise<LimitDecision> {
    this.waits++;
    let state = this.states.get(target.key);
    if (state === undefined) {
      state = {
        held: undefined,
        next: undefined,
        renewing: undefined,
        seen: undefined,
        acquiring: undefined,
        touchedAt: performance.now(),
      };
      this.states.set(target.key, state);
      this.startSweeping();
    }
    const deadline = performance.now() + this.options.holdMs + 250;
    const cost = target.cost ?? 1;
    for (;;) {
      let held = this.take(state, target);
      if (held !== undefined) return held.decision;
      // A lease being taken ahead is on its way: it pays for this call unless it is refused.
      if (state.renewing !== undefined) {
        await state.renewing;
        held = this.take(state, target);
        if (held !== undefined) return held.decision;
      }
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
        held = this.take(state, target, true);
        if (held !== undefined) return held.decision;
        throw error;
      }
      held = this.take(state, target);
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
    // A lease taken ahead that cannot pay either (too old, or short of a cost above 1) goes too.
    if (state.next !== undefined) {
      this.retired.push({ key: target.key, held: state.next, at: 0 });
      state.next = undefined;
    }
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
      if (reply.granted > 0) state.held = newHeld(call.leaseId, target, reply.granted, now);
      else if (call.want > 0) this.watcher?.closed(call.leaseId);
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
    return state.seen.used + Math.max(0, state.seen.leased - this.unspent(key));
  }

  /** Units this process holds unspent in leases of counter `key`: held, taken ahead, replaced. */
  private unspent(key: string): number {
    const state = this.states.get(key);
    let left = (state?.held?.left ?? 0) + (state?.next?.left ?? 0);
    for (const r of this.retired) if (r.key === key) left += r.held.left;
    return left;
  }

  /** One lease call; a missing counter is seeded first (from the target's usage) and asked again. */
  private async leaseSeeded(call: LeaseCall, target: LimitTarget) {
    let reply = await this.store.lease(call);
    if (reply.missing) {
      const seed = await target.seed();
      // A fraction is billionths of one unit; anything else starts the counter without one.
      const fraction = seed.fractionNanos ?? 0;
      const valid = Number.isSafeInteger(fraction) && fraction > 0 && fraction < NANOS_PER_UNIT;
      await this.store.seed(target.key, seed.used, seed.expiresAtMs, valid ? fraction : 0);
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
      // A lease being taken ahead is leased in the store already: known here before the read.
      await this.states.get(target.key)?.renewing;
      const reply = await this.leaseSeeded(call, target);
      const unspent = this.unspent(target.key);
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

  /**
   * Settles idle or old leases in one round trip (an old one gives way to the lease taken ahead;
   * one taken ahead goes when its counter idles), and replaced leases no lease call settled
   * within `idleMs`; forgets counters not used for a while.
   */
  private async sweep(force = false): Promise<void> {
    const now = performance.now();
    const { idleMs, holdMs } = this.options;
    const calls: LeaseCall[] = [];
    /** What was settled, and how to put it back if the store is away. */
    const swept: Array<{ lease: string; restore: () => void }> = [];
    const settle = (key: string, held: Held, restore: () => void) => {
      calls.push(settleCall(key, held.id, held.spent));
      swept.push({ lease: held.id, restore });
    };
    for (const [key, state] of this.states) {
      if (state.acquiring !== undefined || state.renewing !== undefined) continue;
      const idle = force || now - state.touchedAt > idleMs;
      const held = state.held;
      if (held !== undefined && (idle || now - held.lastUsedAt > idleMs || now - held.acquiredAt > holdMs)) {
        state.held = undefined;
        // The store is away: the lease expires there and counts as fully spent, so its unspent
        // units stay this process's to use until the store is back (a stop gives them up).
        settle(key, held, () => {
          if (state.held === undefined) state.held = held;
          else this.retired.push({ key, held, at: now });
        });
      }
      const next = state.next;
      if (next !== undefined && idle) {
        state.next = undefined;
        settle(key, next, () => {
          state.next ??= next;
        });
      } else if (next !== undefined && state.held === undefined) {
        state.held = next;
        state.next = undefined;
      }
      if (state.held === undefined && state.next === undefined && now - state.touchedAt > 60_000)
        this.states.delete(key);
    }
    const waiting = this.retired;
    this.retired = [];
    for (const r of waiting) {
      if (force || now - r.at > idleMs) settle(r.key, r.held, () => this.retired.push(r));
      else this.retired.push(r);
    }
    if (this.pending.length > 0) void this.settlePending();
    if (
      this.states.size === 0 &&
      this.pending.length === 0 &&
      this.retired.length === 0 &&
      this.timer !== undefined
    ) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
    if (calls.length === 0) return;
    try {
      await this.store.settleMany(calls);
      for (const { lease } of swept) this.watcher?.closed(lease);
    } catch {
      if (!force) for (const { restore } of swept) restore();
    }
  }

  /** Returns every unspent lease, so a clean shutdown leaves the whole budget to the other processes. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await Promise.allSettled([...this.states.values()].flatMap((s) => [s.acquiring, s.renewing]));
    await this.sweep(true);
    await this.settlePending();
  }
}
