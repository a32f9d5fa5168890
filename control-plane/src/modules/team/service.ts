import { ID, newId, sameSecret } from '@mcp-meter/contracts/kit';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, UnauthorizedError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { hashPassword, verifyPassword } from '../sign-in/passwords';
import { clearFailures, releaseAttempts } from '../sign-in/repository';
import { newSecret, sha256 } from '../sign-in/secrets';
import {
  findSession,
  findUserByEmail,
  insertMembership,
  insertSession,
  insertUser,
  membershipsOf,
  type Role,
  revokeSession,
  revokeUserSessions,
  type SessionRow,
  touchSession,
  updatePassword,
} from './repository';
import { mayCall } from './roles';
import { reserveOrRefuse } from './throttle';

/** A session ends this long after it was last used... */
export const SESSION_IDLE_MS = 30 * 60_000;
/** ...and this long after it began, used or not. */
export const SESSION_LIFETIME_MS = 12 * 60 * 60_000;
/** Activity is recorded at most this often per session (not a write per request). */
const TOUCH_EVERY_MS = 60_000;
const MAX_FAILURES_PER_ACCOUNT = 5;
/** Failed attempts (sign-ins, codes) from one address in the window. */
export const MAX_FAILURES_PER_ADDRESS = 30;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export const normaliseEmail = (email: string) => email.trim().toLowerCase();

/** A console account's password: at least this many characters. */
export const MIN_PASSWORD = 8;

/** What the console learns of its session: who, where, as what, and until when. */
export interface SessionView {
  id: string;
  user: { id: string; email: string };
  provider: { id: string; displayName: string; liveEnabled: boolean };
  role: Role;
  /** Send it back in X-CSRF-Token with every call that changes something. */
  csrfToken: string;
  createdAt: string;
  expiresAt: string;
  idleExpiresAt: string;
}

/** A console member's request: the tenant, as an API key's, and who and in which role. */
export interface MemberAuth extends AuthContext {
  role: Role;
  userId: string;
  email: string;
  sessionId: string;
}

/** Whether a request's AuthContext is a console member's (an API key's has no session). */
export const isMember = (auth: AuthContext | null): auth is MemberAuth =>
  auth !== null && 'sessionId' in auth;

function view(row: SessionRow, role: Role, lastSeen: Date): SessionView {
  return {
    id: row.id,
    user: { id: row.user_id, email: row.email },
    provider: { id: row.provider_id, displayName: row.display_name, liveEnabled: row.live_enabled },
    role,
    csrfToken: row.csrf_token,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    idleExpiresAt: new Date(
      Math.min(lastSeen.getTime() + SESSION_IDLE_MS, row.expires_at.getTime()),
    ).toISOString(),
  };
}

/**
 * The console's people: accounts (email and an argon2id password), their memberships of
 * providers with a role, and their sessions (a cookie's secret, stored hashed; a CSRF token; an
 * idle and an absolute expiry). A member's calls to the API go through `authenticate`, which
 * gives them the tenant an API key would, and through `authorize`, which applies their role.
 */
export class TeamService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  /**
   * Makes `email` a member of the provider with `role` (the admin CLI's first owner). A new
   * account gets `password`, or a generated one, answered once; an existing account keeps its own.
   */
  async addMember(input: {
    providerId: string;
    email: string;
    role: Role;
    password?: string | undefined;
  }): Promise<{ userId: string; email: string; role: Role; password?: string }> {
    const email = normaliseEmail(input.email);
    if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > 254)
      throw new ValidationError([{ path: '/email', message: 'must be an email address', location: 'body' }]);
    const password = input.password ?? newSecret().slice(0, 20);
    if (password.length < MIN_PASSWORD)
      throw new DomainError('weak_password', `Choose a password of at least ${MIN_PASSWORD} characters`);
    const passwordHash = await hashPassword(password);
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const user = await insertUser(tx, { id: newId(ID.consoleUser), email, passwordHash, at });
      const added = await insertMembership(tx, {
        providerId: input.providerId,
        userId: user.id,
        role: input.role,
        at,
      });
      if (!added)
        throw new ConflictError('member_exists', `${email} is a member of ${input.providerId} already`);
      return { userId: user.id, email, role: input.role, ...(user.created ? { password } : {}) };
    });
  }

  /**
   * Signs in with email and password and starts a session at the member's provider (the one
   * named, or the only one). Failures are counted per account and per address before the
   * password is checked; the answer and its timing are the same for an unknown email.
   */
  async signIn(input: {
    email: string;
    password: string;
    providerId?: string | undefined;
    address: string;
    userAgent?: string | undefined;
  }): Promise<{ token: string; session: SessionView }> {
    const email = normaliseEmail(input.email);
    const accountKey = `console-account:${email}`;
    const addressKey = `console-address:${input.address}`;
    const now = this.clock.now();
    await reserveOrRefuse(this.pool, now, [
      { key: accountKey, limit: MAX_FAILURES_PER_ACCOUNT },
      { key: addressKey, limit: MAX_FAILURES_PER_ADDRESS },
    ]);
    const user = await findUserByEmail(this.pool, email);
    const ok = await verifyPassword(user?.password_hash, input.password);
    if (user === undefined || !ok)
      throw new DomainError('invalid_credentials', 'The email or password is not right');
    await clearFailures(this.pool, accountKey);
    await releaseAttempts(this.pool, [addressKey]);
    const memberships = await membershipsOf(this.pool, user.id);
    const membership =
      input.providerId === undefined
        ? memberships.length === 1
          ? memberships[0]
          : undefined
        : memberships.find((m) => m.provider_id === input.providerId);
    if (membership === undefined) {
      if (input.providerId === undefined && memberships.length > 1)
        throw new ConflictError(
          'provider_required',
          'You belong to several providers: name one in providerId',
          {
            providers: memberships.map((m) => ({
              id: m.provider_id,
              displayName: m.display_name,
              role: m.role,
            })),
          },
        );
      throw new DomainError('forbidden', 'This account is not a member of that provider');
    }
    return this.startSession({
      userId: user.id,
      providerId: membership.provider_id,
      address: input.address,
      userAgent: input.userAgent,
    });
  }

  /** A new session of a member at a provider: its cookie's secret (answered once) and its view. */
  async startSession(input: {
    userId: string;
    providerId: string;
    address: string;
    userAgent?: string | undefined;
  }): Promise<{ token: string; session: SessionView }> {
    const now = this.clock.now();
    const token = newSecret();
    await insertSession(this.pool, {
      id: newId(ID.consoleSession),
      tokenHash: sha256(token),
      csrfToken: newSecret(),
      userId: input.userId,
      providerId: input.providerId,
      address: input.address,
      userAgent: input.userAgent?.slice(0, 500) ?? null,
      at: now,
      expiresAt: new Date(now.getTime() + SESSION_LIFETIME_MS),
    });
    const row = await findSession(this.pool, sha256(token));
    if (row === undefined || row.role === null) throw new Error('the new session vanished');
    return { token, session: view(row, row.role, now) };
  }

  /** The open session of `token` and the member's role now; session_expired when it ended. */
  async session(token: string | undefined): Promise<{ row: SessionRow; role: Role; view: SessionView }> {
    const row = token === undefined || token === '' ? undefined : await findSession(this.pool, sha256(token));
    const now = this.clock.now();
    if (
      row === undefined ||
      row.role === null ||
      row.revoked_at !== null ||
      now >= row.expires_at ||
      now.getTime() >= row.last_seen_at.getTime() + SESSION_IDLE_MS
    )
      throw new UnauthorizedError('session_expired', 'Your console session has ended; sign in again');
    await touchSession(this.pool, row.id, now, new Date(now.getTime() - TOUCH_EVERY_MS));
    return { row, role: row.role, view: view(row, row.role, now) };
  }

  /**
   * A console member's API call: the session (from its cookie), the CSRF token for anything but
   * a read, the environment asked for (sandbox unless live, which the provider must have), and
   * the role's say on this route.
   */
  async authenticate(request: {
    token: string | undefined;
    csrfToken: string | undefined;
    method: string;
    route: string;
    environment: string | undefined;
  }): Promise<MemberAuth> {
    const { row, role } = await this.session(request.token);
    if (!SAFE_METHODS.has(request.method) && !sameSecret(request.csrfToken ?? '', row.csrf_token))
      throw new DomainError('csrf_failed', 'Send the session’s csrfToken in the X-CSRF-Token header');
    const environment: Environment = request.environment === 'live' ? 'live' : 'sandbox';
    if (
      request.environment !== undefined &&
      request.environment !== 'live' &&
      request.environment !== 'sandbox'
    )
      throw new ValidationError([
        { path: '/mcp-meter-environment', message: 'must be sandbox or live', location: 'headers' },
      ]);
    if (environment === 'live' && !row.live_enabled)
      throw new NotFoundError(
        'provider_not_found_in_environment',
        'Live mode is not enabled for this provider',
      );
    if (!mayCall(role, request.method, request.route))
      throw new DomainError('role_forbidden', `A ${role} may not make this change`, { role });
    return {
      providerId: row.provider_id,
      environment,
      readable: row.live_enabled ? ['sandbox', 'live'] : ['sandbox'],
      role,
      userId: row.user_id,
      email: row.email,
      sessionId: row.id,
    };
  }

  /** The session of `token`, for a change to it: its CSRF token must come with the request. */
  private async changing(token: string | undefined, csrfToken: string | undefined) {
    const session = await this.session(token);
    if (!sameSecret(csrfToken ?? '', session.row.csrf_token))
      throw new DomainError('csrf_failed', 'Send the session’s csrfToken in the X-CSRF-Token header');
    return session;
  }

  async signOut(token: string | undefined, csrfToken: string | undefined): Promise<SessionRow> {
    const { row } = await this.changing(token, csrfToken);
    await revokeSession(this.pool, row.id, this.clock.now());
    return row;
  }

  /** Ends every session of the session's user, this one included; answers how many. */
  async signOutEverywhere(
    token: string | undefined,
    csrfToken: string | undefined,
  ): Promise<{ ended: number; row: SessionRow }> {
    const { row } = await this.changing(token, csrfToken);
    return { ended: await revokeUserSessions(this.pool, row.user_id, this.clock.now()), row };
  }

  /** A new password, proven by the current one; every other session of the user ends. */
  async changePassword(
    token: string | undefined,
    csrfToken: string | undefined,
    passwords: { current: string; next: string },
  ): Promise<SessionRow> {
    const { row } = await this.changing(token, csrfToken);
    const user = await findUserByEmail(this.pool, row.email);
    if (!(await verifyPassword(user?.password_hash, passwords.current)))
      throw new DomainError('invalid_credentials', 'The current password is not right');
    if (passwords.next.length < MIN_PASSWORD)
      throw new DomainError('weak_password', `Choose a password of at least ${MIN_PASSWORD} characters`);
    const at = this.clock.now();
    await updatePassword(this.pool, row.user_id, await hashPassword(passwords.next), at);
    await revokeUserSessions(this.pool, row.user_id, at, row.id);
    return row;
  }
}
