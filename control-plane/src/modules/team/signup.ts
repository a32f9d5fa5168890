import { randomInt } from 'node:crypto';
import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { DomainError, NotFoundError, ValidationError } from '../../errors';
import type { Mailer } from '../../mail';
import type { ProviderService } from '../providers/service';
import { hashPassword } from '../sign-in/passwords';
import { releaseAttempts } from '../sign-in/repository';
import { codeMatches, sha256, wrongCodeText } from '../sign-in/secrets';
import { attemptSignup, insertSignup, useSignup } from './members-repository';
import { insertMembership, insertUser, updatePassword } from './repository';
import {
  MAX_FAILURES_PER_ADDRESS,
  MIN_PASSWORD,
  normaliseEmail,
  type SessionView,
  type TeamService,
} from './service';
import { reserveOrRefuse } from './throttle';

const CODE_TTL_MS = 10 * 60_000;
const MAX_CODE_ATTEMPTS = 5;
/** Codes mailed to one address in the window: bounds mail sent to someone else's inbox. */
const MAX_CODES_PER_EMAIL = 5;

export const isEmail = (email: string) => /^[^\s@]+@[^\s@]+$/.test(email) && email.length <= 254;

/**
 * Sign-up to the console: a person names their business, their email and a password, and a
 * six-digit code is mailed to the address. Nothing exists until the code comes back; then, in one
 * transaction, a provider (sandbox only: live mode is the operator's to enable), its keys and
 * meters, the person's account and their membership as its owner, and a signed-in session.
 * The answer to a sign-up is the same whether or not the address has an account already: the code
 * proves the inbox, so an existing account gets the new password and the new provider.
 */
export class ConsoleSignups {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
    private readonly providers: ProviderService,
    private readonly team: TeamService,
    private readonly open: boolean,
  ) {}

  async start(input: {
    email: string;
    password: string;
    businessName: string;
    address: string;
  }): Promise<{ verificationId: string; email: string; expiresAt: string }> {
    if (!this.open)
      throw new DomainError(
        'signup_closed',
        'Sign-up is closed on this service: ask an owner of your team for an invitation',
      );
    const email = normaliseEmail(input.email);
    const businessName = input.businessName.trim();
    const problems = [
      ...(isEmail(email) ? [] : [{ path: '/email', message: 'must be an email address' }]),
      ...(businessName === '' ? [{ path: '/businessName', message: 'must not be blank' }] : []),
    ];
    if (problems.length > 0)
      throw new ValidationError(problems.map((p) => ({ ...p, location: 'body' as const })));
    if (input.password.length < MIN_PASSWORD)
      throw new DomainError('weak_password', `Choose a password of at least ${MIN_PASSWORD} characters`);
    const at = this.clock.now();
    const addressKey = `console-address:${input.address}`;
    // A code mailed counts against the email's mail; the address is checked, not counted.
    await reserveOrRefuse(this.pool, at, [
      { key: `console-mail:${email}`, limit: MAX_CODES_PER_EMAIL },
      { key: addressKey, limit: MAX_FAILURES_PER_ADDRESS },
    ]);
    await releaseAttempts(this.pool, [addressKey]);
    const id = newId(ID.consoleSignup);
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const expiresAt = new Date(at.getTime() + CODE_TTL_MS);
    await insertSignup(this.pool, {
      id,
      email,
      password_hash: await hashPassword(input.password),
      business_name: businessName,
      code_hash: sha256(`${id}:${code}`),
      attempts: 0,
      expires_at: expiresAt,
      created_at: at,
    });
    try {
      await this.mailer.send({
        to: email,
        subject: `${code} is your MCP Meter console code`,
        text: [
          `Your code to finish signing up ${businessName} to the MCP Meter console is:`,
          '',
          `    ${code}`,
          '',
          'It works once, for 10 minutes. If you did not ask for it, ignore this message:',
          'nothing is created without the code.',
        ].join('\n'),
      });
    } catch {
      throw new DomainError(
        'mail_unavailable',
        'We could not send the code just now; try again in a minute',
        {
          retryAfter: 60,
        },
      );
    }
    return { verificationId: id, email, expiresAt: expiresAt.toISOString() };
  }

  /** The code proves the address: the provider, the owner and a session are made at once. */
  async verify(input: {
    verificationId: string;
    code: string;
    address: string;
    userAgent?: string | undefined;
  }): Promise<{ token: string; session: SessionView }> {
    const addressKey = `console-address:${input.address}`;
    const now = this.clock.now();
    // Counted before the code is checked; given back once it proves right.
    await reserveOrRefuse(this.pool, now, [{ key: addressKey, limit: MAX_FAILURES_PER_ADDRESS }]);
    const row = await attemptSignup(this.pool, input.verificationId, now, MAX_CODE_ATTEMPTS);
    if (row === undefined)
      throw new NotFoundError('verification_not_found', 'This sign-up is not known; start again');
    if (row === 'closed')
      throw new DomainError('verification_expired', 'This code expired or was used up; start again');
    if (!codeMatches(row.id, input.code, row.code_hash))
      throw new DomainError(
        'invalid_verification_code',
        wrongCodeText(row.attempts, MAX_CODE_ATTEMPTS, 'start again'),
      );
    let userId: string | undefined;
    const created = await this.providers.create(
      { displayName: row.business_name, liveEnabled: false },
      async (tx, provider) => {
        // Used inside the transaction: a second verify with the same code makes nothing.
        if (!(await useSignup(tx, row.id, now)))
          throw new DomainError('verification_expired', 'This code was already used; start again');
        const user = await insertUser(tx, {
          id: newId(ID.consoleUser),
          email: row.email,
          passwordHash: row.password_hash,
          at: now,
        });
        if (!user.created) await updatePassword(tx, user.id, row.password_hash, now);
        await insertMembership(tx, {
          providerId: provider.provider.id,
          userId: user.id,
          role: 'owner',
          at: now,
        });
        userId = user.id;
      },
    );
    if (userId === undefined) throw new Error('a verified sign-up made no account');
    await releaseAttempts(this.pool, [addressKey]);
    return this.team.startSession({
      userId,
      providerId: created.provider.id,
      address: input.address,
      userAgent: input.userAgent,
    });
  }
}
