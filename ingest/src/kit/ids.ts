import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * A ULID (48-bit millisecond time + 80 random bits, Crockford base32): ids sort by creation
 * time, which keeps cursor pagination and index locality cheap.
 */
export function ulid(now = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = (CROCKFORD[t % 32] ?? '0') + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(16);
  let random = '';
  for (let i = 0; i < 16; i++) random += CROCKFORD[(bytes[i] ?? 0) % 32];
  return time + random;
}

/** A prefixed id such as `prd_01j...`; the prefix says what kind of object it names. */
export function newId(prefix: string): string {
  return `${prefix}_${ulid()}`;
}
