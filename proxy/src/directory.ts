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
  /** Who waits for a key's next announced change. */
  private readonly watchers = new Map<string, Set<() => void>>();
  /** Store reads, for the metrics. */
  reads = 0;

  constructor(
    private readonly store: SnapshotStore,
    private readonly ttlMs: number,
    private readonly parse: (raw: string | undefined) => T | undefined,
    private readonly maxEntries = 100_000,
  ) {
    store.onChange((key) => {
      this.entries.delete(key);
      const waiting = this.watchers.get(key);
      if (waiting === undefined) return;
      this.watchers.delete(key);
      for (const wake of waiting) wake();
    });
  }

  /**
   * Settles at the key's next announced change; `cancel` stops waiting (a waiter must cancel
   * or be woken, so none is kept for a key that never changes).
   */
  whenChanged(key: string): { changed: Promise<void>; cancel(): void } {
    let wake: () => void = () => undefined;
    const changed = new Promise<void>((resolve) => {
      wake = resolve;
    });
    let waiting = this.watchers.get(key);
    if (waiting === undefined) {
      waiting = new Set();
      this.watchers.set(key, waiting);
    }
    waiting.add(wake);
    return {
      changed,
      cancel: () => {
        const set = this.watchers.get(key);
        set?.delete(wake);
        if (set?.size === 0) this.watchers.delete(key);
      },
    };
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

/**
 * Store keys are made once per thing they are made of and then reused: V8 keeps a string's hash
 * in the string, so looking up the same key object costs a compare, where a key joined anew for
 * every call was a new string to hash (the caches below are looked up four times a call).
 */
const MAX_KEYS = 10_000;

export class ServerDirectory extends SnapshotCache<McpServerSnapshot> {
  private readonly keys = new Map<string, string>();

  constructor(store: SnapshotStore, ttlMs: number) {
    super(store, ttlMs, parseMcpServerSnapshot, 10_000);
  }

  lookup(subdomain: string) {
    let key = this.keys.get(subdomain);
    if (key === undefined) {
      // Bounded: names that are not servers cost a lookup each, never unbounded memory.
      if (this.keys.size >= MAX_KEYS) this.keys.clear();
      key = mcpServerKey(subdomain);
      this.keys.set(subdomain, key);
    }
    return this.get(key);
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

  /** Keys by server snapshot (a changed server is a new snapshot), then by customer. */
  private readonly keys = new WeakMap<McpServerSnapshot, Map<string, string>>();

  /** The customer's purchase of the server's product; none for a server that sells none. */
  lookup(server: McpServerSnapshot, customerId: string) {
    const key = this.keyOf(server, customerId);
    return key === undefined ? undefined : this.get(key);
  }

  /** The next change the control plane announces to the customer's purchase of the product. */
  whenPurchaseChanges(server: McpServerSnapshot, customerId: string) {
    const key = this.keyOf(server, customerId);
    return key === undefined ? undefined : this.whenChanged(key);
  }

  private keyOf(server: McpServerSnapshot, customerId: string): string | undefined {
    if (server.productId === null) return undefined;
    const productId = server.productId;
    let byCustomer = this.keys.get(server);
    if (byCustomer === undefined) {
      byCustomer = new Map();
      this.keys.set(server, byCustomer);
    }
    let key = byCustomer.get(customerId);
    if (key === undefined) {
      if (byCustomer.size >= MAX_KEYS) byCustomer.clear();
      key = entitlementKey({
        providerId: server.providerId,
        environment: server.environment,
        customerId,
        productId,
      });
      byCustomer.set(customerId, key);
    }
    return key;
  }
}

/** Customers whose access tokens were revoked (deleted, or revoked on request), by token subject. */
export class RevocationDirectory extends SnapshotCache<RevocationSnapshot> {
  constructor(store: SnapshotStore, ttlMs: number) {
    super(store, ttlMs, parseRevocation);
  }

  /** Keys by the claims of a verified token (the verifier keeps those objects while it caches the token). */
  private readonly keys = new WeakMap<RevocationClaims, { customer: string; grant: string | undefined }>();

  private keysOf(claims: RevocationClaims) {
    let keys = this.keys.get(claims);
    if (keys === undefined) {
      keys = {
        customer: revocationKey(claims.prv, claims.env, claims.sub),
        grant: claims.sid === undefined ? undefined : revokedGrantKey(claims.sid),
      };
      this.keys.set(claims, keys);
    }
    return keys;
  }

  lookup(claims: RevocationClaims) {
    return this.get(this.keysOf(claims).customer);
  }

  /**
   * The token's grant, revoked (a hosted sign-in whose refresh token was reused, or revoked by its
   * client); undefined for a token of no grant.
   */
  lookupGrant(claims: RevocationClaims) {
    const key = this.keysOf(claims).grant;
    return key === undefined ? undefined : this.get(key);
  }
}

interface RevocationClaims {
  prv: string;
  env: Environment;
  sub: string;
  /** The sign-in grant a token was issued under, if any. */
  sid?: string | undefined;
}

/** Whether the MCP server on this subdomain lets pages from `pageOrigin` call it. */
export async function originAllowed(
  directory: ServerDirectory,
  subdomain: string,
  pageOrigin: string,
): Promise<boolean> {
  const server = await directory.lookup(subdomain);
  return server?.allowedOrigins?.includes(pageOrigin) === true;
}
