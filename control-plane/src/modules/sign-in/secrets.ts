import { createHash, randomBytes } from 'node:crypto';

/** How sign-in keeps secrets it hands out (client secrets, codes, refresh tokens): their SHA-256, base64url. */
export const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

/** A new secret to hand out: 32 random bytes, base64url. */
export const newSecret = () => randomBytes(32).toString('base64url');
