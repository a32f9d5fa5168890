import type { Queryable } from '../../db/pool';
import type { Role } from './repository';

/** A sign-up waiting for its mailed code. */
export interface SignupRow {
  id: string;
  email: string;
  password_hash: string;
  business_name: string;
  code_hash: string;
  attempts: number;
}

export async function insertSignup(
  db: Queryable,
  row: SignupRow & { expires_at: Date; created_at: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO console_signups (id, email, password_hash, business_name, code_hash, expires_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [row.id, row.email, row.password_hash, row.business_name, row.code_hash, row.expires_at, row.created_at],
  );
}

/**
 * Spends one attempt at a sign-up's code: the row while it is open (unused, unexpired, attempts
 * left), 'closed' when it exists but is not, undefined when there is no such sign-up.
 */
export async function attemptSignup(
  db: Queryable,
  id: string,
  at: Date,
  maxAttempts: number,
): Promise<SignupRow | 'closed' | undefined> {
  const { rows } = await db.query<SignupRow>(
    `UPDATE console_signups SET attempts = attempts + 1
      WHERE id = $1 AND used_at IS NULL AND expires_at > $2 AND attempts < $3
      RETURNING id, email, password_hash, business_name, code_hash, attempts`,
    [id, at, maxAttempts],
  );
  if (rows[0] !== undefined) return rows[0];
  const found = await db.query('SELECT 1 FROM console_signups WHERE id = $1', [id]);
  return found.rowCount === 0 ? undefined : 'closed';
}

/** Marks a sign-up used; false when another request used it first. */
export async function useSignup(db: Queryable, id: string, at: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE console_signups SET used_at = $2 WHERE id = $1 AND used_at IS NULL',
    [id, at],
  );
  return rowCount === 1;
}

export interface MemberRow {
  user_id: string;
  email: string;
  role: Role;
  created_at: Date;
}

export async function listMembers(db: Queryable, providerId: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT m.user_id, u.email, m.role, m.created_at FROM provider_members m
       JOIN console_users u ON u.id = m.user_id
      WHERE m.provider_id = $1 ORDER BY m.created_at, m.user_id`,
    [providerId],
  );
  return rows;
}

/**
 * Locks the provider's memberships for a change of roles (one change at a time per provider, so
 * two admins demoting the last two owners at once cannot leave none) and answers them.
 */
export async function lockMembers(db: Queryable, providerId: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT m.user_id, u.email, m.role, m.created_at FROM provider_members m
       JOIN console_users u ON u.id = m.user_id
      WHERE m.provider_id = $1 ORDER BY m.created_at, m.user_id FOR UPDATE OF m`,
    [providerId],
  );
  return rows;
}

export async function updateMemberRole(
  db: Queryable,
  providerId: string,
  userId: string,
  role: Role,
): Promise<void> {
  await db.query('UPDATE provider_members SET role = $3 WHERE provider_id = $1 AND user_id = $2', [
    providerId,
    userId,
    role,
  ]);
}

/** Removes a membership and ends the member's sessions at that provider. */
export async function deleteMember(
  db: Queryable,
  providerId: string,
  userId: string,
  at: Date,
): Promise<void> {
  await db.query('DELETE FROM provider_members WHERE provider_id = $1 AND user_id = $2', [
    providerId,
    userId,
  ]);
  await db.query(
    `UPDATE console_sessions SET revoked_at = $3
      WHERE provider_id = $1 AND user_id = $2 AND revoked_at IS NULL`,
    [providerId, userId, at],
  );
}

export interface InvitationRow {
  id: string;
  provider_id: string;
  display_name: string;
  email: string;
  role: Role;
  invited_by_email: string | null;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
}

const INVITATION_COLUMNS = `i.id, i.provider_id, p.display_name, i.email, i.role, u.email AS invited_by_email,
  i.created_at, i.expires_at, i.accepted_at, i.revoked_at`;
const INVITATION_JOINS = `JOIN providers p ON p.id = i.provider_id
  LEFT JOIN console_users u ON u.id = i.invited_by`;

/**
 * Inserts an invitation, replacing (revoking) an open one to the same address, so the newest link
 * is the one that works.
 */
export async function insertInvitation(
  db: Queryable,
  row: {
    id: string;
    providerId: string;
    email: string;
    role: Role;
    tokenHash: string;
    invitedBy: string | null;
    at: Date;
    expiresAt: Date;
  },
): Promise<void> {
  await db.query(
    `UPDATE console_invitations SET revoked_at = $3
      WHERE provider_id = $1 AND email = $2 AND accepted_at IS NULL AND revoked_at IS NULL`,
    [row.providerId, row.email, row.at],
  );
  await db.query(
    `INSERT INTO console_invitations (id, provider_id, email, role, token_hash, invited_by, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [row.id, row.providerId, row.email, row.role, row.tokenHash, row.invitedBy, row.at, row.expiresAt],
  );
}

/** The provider's invitations still open (neither accepted nor revoked), newest first. */
export async function listOpenInvitations(db: Queryable, providerId: string): Promise<InvitationRow[]> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${INVITATION_COLUMNS} FROM console_invitations i ${INVITATION_JOINS}
      WHERE i.provider_id = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL
      ORDER BY i.id DESC`,
    [providerId],
  );
  return rows;
}

export async function findInvitationByToken(
  db: Queryable,
  tokenHash: string,
): Promise<InvitationRow | undefined> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${INVITATION_COLUMNS} FROM console_invitations i ${INVITATION_JOINS} WHERE i.token_hash = $1`,
    [tokenHash],
  );
  return rows[0];
}

/** Revokes an open invitation of the provider; false when there is none with that id. */
export async function revokeInvitation(
  db: Queryable,
  providerId: string,
  id: string,
  at: Date,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE console_invitations SET revoked_at = $3
      WHERE provider_id = $1 AND id = $2 AND accepted_at IS NULL AND revoked_at IS NULL`,
    [providerId, id, at],
  );
  return rowCount === 1;
}

/** Accepts an open, unexpired invitation once; false when another request took it or it closed. */
export async function acceptInvitation(
  db: Queryable,
  id: string,
  userId: string,
  at: Date,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE console_invitations SET accepted_at = $3, accepted_by = $2
      WHERE id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $3`,
    [id, userId, at],
  );
  return rowCount === 1;
}
