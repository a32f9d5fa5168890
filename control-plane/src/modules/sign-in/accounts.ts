import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import type { Mailer } from '../../mail';
import { createCustomerIn } from '../customers/service';
import { type Authorization, type Authorizer, requestParams } from './authorization';
import { OAuthError, SignInError } from './errors';
import { hashPassword, verifyPassword } from './passwords';
import {
  accountOfEmail,
  attemptVerification,
  clearFailures,
  findLogin,
  insertLogin,
  insertVerification,
  lockEmail,
  releaseAttempts,
  updateLoginPassword,
  useVerification,
} from './repository';
import { codeMatches, sha256, wrongCodeText } from './secrets';
import { mailCode, newCode, reserveOrRefuse } from './throttle';

/** Sign-in failures counted per account and per address within the window (throttle.ts). */
const MAX_FAILURES_PER_ACCOUNT = 5;
const MAX_FAILURES_PER_ADDRESS = 30;
/** Codes mailed to one address of a tenant within the window: bounds mail sent to someone else's inbox. */
const MAX_CODES_PER_EMAIL = 5;
const VERIFICATION_TTL_MS = 10 * 60_000;
const MAX_CODE_ATTEMPTS = 5;

const normaliseEmail = (email: string) => email.trim().toLowerCase();
/** The throttle key of failed sign-ins to one account (an email of one provider and environment). */
const accountKey = (tenant: { providerId: string; environment: string }, email: string) =>
  `account:${tenant.providerId}:${tenant.environment}:${email}`;

/**
 * Customer accounts of the hosted sign-in: sign-in with email and password, sign-up (and a new
 * password) proven by a code mailed to the address, and the throttles on both. Each ends in the
 * redirect of the authorization request it started from, with a fresh code.
 */
export class CustomerAccounts {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
    private readonly authorizer: Authorizer,
  ) {}

  /** Signs in an existing account and answers the redirect carrying a fresh code. */
  async login(request: Authorization, credentials: { email: string; password: string; address: string }) {
    const customerId = await this.verify(request.tenant, credentials);
    return { redirectUrl: await this.authorizer.codeRedirect(request, customerId) };
  }

  /**
   * Checks an account's email and password under the sign-in throttles and answers its
   * customer: the hosted sign-in's check, which the customer portal's sign-in shares.
   */
  async verify(
    tenant: { providerId: string; environment: Authorization['tenant']['environment'] },
    credentials: { email: string; password: string; address: string },
  ): Promise<string> {
    const email = normaliseEmail(credentials.email);
    const account = accountKey(tenant, email);
    const addressKey = `address:${credentials.address}`;
    // Counted before the password is checked: a wrong one keeps the count, a right one clears it.
    await this.reserve(account, addressKey);
    const login = await findLogin(this.pool, tenant, email);
    // The same work whether or not the account exists: the answer and its timing tell nothing.
    const ok = await verifyPassword(login?.password_hash, credentials.password);
    if (login === undefined || !ok)
      throw new SignInError('invalid_credentials', 'The email or password is not right');
    await clearFailures(this.pool, account);
    await releaseAttempts(this.pool, [addressKey]);
    return login.customer_id;
  }

  /**
   * Starts a sign-up (or a new password: the same thing for the person asking) by mailing a
   * one-time code to the address. Nothing is created until the code comes back, so the answer is
   * the same whether the email is new, belongs to a customer the provider created through the API,
   * or already has an account: sign-up tells nobody which addresses are known, and only the
   * person who reads the inbox can attach a password to it.
   */
  async startSignup(
    request: Authorization,
    details: { email: string; password: string; name?: string | undefined; address: string },
  ): Promise<{ verificationId: string; email: string; expiresAt: string }> {
    const email = normaliseEmail(details.email);
    const mailKey = `mail:${request.tenant.providerId}:${request.tenant.environment}:${email}`;
    const addressKey = `address:${details.address}`;
    if (details.password.length < 8)
      throw new SignInError('weak_password', 'Choose a password of at least 8 characters');
    // A code mailed counts against the address's mail; the address is checked, not counted.
    await this.reserve(mailKey, addressKey);
    await releaseAttempts(this.pool, [addressKey]);
    const at = this.clock.now();
    const id = newId(ID.emailVerification);
    const code = newCode();
    const expiresAt = new Date(at.getTime() + VERIFICATION_TTL_MS);
    await insertVerification(this.pool, {
      id,
      provider_id: request.tenant.providerId,
      environment: request.tenant.environment,
      email,
      name: details.name ?? null,
      password_hash: await hashPassword(details.password),
      request: requestParams(request),
      code_hash: sha256(`${id}:${code}`),
      expires_at: expiresAt,
      created_at: at,
    });
    await mailCode(this.mailer, {
      to: email,
      subject: `${code} is your ${request.provider.name} code`,
      intro: `Your code to sign in to ${request.provider.name} (${request.server.name}) is:`,
      code,
      outro: [
        'It works once, for 10 minutes. If you did not ask for it, ignore this message:',
        'nothing changes without the code.',
      ],
    });
    return { verificationId: id, email, expiresAt: expiresAt.toISOString() };
  }

  /**
   * Finishes a sign-up with the mailed code: the address is proven, so its password is set. The
   * customer is the one with an account for the email, else the one the provider created with it,
   * else a new one (`customer.created` with the server's product, spec 6.5 rule 1). Answers the
   * redirect of the authorization request the sign-up started from, with a fresh code.
   */
  async verifySignup(verificationId: string, code: string, address: string) {
    const addressKey = `address:${address}`;
    // Counted before the code is checked; given back once it proves right.
    await this.reserve(addressKey);
    const now = this.clock.now();
    const row = await attemptVerification(this.pool, verificationId, now, MAX_CODE_ATTEMPTS);
    if (row === undefined)
      throw new SignInError('verification_not_found', 'This sign-up is not known; start again');
    if (row === 'closed')
      throw new SignInError('verification_expired', 'This code expired or was used up; start again');
    if (!codeMatches(row.id, code, row.code_hash))
      throw new SignInError(
        'invalid_verification_code',
        wrongCodeText(row.attempts, MAX_CODE_ATTEMPTS, 'start again'),
      );
    // The client and server are checked again: either may have gone while the mail travelled.
    let request: Authorization;
    try {
      request = await this.authorizer.authorize(row.request);
    } catch (error) {
      if (error instanceof OAuthError)
        throw new SignInError('verification_expired', 'This sign-in request is no longer valid; start again');
      throw error;
    }
    const tenant = { providerId: row.provider_id, environment: row.environment };
    const customerId = await inTransaction(this.pool, async (tx) => {
      if (!(await useVerification(tx, row.id, now))) return undefined;
      // One sign-up per email at a time: the second waits, then finds the first's account.
      await lockEmail(tx, tenant, row.email);
      const account = await accountOfEmail(tx, tenant, row.email);
      if (account?.hasLogin) {
        await updateLoginPassword(tx, account.customerId, row.password_hash, now);
        return account.customerId;
      }
      const id =
        account?.customerId ??
        (
          await createCustomerIn(
            tx,
            tenant,
            { name: row.name ?? undefined, email: row.email },
            { at: now, productId: request.server.productId },
          )
        )?.id;
      if (id === undefined) throw new Error('a customer without externalRef was not inserted');
      await insertLogin(tx, {
        customerId: id,
        tenant,
        email: row.email,
        passwordHash: row.password_hash,
        at: now,
      });
      return id;
    });
    if (customerId === undefined)
      throw new SignInError('verification_expired', 'This code was already used; start again');
    await clearFailures(this.pool, accountKey(tenant, row.email));
    await releaseAttempts(this.pool, [addressKey]);
    return { redirectUrl: await this.authorizer.codeRedirect(request, customerId) };
  }

  /** Reserves an attempt under each key (429 when one has used its window's attempts). */
  private reserve(...keys: string[]): Promise<void> {
    const limitOf = (key: string) =>
      key.startsWith('account:')
        ? MAX_FAILURES_PER_ACCOUNT
        : key.startsWith('mail:')
          ? MAX_CODES_PER_EMAIL
          : MAX_FAILURES_PER_ADDRESS;
    return reserveOrRefuse(
      this.pool,
      keys.map((key) => ({ key, limit: limitOf(key) })),
      this.clock.now(),
    );
  }
}
