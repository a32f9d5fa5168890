import { Redis } from 'ioredis';
import { connectedWithin, redisRetryDelay } from '../kit/net';
import { NANOS_PER_UNIT } from '../usage/reported-units';

/**
 * One usage-limit counter per customer, product, plan and period. It holds `used` (calls
 * admitted and reported) and the open leases: chunks of the remaining budget handed to one
 * process each, spent there without asking again. A lease is settled with what was spent
 * and the rest returns to the budget; a lease whose holder vanished expires and counts as
 * fully spent, so a crash can only ever under-admit, never over-admit. An expired lease leaves
 * a marker for LEASE_TOMBSTONE_MS: a late settle (the holder's successor read what it recorded
 * from its spool, or the holder itself once the store is back) still returns the unspent rest.
 */
export interface LeaseCall {
  key: string;
  limit: number;
  /** Most units wanted for the new lease; 0 settles (and reports) without leasing. */
  want: number;
  /** The grant is the budget left divided by this, at least 1: chunks shrink near the limit. */
  divisor: number;
  /** Smallest grant (one admission's cost, default 1): less budget than this grants nothing. */
  minGrant?: number | undefined;
  /** Expiry of the new lease in the store, after which it counts as fully spent. */
  leaseTtlMs: number;
  leaseId: string;
  settle?: { leaseId: string; spent: number } | undefined;
}

/** `granted` units leased; `used` reported so far; `leased` still open in all processes. */
export type LeaseReply =
  | { missing: true }
  | { missing: false; granted: number; used: number; leased: number };

export interface CounterStore {
  lease(call: LeaseCall): Promise<LeaseReply>;
  /** Settles several leases in one round trip. */
  settleMany(calls: LeaseCall[]): Promise<void>;
  /**
   * Creates the counter with `used` unless it exists; it disappears at `expiresAtMs`.
   * `fractionNanos`: the billionths of a unit reported usage holds past its whole units, which
   * `used` counts as a whole one (reported-units.ts).
   */
  seed(key: string, used: number, expiresAtMs: number, fractionNanos?: number): Promise<void>;
  /**
   * Adds usage reported outside the leases (the usage API) to a counter that exists: `units`
   * whole (negative gives back), and `nanos` billionths of one more, which join the counter's
   * fraction so that the reported sum is rounded up once, not each report. A counter that does
   * not exist will count it when it is seeded from ClickHouse.
   */
  report(key: string, units: number, nanos?: number): Promise<void>;
  /**
   * Keeps `value` under `key` for `ttlMs`, shared by every process of the store: what one proxy
   * leaves for the next request of a multi-round call, which may reach another proxy.
   */
  putHold(key: string, value: string, ttlMs: number): Promise<void>;
  /** Takes the value under `key` once: a second taker, or one after the expiry, gets undefined. */
  takeHold(key: string): Promise<string | undefined>;
  /** Store commands sent, for the metrics. */
  readonly commands: number;
  close(): Promise<void>;
}

export const LIMIT_PREFIX = 'mcpmeter:limit:';

/** How long an expired lease can still be settled at what it spent (then it stays fully spent). */
export const LEASE_TOMBSTONE_MS = 3_600_000;

/** Same logic as `leaseStep` below, in one atomic step on the Redis server. */
const LEASE_SCRIPT = `
local k = KEYS[1]
if redis.call('EXISTS', k) == 0 then return {-1, 0, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local divisor = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local newId = ARGV[5]
local settleId = ARGV[6]
local spent = math.max(0, tonumber(ARGV[7]))
local minGrant = tonumber(ARGV[8])
local used = tonumber(redis.call('HGET', k, 'used') or '0')
local leased = 0
local fields = redis.call('HGETALL', k)
for i = 1, #fields, 2 do
  local f = fields[i]
  local kind = string.sub(f, 1, 2)
  if kind == 'L:' or kind == 'X:' then
    local v = fields[i + 1]
    local sep = string.find(v, ':', 1, true)
    local amount = tonumber(string.sub(v, 1, sep - 1))
    local expires = tonumber(string.sub(v, sep + 1))
    local id = string.sub(f, 3)
    if settleId ~= '' and id == settleId then
      -- An open lease adds what it spent; an expired one (counted whole) gives back the rest.
      if kind == 'L:' then
        used = used + math.min(spent, amount)
      else
        used = used - (amount - math.min(spent, amount))
      end
      redis.call('HDEL', k, f)
    elseif kind == 'X:' then
      if expires <= now then redis.call('HDEL', k, f) end
    elseif expires <= now then
      used = used + amount
      redis.call('HDEL', k, f)
      redis.call('HSET', k, 'X:' .. id, amount .. ':' .. (now + ${LEASE_TOMBSTONE_MS}))
    else
      leased = leased + amount
    end
  end
end
redis.call('HSET', k, 'used', used)
local granted = 0
local avail = limit - used - leased
if want > 0 and avail >= minGrant then
  granted = math.max(minGrant, math.min(want, math.floor(avail / divisor)))
  redis.call('HSET', k, 'L:' .. newId, granted .. ':' .. (now + ttl))
  leased = leased + granted
end
return {granted, used, leased}
`;

/**
 * Whole units go on `used` as given (a string: Lua would print a large number in exponent
 * form, which HINCRBY refuses); billionths join the `frac` field, and `used` moves by what
 * rounding the sum up once moves: `fractionStep` below, its twin.
 */
const REPORT_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'used', ARGV[1])
local nanos = tonumber(ARGV[2])
if nanos > 0 then
  local before = tonumber(redis.call('HGET', KEYS[1], 'frac') or '0')
  local after = before + nanos
  local step = 0
  if after >= ${NANOS_PER_UNIT} then
    after = after - ${NANOS_PER_UNIT}
    step = 1
  end
  if after > 0 then step = step + 1 end
  if before > 0 then step = step - 1 end
  redis.call('HSET', KEYS[1], 'frac', after)
  if step ~= 0 then redis.call('HINCRBY', KEYS[1], 'used', step) end
end
return 1
`;

const SEED_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'used', ARGV[1])
if tonumber(ARGV[3]) > 0 then redis.call('HSET', KEYS[1], 'frac', ARGV[3]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
`;

/**
 * A report's billionths joining a counter's fraction (0 ≤ each < one unit): the fraction after,
 * and how far `used` moves. `used` counts a fraction above 0 as one whole unit, so the step
 * is the carry past a whole unit plus whether a fraction is left, less whether one was there.
 */
export function fractionStep(before: number, nanos: number): { after: number; step: number } {
  let after = before + nanos;
  let step = 0;
  if (after >= NANOS_PER_UNIT) {
    after -= NANOS_PER_UNIT;
    step = 1;
  }
  return { after, step: step + (after > 0 ? 1 : 0) - (before > 0 ? 1 : 0) };
}

interface LeaseRedis extends Redis {
  meterLease(
    key: string,
    limit: number,
    want: number,
    divisor: number,
    ttl: number,
    leaseId: string,
    settleId: string,
    spent: number,
    minGrant: number,
  ): Promise<[number, number, number]>;
  meterSeed(key: string, used: number, expiresAt: number, fractionNanos: number): Promise<number>;
  meterReport(key: string, units: number, nanos: number): Promise<number>;
}

const leaseArgs = (c: LeaseCall) =>
  [
    c.key,
    c.limit,
    c.want,
    c.divisor,
    c.leaseTtlMs,
    c.leaseId,
    c.settle?.leaseId ?? '',
    c.settle?.spent ?? 0,
    Math.max(1, c.minGrant ?? 1),
  ] as const;

export class RedisCounterStore implements CounterStore {
  commands = 0;
  private readonly redis: LeaseRedis;

  constructor(url: string) {
    // Fail fast while Redis is away: the caller's outage policy decides, nothing queues up.
    const redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: redisRetryDelay,
    });
    redis.on('error', () => undefined);
    redis.defineCommand('meterLease', { numberOfKeys: 1, lua: LEASE_SCRIPT });
    redis.defineCommand('meterSeed', { numberOfKeys: 1, lua: SEED_SCRIPT });
    redis.defineCommand('meterReport', { numberOfKeys: 1, lua: REPORT_SCRIPT });
    this.redis = redis as LeaseRedis;
  }

  /** Resolves once connected, or after `timeoutMs` (calls then fail until Redis is back). */
  ready(timeoutMs = 5_000): Promise<boolean> {
    return connectedWithin(this.redis, timeoutMs);
  }

  async lease(call: LeaseCall): Promise<LeaseReply> {
    this.commands++;
    const [granted, used, leased] = await this.redis.meterLease(...leaseArgs(call));
    return granted < 0 ? { missing: true } : { missing: false, granted, used, leased };
  }

  async settleMany(calls: LeaseCall[]): Promise<void> {
    if (calls.length === 0) return;
    this.commands += calls.length;
    const pipeline = this.redis.pipeline() as unknown as {
      meterLease(...args: ReturnType<typeof leaseArgs>): void;
      exec(): Promise<Array<[Error | null, unknown]> | null>;
    };
    for (const call of calls) pipeline.meterLease(...leaseArgs({ ...call, want: 0 }));
    // A pipeline reports each command's error in its results rather than rejecting.
    const failed = (await pipeline.exec())?.find(([error]) => error !== null);
    if (failed?.[0] != null) throw failed[0];
  }

  async seed(key: string, used: number, expiresAtMs: number, fractionNanos = 0): Promise<void> {
    this.commands++;
    await this.redis.meterSeed(key, used, expiresAtMs, fractionNanos);
  }

  async report(key: string, units: number, nanos = 0): Promise<void> {
    this.commands++;
    await this.redis.meterReport(key, units, nanos);
  }

  async putHold(key: string, value: string, ttlMs: number): Promise<void> {
    this.commands++;
    await this.redis.set(key, value, 'PX', Math.max(1, Math.round(ttlMs)));
  }

  async takeHold(key: string): Promise<string | undefined> {
    this.commands++;
    return (await this.redis.getdel(key)) ?? undefined;
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

interface MemoryCounter {
  used: number;
  /** Billionths of a unit reported past the whole units (`used` counts them as one); none when absent. */
  frac?: number;
  /** Open leases, and expired ones (`expired`, counted whole) that a late settle may still correct. */
  leases: Map<string, { amount: number; expiresAt: number; expired?: boolean }>;
  expiresAt: number;
}

/** The lease step on a plain object: the Lua script's twin, for one process without Redis. */
export function leaseStep(counter: MemoryCounter, call: LeaseCall, now: number) {
  for (const [id, lease] of counter.leases) {
    if (call.settle !== undefined && id === call.settle.leaseId) {
      const spent = Math.min(Math.max(0, call.settle.spent), lease.amount);
      counter.used += lease.expired === true ? spent - lease.amount : spent;
      counter.leases.delete(id);
    } else if (lease.expired === true) {
      if (lease.expiresAt <= now) counter.leases.delete(id);
    } else if (lease.expiresAt <= now) {
      counter.used += lease.amount;
      counter.leases.set(id, { amount: lease.amount, expiresAt: now + LEASE_TOMBSTONE_MS, expired: true });
    }
  }
  let leased = 0;
  for (const lease of counter.leases.values()) if (lease.expired !== true) leased += lease.amount;
  let granted = 0;
  const avail = call.limit - counter.used - leased;
  const minGrant = Math.max(1, call.minGrant ?? 1);
  if (call.want > 0 && avail >= minGrant) {
    granted = Math.max(minGrant, Math.min(call.want, Math.floor(avail / call.divisor)));
    counter.leases.set(call.leaseId, { amount: granted, expiresAt: now + call.leaseTtlMs });
    leased += granted;
  }
  return { granted, used: counter.used, leased };
}

/** All-in-one stand-in for Redis: exact within the one process that holds it. */
export class MemoryCounterStore implements CounterStore {
  commands = 0;
  private readonly counters = new Map<string, MemoryCounter>();

  constructor(private readonly now: () => number = Date.now) {}

  private counter(key: string): MemoryCounter | undefined {
    const counter = this.counters.get(key);
    if (counter !== undefined && counter.expiresAt <= this.now()) {
      this.counters.delete(key);
      return undefined;
    }
    return counter;
  }

  async lease(call: LeaseCall): Promise<LeaseReply> {
    this.commands++;
    const counter = this.counter(call.key);
    if (counter === undefined) return { missing: true };
    return { missing: false, ...leaseStep(counter, call, this.now()) };
  }

  async settleMany(calls: LeaseCall[]): Promise<void> {
    for (const call of calls) {
      this.commands++;
      const counter = this.counter(call.key);
      if (counter !== undefined) leaseStep(counter, { ...call, want: 0 }, this.now());
    }
  }

  async seed(key: string, used: number, expiresAtMs: number, fractionNanos = 0): Promise<void> {
    this.commands++;
    if (this.counter(key) === undefined)
      this.counters.set(key, { used, frac: fractionNanos, leases: new Map(), expiresAt: expiresAtMs });
  }

  async report(key: string, units: number, nanos = 0): Promise<void> {
    this.commands++;
    const counter = this.counter(key);
    if (counter === undefined) return;
    counter.used += units;
    if (nanos > 0) {
      const { after, step } = fractionStep(counter.frac ?? 0, nanos);
      counter.frac = after;
      counter.used += step;
    }
  }

  private readonly holds = new Map<string, { value: string; expiresAt: number }>();

  async putHold(key: string, value: string, ttlMs: number): Promise<void> {
    this.commands++;
    this.holds.set(key, { value, expiresAt: this.now() + ttlMs });
    // Expired holds are dropped as new ones arrive, so the map stays as small as what is open.
    if (this.holds.size > 1000)
      for (const [k, hold] of this.holds) if (hold.expiresAt <= this.now()) this.holds.delete(k);
  }

  async takeHold(key: string): Promise<string | undefined> {
    this.commands++;
    const hold = this.holds.get(key);
    this.holds.delete(key);
    return hold === undefined || hold.expiresAt <= this.now() ? undefined : hold.value;
  }

  async close(): Promise<void> {}
}

export async function openCounterStore(redisUrl: string | undefined): Promise<CounterStore> {
  if (redisUrl === undefined) return new MemoryCounterStore();
  const store = new RedisCounterStore(redisUrl);
  await store.ready();
  return store;
}
