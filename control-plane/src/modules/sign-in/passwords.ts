import { hash, verify } from '@node-rs/argon2';

/** Argon2id in the binding's Algorithm enum (a const enum, which isolated modules cannot read). */
const ARGON2ID = 2;

/**
 * argon2id with OWASP's recommended minimum (19 MiB, 2 passes, 1 lane): a guess costs an attacker
 * the same memory, and a sign-in stays well under a tenth of a second here. The binding is
 * prebuilt per platform in npm packages (no compiler, no download at install).
 */
const OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

/** A hash of nothing anyone knows, verified when there is no account, so both take as long. */
let decoy: Promise<string> | undefined;

/** Whether `password` is the one behind `hash`; without a hash, spends the same time and says no. */
export async function verifyPassword(stored: string | undefined, password: string): Promise<boolean> {
  if (stored === undefined) {
    decoy ??= hashPassword(`decoy-${Math.random()}`);
    await verify(await decoy, password).catch(() => false);
    return false;
  }
  try {
    return await verify(stored, password);
  } catch {
    return false;
  }
}
