import {
  type CounterStore,
  calendarPeriod,
  LEASE_TOMBSTONE_MS,
  LeasedLimiter,
  type LimitDecision,
  leaseStep,
  MemoryCounterStore,
  RedisCounterStore,
} from '@mcp-meter/contracts/limits';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';

const fast = { maxLease: 100, divisor: 4, holdMs: 300, idleMs: 50, leaseTtlMs: 2_000 };

function target(key: string, limit: number, seeded = 0) {
  let seeds = 0;
  return {
    key,
    limit,
    seeds: () => seeds,
    async seed() {
      seeds++;
      return { used: seeded, expiresAtMs: Date.now() + 60_000 };
    },
  };
}

async function admitMany(limiters: LeasedLimiter[], t: ReturnType<typeof target>, calls: number) {
  const decisions = await Promise.all(
    Array.from({ length: calls }, (_, i) => limiters[i % limiters.length]?.admit(t) as LimitDecision),
  );
  return decisions.filter((d) => d.allowed).length;
}

describe('lease step (pure)', () => {
  it('grants a share of what is left, at least one, and never beyond the limit', () => {
    const counter = { used: 0, leases: new Map(), expiresAt: Number.POSITIVE_INFINITY };
    const call = { key: 'k', limit: 10, want: 100, divisor: 4, leaseTtlMs: 1000, leaseId: 'a' };
    expect(leaseStep(counter, call, 0)).toEqual({ granted: 2, used: 0, leased: 2 });
    expect(leaseStep(counter, { ...call, leaseId: 'b' }, 0)).toEqual({ granted: 2, used: 0, leased: 4 });
    // Settling lease a with 1 spent returns its other unit.
    expect(leaseStep(counter, { ...call, leaseId: 'c', settle: { leaseId: 'a', spent: 1 } }, 0)).toEqual({
      granted: 1,
      used: 1,
      leased: 3,
    });
    let leased = 0;
    for (let i = 0; i < 20; i++) leased += leaseStep(counter, { ...call, leaseId: `x${i}` }, 0).granted;
    expect(leased).toBe(6);
    // Expired leases (holder gone) count as fully spent: the budget stays exhausted.
    expect(leaseStep(counter, { ...call, leaseId: 'late' }, 5000)).toEqual({
      granted: 0,
      used: 10,
      leased: 0,
    });
  });

  it('lets a late settle of an expired lease give back what it did not spend, once', () => {
    const counter = { used: 0, leases: new Map(), expiresAt: Number.POSITIVE_INFINITY };
    const call = { key: 'k', limit: 10, want: 4, divisor: 1, leaseTtlMs: 1000, leaseId: 'dead' };
    expect(leaseStep(counter, call, 0)).toMatchObject({ granted: 4, used: 0, leased: 4 });
    // Expired: counted whole.
    const peek = { ...call, want: 0, leaseId: '' };
    expect(leaseStep(counter, peek, 1000)).toEqual({ granted: 0, used: 4, leased: 0 });
    // Its successor read 1 recorded unit in the spool: the other 3 return, and only once.
    const late = { ...peek, settle: { leaseId: 'dead', spent: 1 } };
    expect(leaseStep(counter, late, 2000)).toEqual({ granted: 0, used: 1, leased: 0 });
    expect(leaseStep(counter, late, 2000)).toEqual({ granted: 0, used: 1, leased: 0 });
    // A marker left for an hour and never settled is dropped, its lease staying fully spent.
    expect(leaseStep(counter, { ...call, leaseId: 'gone' }, 3000)).toMatchObject({ used: 1, leased: 4 });
    expect(leaseStep(counter, peek, 4000)).toMatchObject({ used: 5 });
    expect(counter.leases.size).toBe(1);
    expect(leaseStep(counter, peek, 4000 + LEASE_TOMBSTONE_MS)).toMatchObject({ used: 5 });
    expect(counter.leases.size).toBe(0);
  });

  it('finds the calendar period of a default plan', () => {
    const now = new Date('2026-11-22T10:00:00Z'); // a Sunday
    expect(calendarPeriod('monthly', null, now).start.toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(calendarPeriod('weekly', null, now).start.toISOString()).toBe('2026-11-16T00:00:00.000Z');
    expect(calendarPeriod('quarterly', null, now).end?.toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(calendarPeriod(null, null, now)).toEqual({ start: new Date(0), end: null });
  });
});

describe.each([
  ['memory', () => new MemoryCounterStore()],
  ['redis', () => new RedisCounterStore(inject('infra').redisUrl)],
] as const)('leased limiter on the %s store', (name, open) => {
  const stores: CounterStore[] = [];
  const limiters: LeasedLimiter[] = [];
  const shared = name === 'memory' ? open() : undefined;
  const limiter = async (options = fast) => {
    const store = shared ?? open();
    stores.push(store);
    if (store instanceof RedisCounterStore) await store.ready();
    const l = new LeasedLimiter(store, options);
    limiters.push(l);
    return l;
  };
  afterAll(async () => {
    for (const l of limiters) await l.close();
    for (const s of stores) await s.close();
  });
  const unique = () => `mcpmeter:limit:test:${name}:${Math.random().toString(36).slice(2)}`;

  it('admits exactly the limit across two limiters under concurrency, seeding once', async () => {
    const a = await limiter();
    const b = await limiter();
    const t = target(unique(), 37, 0);
    expect(await admitMany([a, b], t, 200)).toBe(37);
    expect(t.seeds()).toBeGreaterThanOrEqual(1);
    // The budget stays spent: later calls are refused with the usage.
    expect(await a.admit(t)).toEqual({ allowed: false, used: 37, limit: 37 });
  });

  it('rounds reported fractions up once, as the exact sum would be, reported one by one or at once', async () => {
    const l = await limiter();
    const store = stores[stores.length - 1] as CounterStore;
    // Started from 2 calls and 0.25 reported: 3 used.
    const t = {
      ...target(unique(), 100),
      seed: async () => ({ used: 3, expiresAtMs: Date.now() + 60_000, fractionNanos: 250_000_000 }),
    };
    const used = async () => (await l.peek(t)).used;
    expect(await used()).toBe(3);
    // 0.75 completes the unit the counter already counted: still 3.
    await store.report(t.key, 0, 750_000_000);
    expect(await used()).toBe(3);
    // 0.1, 0.2 and 0.7 at once are exactly one unit, whichever lands first.
    await Promise.all([100_000_000, 200_000_000, 700_000_000].map((n) => store.report(t.key, 0, n)));
    expect(await used()).toBe(4);
    // 2.5, then forty halves at once: 2 + 25 (24.5 reported, rounded up).
    await store.report(t.key, 2, 500_000_000);
    expect(await used()).toBe(7);
    await Promise.all(Array.from({ length: 40 }, () => store.report(t.key, 0, 500_000_000)));
    expect(await used()).toBe(27);
    // Whole units given back leave the fraction as it was.
    await store.report(t.key, -5);
    await store.report(t.key, 0, 500_000_000);
    expect(await used()).toBe(22);
  });

  it('starts from the seeded usage and counts it against the limit', async () => {
    const t = target(unique(), 50, 45);
    expect(await admitMany([await limiter()], t, 20)).toBe(5);
  });

  it('makes far fewer store calls than admissions away from the limit', async () => {
    const l = await limiter();
    const store = stores[stores.length - 1] as CounterStore;
    const before = store.commands;
    const t = target(unique(), 1_000_000);
    let allowed = 0;
    for (let i = 0; i < 5_000; i++) if ((await l.admit(t)).allowed) allowed++;
    expect(allowed).toBe(5_000);
    expect((store.commands - before) / 5_000).toBeLessThan(0.05);
  });

  it('spends a cost per admission exactly across two limiters, and leaves a remainder short of one', async () => {
    const a = await limiter();
    const b = await limiter();
    // 100 credits at 7 a call: 14 calls (98 credits); the last 2 credits buy nothing.
    const t = { ...target(unique(), 100, 0), cost: 7 };
    expect(await admitMany([a, b], t, 60)).toBe(14);
    expect(await a.admit(t)).toMatchObject({ allowed: false, limit: 100 });
    // A credit limit raised by 5 (a top-up) makes room for one more call.
    expect(await admitMany([a, b], { ...t, limit: 105 }, 10)).toBe(1);
  });

  it('takes an admission back into its lease, or off the counter once settled', async () => {
    const a = await limiter();
    const t = target(unique(), 3, 0);
    expect(await admitMany([a], t, 3)).toBe(3);
    await a.giveBack(t);
    expect(await admitMany([a], t, 3)).toBe(1);
    const b = await limiter();
    await a.close();
    // The lease is settled now: the give-back comes off the counter's reported usage.
    await a.giveBack(t);
    expect(await admitMany([b], t, 3)).toBe(1);
  });

  it('reads usage without the units its own lease has unspent, a given-back one included', async () => {
    const a = await limiter();
    const b = await limiter();
    const t = target(unique(), 20);
    expect(await admitMany([a], t, 3)).toBe(3); // a holds a lease of 5: 3 spent, 2 left
    await a.giveBack(t); // 2 spent, 3 left, still leased as 5 in the store
    const own = await a.peek(t);
    expect(own.used + own.leased).toBe(2);
    // Another process cannot tell what a's lease spent: it counts the lease whole.
    const other = await b.peek(t);
    expect(other.used + other.leased).toBe(5);
    await a.close();
    const settled = await b.peek(t);
    expect(settled.used + settled.leased).toBe(2);
  });

  /** The counter as the store holds it: used, and leased by every process. */
  const counterOf = (store: CounterStore, key: string) =>
    store.lease({ key, limit: 1, want: 0, divisor: 1, leaseTtlMs: 0, leaseId: '' });
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('takes the next lease ahead: away from the limit, no admission waits for the store', async () => {
    // Leases that never grow old here (a lease older than holdMs pays nothing): a machine slow
    // enough to take 300 ms over ten admissions made one wait, which is not what this is about.
    const l = await limiter({ ...fast, holdMs: 600_000, leaseTtlMs: 1_200_000 });
    const store = stores[stores.length - 1] as CounterStore;
    const t = target(unique(), 1_000_000);
    expect((await l.admit(t)).allowed).toBe(true);
    // The store's lease calls, watched so that the loop can let every call it has made answer
    // before going on: what a proxy's event loop does between requests when the store is quick.
    // Waiting a fixed time instead made the test depend on how busy the machine is.
    const leases = vi.spyOn(store, 'lease');
    const storeAnswered = async () => {
      await Promise.allSettled(leases.mock.results.map((r) => r.value));
      await pause(0);
    };
    // 2,000 admissions, twenty leases' worth, the store answering every tenth: each lease is
    // taken while the one before still pays, so none waits.
    let waited = 0;
    for (let i = 0; i < 2_000; i++) {
      const decision = l.admit(t);
      if (decision instanceof Promise) waited++;
      expect((await decision).allowed).toBe(true);
      if (i % 10 === 9) await storeAnswered();
    }
    expect(leases.mock.calls.length).toBeGreaterThanOrEqual(19);
    leases.mockRestore();
    expect(waited).toBe(0);
    // What the metrics page counts: the first admission and those that waited.
    expect(l.waits).toBe(waited + 1);
    await l.close();
    // Every admission counted once, and nothing left leased.
    expect(await counterOf(store, t.key)).toMatchObject({ used: 2_001, leased: 0 });
  });

  it('admits exactly the limit with leases taken ahead, four limiters in waves', async () => {
    const ls = [await limiter(), await limiter(), await limiter(), await limiter()];
    const t = target(unique(), 3_000);
    let allowed = 0;
    for (let wave = 0; wave < 50; wave++) {
      allowed += await admitMany(ls, t, 100);
      await pause(2);
    }
    expect(allowed).toBe(3_000);
    for (const l of ls) await l.close();
    expect(await counterOf(stores[stores.length - 1] as CounterStore, t.key)).toMatchObject({
      used: 3_000,
      leased: 0,
    });
  });

  it('settles a lease taken ahead once its counter idles', async () => {
    const l = await limiter();
    const store = stores[stores.length - 1] as CounterStore;
    const t = target(unique(), 1_000_000);
    // 80 of the first lease's 100: under a quarter left, so the next is taken ahead.
    for (let i = 0; i < 80; i++) expect((await l.admit(t)).allowed).toBe(true);
    await pause(20);
    expect(await counterOf(store, t.key)).toMatchObject({ used: 0, leased: 200 });
    await pause(fast.idleMs * 3 + 100);
    expect(await counterOf(store, t.key)).toMatchObject({ used: 80, leased: 0 });
  });

  it('gives a closed limiter’s unspent lease back to the others', async () => {
    const a = await limiter();
    const b = await limiter();
    const t = target(unique(), 20);
    expect((await a.admit(t)).allowed).toBe(true); // a now holds a lease of 5, spent 1
    await a.close();
    expect(await admitMany([b], t, 40)).toBe(19);
  });
});

describe('leased limiter timers', () => {
  it('wakes the process only while it knows a counter, and stops once it has forgotten them all', async () => {
    vi.useFakeTimers({
      toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'performance', 'Date'],
    });
    try {
      const limiter = new LeasedLimiter(new MemoryCounterStore(), fast);
      expect(vi.getTimerCount()).toBe(0);
      expect(await limiter.admit(target('timers', 100))).toMatchObject({ allowed: true });
      expect(vi.getTimerCount()).toBe(1);
      // The idle lease is settled after idleMs, the counter forgotten a minute later.
      await vi.advanceTimersByTimeAsync(61_000);
      expect(vi.getTimerCount()).toBe(0);
      // Used again: the sweep comes back with it.
      expect(await limiter.admit(target('timers', 100))).toMatchObject({ allowed: true });
      expect(vi.getTimerCount()).toBe(1);
      await limiter.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('leased limiter when the holder of a lease vanishes', () => {
  it.each(['memory', 'redis'] as const)(
    'settles a dead holder’s leases at what its spool recorded, open or expired, once (%s)',
    async (name) => {
      const store =
        name === 'memory' ? new MemoryCounterStore() : new RedisCounterStore(inject('infra').redisUrl);
      if (store instanceof RedisCounterStore) await store.ready();
      const key = `mcpmeter:limit:test:dead:${name}:${Date.now()}`;
      await store.seed(key, 0, Date.now() + 60_000);
      const lease = (leaseId: string, leaseTtlMs: number) =>
        store.lease({ key, limit: 100, want: 20, divisor: 1, leaseTtlMs, leaseId });
      expect(await lease('open', 60_000)).toMatchObject({ granted: 20 });
      expect(await lease('expiring', 100)).toMatchObject({ granted: 20 });
      await new Promise((resolve) => setTimeout(resolve, 250));
      const read = () => store.lease({ key, limit: 100, want: 0, divisor: 1, leaseTtlMs: 0, leaseId: '' });
      // The expired lease counts whole, the open one is still leased.
      expect(await read()).toEqual({ missing: false, granted: 0, used: 20, leased: 20 });

      const successor = new LeasedLimiter(store, fast);
      const recorded = [
        { key, lease: 'open', units: 3 },
        { key, lease: 'expiring', units: 5 },
        { key, lease: 'never-known', units: 50 },
      ];
      successor.settleLater(recorded);
      await successor.settlePending();
      expect(successor.unsettled).toBe(0);
      expect(await read()).toEqual({ missing: false, granted: 0, used: 8, leased: 0 });
      // A second start reading the same spool changes nothing.
      successor.settleLater(recorded);
      await successor.settlePending();
      expect(await read()).toEqual({ missing: false, granted: 0, used: 8, leased: 0 });
      await successor.close();
      await store.close();
    },
  );

  it('tells its watcher each lease it opens and each the store has settled', async () => {
    const events: string[] = [];
    const limiter = new LeasedLimiter(new MemoryCounterStore(), fast, {
      opened: (_key, lease) => events.push(`opened ${lease}`),
      closed: (lease) => events.push(`closed ${lease}`),
    });
    const t = target('watched', 100);
    const first = await limiter.admit(t);
    if (!first.allowed || first.charge === undefined) throw new Error('expected an admission from a lease');
    expect(first.charge).toMatchObject({ key: 'watched', units: 1 });
    // Admissions from the same lease name it, with no new object per call.
    expect(await limiter.admit(t)).toBe(first);
    await limiter.close();
    expect(events).toEqual([`opened ${first.charge.lease}`, `closed ${first.charge.lease}`]);
  });

  it('counts the lost lease as spent once it expires, and never over-admits', async () => {
    const url = inject('infra').redisUrl;
    const crashed = new RedisCounterStore(url);
    const survivor = new RedisCounterStore(url);
    await Promise.all([crashed.ready(), survivor.ready()]);
    const a = new LeasedLimiter(crashed, { ...fast, leaseTtlMs: 500 });
    const b = new LeasedLimiter(survivor, { ...fast, holdMs: 100 });
    const t = target(`mcpmeter:limit:test:crash:${Date.now()}`, 40);
    expect((await a.admit(t)).allowed).toBe(true); // leases 10, spends 1
    await crashed.close(); // gone without settling: its 9 unspent units are stranded
    (a as unknown as { timer: NodeJS.Timeout }).timer.unref();
    const allowed = await admitMany([b], t, 60);
    expect(allowed).toBeLessThanOrEqual(30);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await b.admit(t)).allowed).toBe(false);
    const raw = await new Redis(url).hget(t.key, 'used');
    expect(Number(raw)).toBe(40);
    await b.close();
    await survivor.close();
  });
});
