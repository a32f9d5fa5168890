import {
  type McpServerSnapshot,
  mcpServerKey,
  parseMcpServerSnapshot,
  type SnapshotStore,
} from '@mcp-meter/control-plane/snapshots';

interface Entry {
  snapshot: McpServerSnapshot | undefined;
  expiresAt: number;
}

/**
 * Read-through cache of server snapshots. Hits cost nothing; a miss or an expired entry reads
 * the store once, shared by every request waiting on the same subdomain. When the store cannot
 * be read, the last known snapshot keeps serving rather than failing the call.
 */
export class ServerDirectory {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<McpServerSnapshot | undefined>>();

  constructor(
    private readonly store: SnapshotStore,
    private readonly ttlMs: number,
  ) {}

  lookup(subdomain: string): McpServerSnapshot | undefined | Promise<McpServerSnapshot | undefined> {
    const entry = this.entries.get(subdomain);
    if (entry !== undefined && entry.expiresAt > Date.now()) return entry.snapshot;
    let pending = this.inflight.get(subdomain);
    if (pending === undefined) {
      pending = this.refresh(subdomain, entry).finally(() => this.inflight.delete(subdomain));
      this.inflight.set(subdomain, pending);
    }
    return pending;
  }

  private async refresh(subdomain: string, stale: Entry | undefined): Promise<McpServerSnapshot | undefined> {
    try {
      const snapshot = parseMcpServerSnapshot(await this.store.get(mcpServerKey(subdomain)));
      this.entries.set(subdomain, { snapshot, expiresAt: Date.now() + this.ttlMs });
      return snapshot;
    } catch (error) {
      if (stale !== undefined) return stale.snapshot;
      throw error;
    }
  }
}
