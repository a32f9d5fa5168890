import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import type { Mailer } from '../../mail';
import type { AuthContext } from '../../tenancy';
import { hashPassword, verifyPassword } from '../sign-in/passwords';
import { clearFailures, releaseAttempts } from '../sign-in/repository';
import { newSecret, sha256 } from '../sign-in/secrets';
import {
  acceptInvitation,
  deleteMember,
  findInvitationByToken,
  type InvitationRow,
  insertInvitation,
  listMembers,
  listOpenInvitations,
  lockMembers,
  type MemberRow,
  revokeInvitation,
  updateMemberRole,
} from './members-repository';
import { findUserByEmail, insertMembership, insertUser, type Role } from './repository';
import {
  isMember,
  MAX_FAILURES_PER_ADDRESS,
  MIN_PASSWORD,
  normaliseEmail,
  type SessionView,
  type TeamService,
} from './service';
import { isEmail } from './signup';
import { reserveOrRefuse } from './throttle';

/** An invitation's link works this long. */
export const INVITATION_TTL_MS = 7 * 24 * 60 * 60_000;
const MAX_FAILURES_PER_ACCOUNT = 5;

const memberView = (row: MemberRow) => ({
  userId: row.user_id,
  email: row.email,
  role: row.role,
  joinedAt: row.created_at.toISOString(),
});

const invitationView = (row: InvitationRow) => ({
  id: row.id,
  email: row.email,
  role: row.role,
  invitedBy: row.invited_by_email,
  createdAt: row.created_at.toISOString(),
  expiresAt: row.expires_at.toISOString(),
});

/** The caller's standing in the team: a member's role, or a secret key's (an owner's). */
const standingOf = (auth: AuthContext): { role: Role; userId: string | null } =>
  isMember(auth) ? { role: auth.role, userId: auth.userId } : { role: 'owner', userId: null };

const ownersOnly = () =>
  new DomainError('role_forbidden', 'Only an owner may grant, change or remove the owner role', {
    role: 'admin',
  });

/**
 * A provider's team: its members and their roles, and invitations mailed to new ones. Owners and
 * admins manage it (the role rules keep the rest out); only an owner (or a secret key) touches
 * the owner role, and a provider never loses its last owner. An invitation is a link with a
 * secret, mailed to the address and valid for 7 days; opening it, the person signs in to their
 * account or sets a password for a new one, and joins with the invited role.
 */
export class TeamMembers {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
    private readonly team: TeamService,
    private readonly consoleUrl: string,
  ) {}

  async list(providerId: string) {
    const [members, invitations] = await Promise.all([
      listMembers(this.pool, providerId),
      listOpenInvitations(this.pool, providerId),
    ]);
    const now = this.clock.now();
    return {
      members: members.map(memberView),
      invitations: invitations.filter((row) => row.expires_at > now).map(invitationView),
    };
  }

  async invite(auth: AuthContext, input: { email: string; role: Role }) {
    const email = normaliseEmail(input.email);
    if (!isEmail(email))
      throw new ValidationError([{ path: '/email', message: 'must be an email address', location: 'body' }]);
    const caller = standingOf(auth);
    if (input.role === 'owner' && caller.role !== 'owner') throw ownersOnly();
    const members = await listMembers(this.pool, auth.providerId);
    if (members.some((m) => m.email === email))
      throw new ConflictError('member_exists', `${email} is a member of this team already`);
    const token = newSecret();
    const at = this.clock.now();
    const id = newId(ID.invitation);
    const expiresAt = new Date(at.getTime() + INVITATION_TTL_MS);
    await inTransaction(this.pool, (tx) =>
      insertInvitation(tx, {
        id,
        providerId: auth.providerId,
        email,
        role: input.role,
        tokenHash: sha256(token),
        invitedBy: caller.userId,
        at,
        expiresAt,
      }),
    );
    const row = (await listOpenInvitations(this.pool, auth.providerId)).find((r) => r.id === id);
    if (row === undefined) throw new Error('the new invitation vanished');
    // The secret rides in the fragment: browsers send it to no server, nor in a Referer.
    const link = `${this.consoleUrl}/accept-invitation#token=${token}`;
    try {
      await this.mailer.send({
        to: email,
        subject: `Join ${row.display_name} on MCP Meter`,
        text: [
          `${row.invited_by_email ?? row.display_name} invites you to the ${row.display_name} team on the MCP Meter console, as ${input.role}.`,
          '',
          `Accept within 7 days: ${link}`,
          '',
          'If you did not expect it, ignore this message.',
        ].join('\n'),
      });
    } catch {
      await revokeInvitation(this.pool, auth.providerId, id, this.clock.now());
      throw new DomainError(
        'mail_unavailable',
        'We could not send the invitation just now; try again in a minute',
        {
          retryAfter: 60,
        },
      );
    }
    return invitationView(row);
  }

  async revokeInvitation(providerId: string, id: string): Promise<void> {
    if (!(await revokeInvitation(this.pool, providerId, id, this.clock.now())))
      throw new NotFoundError('invitation_not_found', `No open invitation ${id}`);
  }

  /**
   * A member's new role. The provider's memberships are locked for the change, so concurrent
   * changes cannot take away its last owner.
   */
  async changeRole(auth: AuthContext, userId: string, role: Role) {
    const caller = standingOf(auth);
    return inTransaction(this.pool, async (tx) => {
      const members = await lockMembers(tx, auth.providerId);
      const target = members.find((m) => m.user_id === userId);
      if (target === undefined)
        throw new NotFoundError('member_not_found', `No member ${userId} in this team`);
      if ((target.role === 'owner' || role === 'owner') && caller.role !== 'owner') throw ownersOnly();
      if (
        target.role === 'owner' &&
        role !== 'owner' &&
        members.filter((m) => m.role === 'owner').length === 1
      )
        throw new ConflictError(
          'last_owner',
          'A team keeps at least one owner: make someone else owner first',
        );
      await updateMemberRole(tx, auth.providerId, userId, role);
      return memberView({ ...target, role });
    });
  }

  /** Removes a member; their sessions at this provider end at once. */
  async remove(auth: AuthContext, userId: string): Promise<void> {
    const caller = standingOf(auth);
    await inTransaction(this.pool, async (tx) => {
      const members = await lockMembers(tx, auth.providerId);
      const target = members.find((m) => m.user_id === userId);
      if (target === undefined)
        throw new NotFoundError('member_not_found', `No member ${userId} in this team`);
      if (target.role === 'owner' && caller.role !== 'owner') throw ownersOnly();
      if (target.role === 'owner' && members.filter((m) => m.role === 'owner').length === 1)
        throw new ConflictError(
          'last_owner',
          'A team keeps at least one owner: make someone else owner first',
        );
      await deleteMember(tx, auth.providerId, userId, this.clock.now());
    });
  }

  /** What an invitation link offers, for its page: the team, the address, the role, and whether to sign in. */
  async lookup(token: string) {
    const row = await this.openInvitation(token);
    const account = await findUserByEmail(this.pool, row.email);
    return {
      provider: { id: row.provider_id, displayName: row.display_name },
      email: row.email,
      role: row.role,
      accountExists: account !== undefined,
      expiresAt: row.expires_at.toISOString(),
    };
  }

  /**
   * Accepts an invitation: the link proves the inbox. An existing account proves itself with its
   * password (counted as a sign-in is); a new one is made with the password given. Answers a
   * session at the provider the invitation is to.
   */
  async accept(input: {
    token: string;
    password: string;
    address: string;
    userAgent?: string | undefined;
  }): Promise<{ token: string; session: SessionView; created: boolean }> {
    const now = this.clock.now();
    const addressKey = `console-address:${input.address}`;
    await reserveOrRefuse(this.pool, now, [{ key: addressKey, limit: MAX_FAILURES_PER_ADDRESS }]);
    const row = await this.openInvitation(input.token);
    const accountKey = `console-account:${row.email}`;
    const existing = await findUserByEmail(this.pool, row.email);
    if (existing !== undefined) {
      await reserveOrRefuse(this.pool, now, [{ key: accountKey, limit: MAX_FAILURES_PER_ACCOUNT }]);
      if (!(await verifyPassword(existing.password_hash, input.password)))
        throw new DomainError('invalid_credentials', 'The password is not right for this account');
      await clearFailures(this.pool, accountKey);
    } else if (input.password.length < MIN_PASSWORD)
      throw new DomainError('weak_password', `Choose a password of at least ${MIN_PASSWORD} characters`);
    const passwordHash = existing === undefined ? await hashPassword(input.password) : '';
    const userId = await inTransaction(this.pool, async (tx) => {
      const user =
        existing === undefined
          ? await insertUser(tx, { id: newId(ID.consoleUser), email: row.email, passwordHash, at: now })
          : { id: existing.id };
      if (!(await acceptInvitation(tx, row.id, user.id, now)))
        throw new ConflictError('invitation_closed', 'This invitation was used, revoked or expired');
      if (
        !(await insertMembership(tx, {
          providerId: row.provider_id,
          userId: user.id,
          role: row.role,
          at: now,
        }))
      )
        throw new ConflictError('member_exists', `${row.email} is a member of this team already`);
      return user.id;
    });
    await releaseAttempts(this.pool, [addressKey]);
    const session = await this.team.startSession({
      userId,
      providerId: row.provider_id,
      address: input.address,
      userAgent: input.userAgent,
    });
    return { ...session, created: existing === undefined };
  }

  private async openInvitation(token: string): Promise<InvitationRow> {
    const row = token === '' ? undefined : await findInvitationByToken(this.pool, sha256(token));
    if (row === undefined)
      throw new NotFoundError('invitation_not_found', 'This invitation link is not known');
    if (row.accepted_at !== null || row.revoked_at !== null || row.expires_at <= this.clock.now())
      throw new ConflictError(
        'invitation_closed',
        'This invitation was used, revoked or expired; ask for a new one',
      );
    return row;
  }
}
