import type { Queryable } from '../../db/pool';

export const ROLES = ['owner', 'admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export interface UserRow {
  id: string;
  email: string;
  password_hash: string;
}

export interface MembershipRow {
  provider_id: string;
  display_name: string;
  role: Role;
}

export interface SessionRow {
  id: string;
  csrf_token: string;
  user_id: string;
  email: string;
  provider_id: string;
  display_name: string;
  live_enabled: boolean;
  /** Null when the user is no longer a member of the session's provider. */
  role: Role | null;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(
    'SELECT id, email, password_hash FROM console_users WHERE email = $1',
    [email],
  );
  return rows[0];
}

/** Inserts the user unless the email has one; answers the email's user and whether it is new. */
export async function insertUser(
  db: Queryable,
  user: { id: string; email: string; passwordHash: string; at: Date },
): Promise<{ id: string; created: boolean }> {
  const inserted = await db.query<{ id: string }>(
    `INSERT INTO console_users (id, email, password_hash, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $4) ON CONFLICT (email) DO NOTHING RETURNING id`,
    [user.id, user.email, user.passwordHash, user.at],
  );
  if (inserted.rows[0] !== undefined) return { id: inserted.rows[0].id, created: true };
  const existing = await findUserByEmail(db, user.email);
  if (existing === undefined) throw new Error(`console user ${user.email} vanished`);
  return { id: existing.id, created: false };
}

/** Adds a membership; false when the user is a member of the provider already. */
export async function insertMembership(
  db: Queryable,
  member: { providerId: string; userId: string; role: Role; at: Date },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO provider_members (provider_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING`,
    [member.providerId, member.userId, member.role, member.at],
  );
  return rowCount === 1;
}

export async function membershipsOf(db: Queryable, userId: string): Promise<MembershipRow[]> {
  const { rows } = await db.query<MembershipRow>(
    `SELECT m.provider_id, p.display_name, m.role FROM provider_members m
       JOIN providers p ON p.id = m.provider_id
      WHERE m.user_id = $1 ORDER BY m.created_at, m.provider_id`,
    [userId],
  );
  return rows;
}

export async function updatePassword(
  db: Queryable,
  userId: string,
  passwordHash: string,
  at: Date,
): Promise<void> {
  await db.query('UPDATE console_users SET password_hash = $2, updated_at = $3 WHERE id = $1', [
    userId,
    passwordHash,
    at,
  ]);
}

export async function insertSession(
  db: Queryable,
  session: {
    id: string;
    tokenHash: string;
    csrfToken: string;
    userId: string;
    providerId: string;
    address: string | null;
    userAgent: string | null;
    at: Date;
    expiresAt: Date;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO console_sessions (id, token_hash, csrf_token, user_id, provider_id, address, user_agent,
                                   created_at, last_seen_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
    [
      session.id,
      session.tokenHash,
      session.csrfToken,
      session.userId,
      session.providerId,
      session.address,
      session.userAgent,
      session.at,
      session.expiresAt,
    ],
  );
}

/** A session by its token's hash, with its user, provider and the user's role there now. */
export async function findSession(db: Queryable, tokenHash: string): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `SELECT s.id, s.csrf_token, s.user_id, u.email, s.provider_id, p.display_name, p.live_enabled,
            m.role, s.created_at, s.last_seen_at, s.expires_at, s.revoked_at
       FROM console_sessions s
       JOIN console_users u ON u.id = s.user_id
       JOIN providers p ON p.id = s.provider_id
       LEFT JOIN provider_members m ON m.provider_id = s.provider_id AND m.user_id = s.user_id
      WHERE s.token_hash = $1`,
    [tokenHash],
  );
  return rows[0];
}

/** Records activity; only when the last record is older than `staleBefore` (one write a minute). */
export async function touchSession(db: Queryable, id: string, at: Date, staleBefore: Date): Promise<void> {
  await db.query(
    'UPDATE console_sessions SET last_seen_at = $2 WHERE id = $1 AND last_seen_at < $3 AND revoked_at IS NULL',
    [id, at, staleBefore],
  );
}

export async function revokeSession(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE console_sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL', [
    id,
    at,
  ]);
}

/** Ends every open session of the user but `except`; answers how many ended. */
export async function revokeUserSessions(
  db: Queryable,
  userId: string,
  at: Date,
  except?: string,
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE console_sessions SET revoked_at = $2
      WHERE user_id = $1 AND revoked_at IS NULL AND ($3::text IS NULL OR id <> $3)`,
    [userId, at, except ?? null],
  );
  return rowCount ?? 0;
}

export interface AuditRow {
  id: string;
  provider_id: string;
  environment: string | null;
  user_id: string;
  email: string;
  role: Role;
  session_id: string;
  operation: string;
  method: string;
  path: string;
  status: number;
  request_id: string;
  address: string | null;
  user_agent: string | null;
  created_at: Date;
}

export async function insertAuditEvent(db: Queryable, row: AuditRow): Promise<void> {
  await db.query(
    `INSERT INTO console_audit_events (id, provider_id, environment, user_id, email, role, session_id, operation,
                                       method, path, status, request_id, address, user_agent, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.user_id,
      row.email,
      row.role,
      row.session_id,
      row.operation,
      row.method,
      row.path,
      row.status,
      row.request_id,
      row.address,
      row.user_agent,
      row.created_at,
    ],
  );
}

/** The provider's audit events, newest first, before the `before` id. */
export async function listAuditEvents(
  db: Queryable,
  providerId: string,
  page: { before: string | null; limit: number },
): Promise<AuditRow[]> {
  const { rows } = await db.query<AuditRow>(
    `SELECT * FROM console_audit_events WHERE provider_id = $1 AND ($2::text IS NULL OR id < $2)
      ORDER BY id DESC LIMIT $3`,
    [providerId, page.before, page.limit],
  );
  return rows;
}
