import argon2 from 'argon2';

/**
 * argon2id with OWASP's recommended minimum (19 MiB, 2 passes, 1 lane): a guess costs an attacker
 * the same memory, and a sign-in stays well under a tenth of a second here.
 */
const OPTIONS = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, OPTIONS);
}

/** A hash of nothing anyone knows, verified when there is no account, so both take as long. */
let decoy: Promise<string> | undefined;

/** Whether `password` is the one behind `hash`; without a hash, spends the same time and says no. */
export async function verifyPassword(hash: string | undefined, password: string): Promise<boolean> {
  if (hash === undefined) {
    decoy ??= hashPassword(`decoy-${Math.random()}`);
    await argon2.verify(await decoy, password).catch(() => false);
    return false;
  }
  try {
    return await argon2.verify(hash, password);
  } catch {
    return false;
  }
}
