import type { LeaseCall } from './counter';

/**
 * The leased limiter's vocabulary: what it is asked (a target), what it answers (a decision and
 * the lease charged), its settings, and the state it keeps per counter (limiter.ts).
 */

/** Where a limit counter starts (`CounterStore.seed`). */
export interface CounterSeed {
  used: number;
  expiresAtMs: number;
  fractionNanos?: number | undefined;
}

/** One limit to enforce: the counter's key, the cap, and how to build the counter when it is missing. */
export interface LimitTarget {
  key: string;
  limit: number;
  /**
   * Units one admission spends: 1 for a call against a plan's limit, the plan's creditsPerUnit
   * against a customer's credit balance. Leases are never smaller than one admission.
   */
  cost?: number;
  /**
   * Usage already admitted in the period (from ClickHouse) and when the counter may be dropped;
   * `fractionNanos`, the reported usage's billionths past its whole units (reported-units.ts).
   */
  seed(): Promise<CounterSeed>;
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
  /**
   * Lease the next chunk before the held one runs out (a quarter left, or three quarters of
   * `holdMs` gone), while the counter has room for it, so the call that empties a lease does
   * not wait for the store. Off, or near the limit, that call leases. Default on.
   */
  renewAhead?: boolean;
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

export interface Held {
  id: string;
  /** The decision every admission from this lease returns (one object per lease, not per call). */
  decision: { allowed: true; charge: LeaseCharge };
  left: number;
  spent: number;
  acquiredAt: number;
  lastUsedAt: number;
}

export interface KeyState {
  held: Held | undefined;
  /** The lease taken ahead (renewAhead): it takes over once `held` cannot pay. */
  next: Held | undefined;
  /** The lease call taking `next`, while it is on its way. */
  renewing: Promise<void> | undefined;
  /** The counter as the store last answered a lease call of this process: used, and leased by all. */
  seen: { used: number; leased: number } | undefined;
  acquiring: Promise<{ granted: number; leasedElsewhere: number; used: number }> | undefined;
  touchedAt: number;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A store call that only settles lease `leaseId` of counter `key` at `spent`, leasing nothing. */
export const settleCall = (key: string, leaseId: string, spent: number): LeaseCall => ({
  key,
  limit: 0,
  want: 0,
  divisor: 1,
  leaseTtlMs: 0,
  leaseId: '',
  settle: { leaseId, spent },
});

/** A lease of `granted` units of `target`'s counter, taken `now`. */
export function newHeld(id: string, target: LimitTarget, granted: number, now: number): Held {
  const charge = { key: target.key, lease: id, units: target.cost ?? 1 };
  return {
    id,
    decision: { allowed: true, charge },
    left: granted,
    spent: 0,
    acquiredAt: now,
    lastUsedAt: now,
  };
}
