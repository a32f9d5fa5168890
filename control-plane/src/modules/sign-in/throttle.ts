import { randomInt } from 'node:crypto';
import type { Pool } from '../../db/pool';
import type { Mailer } from '../../mail';
import { SignInError } from './errors';
import { reserveAttempts } from './repository';

/** Sign-in attempts (and codes mailed) are counted in windows of this length. */
export const ATTEMPT_WINDOW_MS = 15 * 60_000;

/**
 * Reserves an attempt under each key before the attempt is judged (one guarded statement), or
 * refuses with 429 and when to try again when any key has used its window's attempts; a refused
 * attempt counts nowhere. Shared by every sign-in: the hosted one and the portal's.
 */
export async function reserveOrRefuse(
  pool: Pool,
  keys: Array<{ key: string; limit: number }>,
  now: Date,
): Promise<void> {
  const refused = await reserveAttempts(pool, keys, now, ATTEMPT_WINDOW_MS);
  if (refused.length === 0) return;
  const until = Math.max(...refused.map((r) => r.windowEnds.getTime()));
  throw new SignInError(
    'too_many_attempts',
    'Too many attempts; wait a few minutes and try again',
    Math.max(1, Math.ceil((until - now.getTime()) / 1000)),
  );
}

/** A new six-digit one-time code. */
export const newCode = (): string => String(randomInt(0, 1_000_000)).padStart(6, '0');

/** Mails a one-time code; a mail server away is 503 mail_unavailable, to try again in a minute. */
export async function mailCode(
  mailer: Mailer,
  message: { to: string; subject: string; intro: string; code: string; outro: string[] },
): Promise<void> {
  try {
    await mailer.send({
      to: message.to,
      subject: message.subject,
      text: [message.intro, '', `    ${message.code}`, '', ...message.outro].join('\n'),
    });
  } catch {
    throw new SignInError(
      'mail_unavailable',
      'We could not send the code just now; try again in a minute',
      60,
    );
  }
}
