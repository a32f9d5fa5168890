import type { Pool } from '../../db/pool';
import { DomainError } from '../../errors';
import { reserveAttempts } from '../sign-in/repository';

/** Attempts are counted within this window. */
export const ATTEMPT_WINDOW_MS = 15 * 60_000;

/**
 * Reserves an attempt under each key before the attempt is judged (one guarded statement), or
 * refuses with 429 `too_many_attempts` and the seconds to wait when any key has used its window's
 * attempts; a refused attempt counts nowhere. The console's sign-in, sign-up and invitations
 * share it, on the same table as the customers' sign-in, under keys of their own (`console-…`).
 */
export async function reserveOrRefuse(
  pool: Pool,
  now: Date,
  keys: readonly { key: string; limit: number }[],
): Promise<void> {
  const refused = await reserveAttempts(pool, keys, now, ATTEMPT_WINDOW_MS);
  if (refused.length === 0) return;
  const until = Math.max(...refused.map((r) => r.windowEnds.getTime()));
  throw new DomainError('too_many_attempts', 'Too many attempts; wait a few minutes and try again', {
    retryAfter: Math.max(1, Math.ceil((until - now.getTime()) / 1000)),
  });
}
