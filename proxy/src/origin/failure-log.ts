import type { Logger } from '@mcp-meter/contracts/kit';

/** The shortest time between two warnings of one server's failures of one kind. */
const EVERY_MS = 1_000;
/** Servers and kinds remembered at most: past it the memory starts again (a warning may repeat). */
const REMEMBERED = 10_000;

/**
 * The warnings of failed origin requests, at most one a second for each server and kind of
 * failure. An origin that is down, or slower than its traffic (`origin_busy`), fails every call at
 * once; a log line for each would add a write to every refusal just when the proxy is busiest and
 * bury the log. The first failure after a quiet second is logged with how many failures of that
 * kind the line before it left out (`alsoFailed`); every failure is counted on the metrics page.
 */
export class OriginFailureLog {
  private readonly last = new Map<string, { at: number; left: number }>();

  constructor(
    private readonly logger: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {}

  failed(serverId: string, code: string, error: unknown): void {
    const key = `${serverId}\u0000${code}`;
    const now = this.now();
    const seen = this.last.get(key);
    if (seen !== undefined && now - seen.at < EVERY_MS) {
      seen.left++;
      return;
    }
    if (seen === undefined && this.last.size >= REMEMBERED) this.last.clear();
    this.last.set(key, { at: now, left: 0 });
    const left = seen?.left ?? 0;
    this.logger.warn(
      { err: error, server: serverId, code, ...(left > 0 ? { alsoFailed: left } : {}) },
      'origin request failed',
    );
  }
}
