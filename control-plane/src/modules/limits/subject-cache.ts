import type { Logger } from '@mcp-meter/contracts/kit';
import type { Tenant } from '../products/repository';
import type { LimitSubject, SubjectChanges } from './repository';

/** Past this many subjects (or tenants changed) the cache starts over: a bound on memory, not a working set. */
const MAX_SUBJECTS = 50_000;
/** How long after losing its listening connection the cache tries to listen again. */
const RELISTEN_MS = 1_000;

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Limit subjects (whose limit, on which plan, in which period) kept per control plane, so a limit
 * check does not read PostgreSQL each time (issue 28: that read was most of a check's cost), and
 * as exact as reading it: a check never gets a subject older than a write committed before the
 * check arrived, whichever control plane wrote it.
 *
 * How: the database announces every change to what a subject is read from, per tenant (migration
 * 032's triggers, at the writing transaction's commit); a connection of this cache listens and
 * drops the tenant's subjects as it hears them. Before answering from memory, a check waits for a
 * barrier on that connection (see `SubjectChanges.barrier`): a change committed before the check
 * arrived has then been heard. A subject not in memory is read without waiting for one. Checks
 * arriving while a barrier is out share the next one, so under load one round trip serves many
 * checks. A subject read while a change to its tenant was heard is used once and not kept.
 * Without a listening connection (PostgreSQL away, or not yet connected) every check reads
 * PostgreSQL, as before, while the cache tries to listen again every second.
 */
export class SubjectCache {
  private readonly byTenant = new Map<string, Map<string, LimitSubject>>();
  /** Changes heard per tenant; a read across one is not kept. */
  private readonly changes = new Map<string, number>();
  /** Bumped whenever everything is dropped (a change of every tenant, a lost connection). */
  private epoch = 0;
  private size = 0;
  private changesFeed: SubjectChanges | undefined;
  private listening: Promise<void> | undefined;
  private listenAfter = 0;
  private closed = false;
  /** Checks waiting for the next barrier, and whether one is out. */
  private waiting: Waiter[] = [];
  private barrierOut = false;
  /** Subjects read from PostgreSQL (a miss, or no listening connection). */
  reads = 0;

  constructor(
    private readonly listen: (
      heard: (tenant: string) => void,
      lost: (error: Error) => void,
    ) => Promise<SubjectChanges>,
    private readonly logger: Logger,
  ) {}

  /** The subject of `customerRef` and `productRef` for the tenant: from memory, or `read` and kept. */
  async get(
    tenant: Tenant,
    customerRef: string,
    productRef: string,
    read: () => Promise<LimitSubject>,
  ): Promise<LimitSubject> {
    if (this.changesFeed === undefined) {
      this.startListening();
      return this.readThrough(read);
    }
    const tenantKey = `${tenant.providerId}:${tenant.environment}`;
    // NUL cannot occur in either reference (the API refuses it), so the pair is unambiguous.
    const key = `${customerRef}\u0000${productRef}`;
    // Only a subject in memory waits for the barrier (then is looked for again: what was heard
    // meanwhile may have dropped it). One that is not is read now: a read is as fresh as a
    // barrier makes memory, and the guard below keeps it only if nothing was heard meanwhile.
    if (this.byTenant.get(tenantKey)?.has(key)) {
      try {
        await this.barrier();
      } catch {
        return this.readThrough(read);
      }
      const known = this.byTenant.get(tenantKey)?.get(key);
      if (known !== undefined) return known;
    }
    const epoch = this.epoch;
    const changes = this.changes.get(tenantKey) ?? 0;
    const subject = await this.readThrough(read);
    if (
      this.changesFeed !== undefined &&
      this.epoch === epoch &&
      (this.changes.get(tenantKey) ?? 0) === changes
    ) {
      if (this.size >= MAX_SUBJECTS) this.dropAll();
      let subjects = this.byTenant.get(tenantKey);
      if (subjects === undefined) {
        subjects = new Map();
        this.byTenant.set(tenantKey, subjects);
      }
      if (!subjects.has(key)) this.size++;
      subjects.set(key, subject);
    }
    return subject;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listening;
    const feed = this.changesFeed;
    this.changesFeed = undefined;
    this.dropAll();
    await feed?.close();
  }

  private readThrough(read: () => Promise<LimitSubject>): Promise<LimitSubject> {
    this.reads++;
    return read();
  }

  /** Resolves after a barrier that went out after this call. */
  private barrier(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      if (!this.barrierOut) void this.sendBarriers();
    });
  }

  private async sendBarriers(): Promise<void> {
    this.barrierOut = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting;
      this.waiting = [];
      const feed = this.changesFeed;
      try {
        if (feed === undefined) throw new Error('not listening');
        await feed.barrier();
        for (const waiter of batch) waiter.resolve();
      } catch (error) {
        for (const waiter of batch) waiter.reject(error);
      }
    }
    this.barrierOut = false;
  }

  private heard(tenant: string): void {
    if (tenant === '*') {
      this.dropAll();
      return;
    }
    // Starting over also bounds the tenants counted here (every read across it is then not kept).
    if (this.changes.size >= MAX_SUBJECTS) this.dropAll();
    this.changes.set(tenant, (this.changes.get(tenant) ?? 0) + 1);
    const subjects = this.byTenant.get(tenant);
    if (subjects === undefined) return;
    this.size -= subjects.size;
    this.byTenant.delete(tenant);
  }

  private dropAll(): void {
    this.epoch++;
    this.byTenant.clear();
    this.changes.clear();
    this.size = 0;
  }

  private startListening(): void {
    if (this.closed || this.listening !== undefined || Date.now() < this.listenAfter) return;
    this.listening = this.listen(
      (tenant) => this.heard(tenant),
      (error) => {
        // Changes may now go unheard: nothing kept is trusted, and checks read PostgreSQL.
        this.changesFeed = undefined;
        this.dropAll();
        this.listenAfter = Date.now() + RELISTEN_MS;
        if (!this.closed)
          this.logger.warn(
            { err: error },
            'limit subject changes unheard: checks read PostgreSQL until listening again',
          );
      },
    )
      .then((feed) => {
        if (this.closed) return feed.close();
        this.dropAll();
        this.changesFeed = feed;
      })
      .catch((error: unknown) => {
        this.listenAfter = Date.now() + RELISTEN_MS;
        this.logger.warn({ err: error }, 'limit subject changes cannot be heard: checks read PostgreSQL');
      })
      .finally(() => {
        this.listening = undefined;
      });
  }
}
