import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

let lastTime = -1;
let lastRandom: number[] = [];

/**
 * A ULID (48-bit millisecond time + 80 random bits, Crockford base32), monotonic within a
 * process: ids made in the same millisecond increment the random part, so they sort in creation
 * order. Cursor pagination and the outbox's event order rely on that.
 */
export function ulid(now = Date.now()): string {
  let random: number[];
  if (now === lastTime) {
    random = [...lastRandom];
    for (let i = random.length - 1; i >= 0; i--) {
      const digit = (random[i] ?? 0) + 1;
      random[i] = digit % 32;
      if (digit < 32) break;
    }
  } else {
    const bytes = randomBytes(16);
    // The top bit of the first digit stays clear, leaving room to increment without overflow.
    random = Array.from(bytes, (b, i) => (i === 0 ? b % 16 : b % 32));
  }
  lastTime = now;
  lastRandom = random;
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = (CROCKFORD[t % 32] ?? '0') + time;
    t = Math.floor(t / 32);
  }
  return time + random.map((d) => CROCKFORD[d] ?? '0').join('');
}

/** A prefixed id such as `prd_01j...`; the prefix says what kind of object it names. */
export function newId(prefix: string): string {
  return `${prefix}_${ulid()}`;
}
