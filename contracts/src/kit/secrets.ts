import { timingSafeEqual } from 'node:crypto';

/**
 * Whether a presented secret equals the expected one, in time that does not depend on where they
 * differ (only on their lengths, which are not secret here: tokens, digests, keys of fixed form).
 */
export function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
