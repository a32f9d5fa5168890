import {
  type EntitlementSnapshot,
  entitlementKey,
  type McpServerSnapshot,
  mcpServerKey,
  parseMcpServerSnapshot,
  parseRevocation,
  type RevocationSnapshot,
  revocationKey,
  revokedGrantKey,
  type SnapshotStore,
} from '@mcp-meter/contracts/snapshots';
import type { Environment } from '@mcp-meter/contracts/usage-record';

/** The snapshot store cannot be read and nothing usable is cached: the caller should retry shortly. */
export class SnapshotUnavailableError extends Error {
  constructor(cause: unknown) {
    super('snapshot store unavailable', { cause });
  }
}

interface Entry<T> {
  value: T | undefined;
  expiresAt: number;
}

/**
 * Read-through cache of snapshots. Hits cost nothing; a miss or an expired entry reads the store
 * once, shared by every request waiting on the same key. Changes announced by the store drop
 * the entry at once; the TTL covers announcements missed while disconnected. When the store
 * cannot be read, the last known value keeps serving rather than failing the call.
 */
export class SnapshotCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private readonly inflight = new Map<string, Promise<T | undefined>>();
  /** Store reads, for the metrics. */
  reads = 0;

  constructor(
    private readonly store: SnapshotStore,
    private readonly ttlMs: number,
    private readonly parse: (raw: string | undefined) => T | undefined,
    private readonly maxEntries = 100_000,
  ) {
    store.onChange((key) => this.entries.delete(key));
  }

  get(key: string): T | undefined | Promise<T | undefined> {
    const entry = this.entries.get(key);
    if (entry !== undefined && entry.expiresAt > Date.now()) return entry.value;
    let pending = this.inflight.get(key);
    if (pending === undefined) {
      pending = this.refresh(key, entry).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  private async refresh(key: string, stale: Entry<T> | undefined): Promise<T | undefined> {
    try {
      this.reads++;
      const value = this.parse(await this.store.get(key));
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      this.entries.set(key, { value, expiresAt: Date.now() + this.ttlMs });
      return value;
    } catch (error) {
      if (stale !== undefined) return stale.value;
      throw new SnapshotUnavailableError(error);
    }
  }
}

export class ServerDirectory extends SnapshotCache<McpServerSnapshot> {
  constructor(store: SnapshotStore, ttlMs: number) {
    super(store, ttlMs, parseMcpServerSnapshot, 10_000);
  }

  lookup(subdomain: string) {
    return this.get(mcpServerKey(subdomain));
  }
}

function parseEntitlement(raw: string | undefined): EntitlementSnapshot | undefined {
  if (raw === undefined) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<EntitlementSnapshot>;
    return value.v === 1 && typeof value.planId === 'string' ? (value as EntitlementSnapshot) : undefined;
  } catch {
    return undefined;
  }
}

/** Each customer's purchase per product, as the control plane last published it. */
export class EntitlementDirectory extends SnapshotCache<EntitlementSnapshot> {
  constructor(store: SnapshotStore, ttlMs: number) {
    super(store, ttlMs, parseEntitlement);
  }

  lookup(server: McpServerSnapshot, customerId: string, productId: string) {
    return this.get(
      entitlementKey({
        providerId: server.providerId,
        environment: server.environment,
        customerId,
        productId,
      }),
    );
  }
}

/** Customers whose access tokens were revoked (deleted, or revoked on request), by token subject. */
export class RevocationDirectory extends SnapshotCache<RevocationSnapshot> {
  constructor(store: SnapshotStore, ttlMs: number) {
    super(store, ttlMs, parseRevocation);
  }

  lookup(claims: { prv: string; env: Environment; sub: string }) {
    return this.get(revocationKey(claims.prv, claims.env, claims.sub));
  }

  /** A revoked grant (a hosted sign-in whose refresh token was reused, or revoked by its client). */
  lookupGrant(grantId: string) {
    return this.get(revokedGrantKey(grantId));
  }
}
