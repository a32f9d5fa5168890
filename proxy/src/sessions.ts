/**
 * A bounded set of MCP session ids: past `capacity`, the oldest added are forgotten first.
 * Forgetting is safe where it is used: a forgotten session gets the answer every client reads.
 */
export class RecentSessions {
  private readonly ids = new Set<string>();

  constructor(private readonly capacity: number) {}

  add(id: string): void {
    this.ids.delete(id);
    this.ids.add(id);
    if (this.ids.size > this.capacity) {
      const oldest = this.ids.values().next().value;
      if (oldest !== undefined) this.ids.delete(oldest);
    }
  }

  has(id: string): boolean {
    return id !== '' && this.ids.has(id);
  }

  delete(id: string): void {
    this.ids.delete(id);
  }

  get size(): number {
    return this.ids.size;
  }
}

/** The Mcp-Session-Id a request carries ('' without one). */
export const sessionOf = (headers: Record<string, string>): string => headers['mcp-session-id'] ?? '';
