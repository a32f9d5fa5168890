import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { ValidationError } from '../../errors';
import type { Mailer } from '../../mail';
import type { AuthContext } from '../../tenancy';
import { getProvider } from '../providers/repository';
import { SignInError } from '../sign-in/errors';
import { accountOfEmail, releaseAttempts } from '../sign-in/repository';
import { codeMatches, sha256, wrongCodeText } from '../sign-in/secrets';
import { mailCode, newCode, reserveOrRefuse } from '../sign-in/throttle';
import {
  attemptPortalCode,
  type CodeScope,
  insertPortalCode,
  type PortalCodeRow,
  usePortalCode,
} from './repository';

export const CODE_TTL_MS = 10 * 60_000;
const MAX_CODE_ATTEMPTS = 5;
/** The sign-in throttles' limits (throttle.ts): codes mailed to one address, attempts from one IP. */
export const MAX_CODES_PER_EMAIL = 5;
export const MAX_ATTEMPTS_PER_ADDRESS = 30;

/**
 * Signing in to the portal by a code mailed to the customer's address, with no password (as
 * Stripe's customer portal does): any customer of the provider with that email (an MCP sign-in
 * account first, else the customer the provider created with it). The answer is the same whether
 * or not the address is known; only a known one is mailed. Mail and attempts are throttled with
 * the hosted sign-in's counters (the same keys: codes to one inbox count across both).
 */
export class PortalCodes {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
    private readonly sessions: {
      startFor(tenant: AuthContext, customerId: string): Promise<string>;
    },
  ) {}

  private reserve(keys: Array<{ key: string; limit: number }>) {
    return reserveOrRefuse(this.pool, keys, this.clock.now());
  }

  /** Mails a code to `email` when it belongs to a customer here; answers the code's id either way. */
  async mail(
    tenant: AuthContext,
    emailInput: string,
    address: string,
  ): Promise<{ id: string; email: string }> {
    const email = emailInput.trim().toLowerCase();
    if (!/^[^\s@]{1,64}@[^\s@]{1,255}$/.test(email))
      throw new ValidationError([{ path: '/email', message: 'is not an email address', location: 'body' }]);
    const addressKey = `address:${address}`;
    await this.reserve([
      { key: `mail:${tenant.providerId}:${tenant.environment}:${email}`, limit: MAX_CODES_PER_EMAIL },
      { key: addressKey, limit: MAX_ATTEMPTS_PER_ADDRESS },
    ]);
    // A code mailed counts against the inbox; the address is checked, not counted.
    await releaseAttempts(this.pool, [addressKey]);
    const account = await accountOfEmail(this.pool, tenant, email);
    const at = this.clock.now();
    const id = newId(ID.portalCode);
    const code = newCode();
    await insertPortalCode(this.pool, {
      id,
      provider_id: tenant.providerId,
      environment: tenant.environment,
      email,
      customer_id: account?.customerId ?? null,
      code_hash: sha256(`${id}:${code}`),
      expires_at: new Date(at.getTime() + CODE_TTL_MS),
      created_at: at,
      purpose: 'sign_in',
    });
    if (account !== undefined) {
      const merchant = (await getProvider(this.pool, tenant.providerId))?.displayName ?? 'your provider';
      await mailCode(this.mailer, {
        to: email,
        subject: `${code} is your ${merchant} account code`,
        intro: `Your code to open your ${merchant} account is:`,
        code,
        outro: ['It works once, for 10 minutes. If you did not ask for it, ignore this message.'],
      });
    }
    return { id, email };
  }

  /** Signs the browser in with a mailed code: the new portal session's secret. */
  async verify(tenant: AuthContext, id: string, code: string, address: string): Promise<string> {
    const addressKey = `address:${address}`;
    // Counted before the code is checked; given back once it proves right.
    await this.reserve([{ key: addressKey, limit: MAX_ATTEMPTS_PER_ADDRESS }]);
    const row = await useMailedCode(this.pool, { ...tenant, purpose: 'sign_in' }, id, code, this.clock.now());
    await releaseAttempts(this.pool, [addressKey]);
    return this.sessions.startFor(tenant, row.customer_id);
  }
}

/**
 * Uses a mailed code of `scope` once, if `code` is right: its row. Each attempt counts (five per
 * code); a code for an address with no customer is checked like any other, and is never right.
 */
export async function useMailedCode(
  pool: Pool,
  scope: CodeScope,
  id: string,
  code: string,
  now: Date,
): Promise<PortalCodeRow & { customer_id: string }> {
  const row = await attemptPortalCode(pool, scope, id, now, MAX_CODE_ATTEMPTS);
  if (row === undefined)
    throw new SignInError('verification_not_found', 'This code is not known; ask for a new one');
  if (row === 'closed')
    throw new SignInError('verification_expired', 'This code expired or was used up; ask for a new one');
  const customerId = row.customer_id;
  if (!codeMatches(row.id, code, row.code_hash) || customerId === null)
    throw new SignInError(
      'invalid_verification_code',
      wrongCodeText(row.attempts, MAX_CODE_ATTEMPTS, 'ask for a new one'),
    );
  if (!(await usePortalCode(pool, row.id, now)))
    throw new SignInError('verification_expired', 'This code was already used; ask for a new one');
  return { ...row, customer_id: customerId };
}
