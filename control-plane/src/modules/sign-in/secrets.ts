import { createHash, randomBytes } from 'node:crypto';
import { sameSecret } from '@mcp-meter/contracts/kit';

/** How sign-in keeps secrets it hands out (client secrets, codes, refresh tokens): their SHA-256, base64url. */
export const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

/** A new secret to hand out: 32 random bytes, base64url. */
export const newSecret = () => randomBytes(32).toString('base64url');

/** Whether `code` is the six-digit code mailed with the row `rowId`, whose SHA-256 was kept. */
export const codeMatches = (rowId: string, code: string, hash: string) =>
  /^\d{6}$/.test(code) && sameSecret(sha256(`${rowId}:${code}`), hash);

/** What a wrong mailed code says: the tries it has left, or what to do once it has none. */
export const wrongCodeText = (attempts: number, maxAttempts: number, whenNone: string) => {
  const left = maxAttempts - attempts;
  return left > 0
    ? `That code is not right; ${left} ${left === 1 ? 'try' : 'tries'} left`
    : `That code is not right; ${whenNone}`;
};
