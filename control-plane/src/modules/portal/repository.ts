import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export interface PortalOwner {
  provider_id: string;
  environment: Environment;
  customer_id: string;
  return_url: string | null;
}

export async function insertPortalLink(
  db: Queryable,
  row: PortalOwner & { id: string; token_hash: string; expires_at: Date; created_at: Date },
) {
  await db.query(
    `INSERT INTO portal_links (id, provider_id, environment, customer_id, token_hash, return_url, expires_at, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.customer_id,
      row.token_hash,
      row.return_url,
      row.expires_at,
      row.created_at,
    ],
  );
}

/** Uses the link once: answers its owner only if it was unused and unexpired, and marks it used. */
export async function useLink(db: Queryable, tokenHash: string, at: Date): Promise<PortalOwner | undefined> {
  const { rows } = await db.query<PortalOwner>(
    `UPDATE portal_links SET used_at = $2
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
      RETURNING provider_id, environment, customer_id, return_url`,
    [tokenHash, at],
  );
  return rows[0];
}

/** The link's owner whatever its state: a spent link's page still names the merchant. */
export async function linkOwner(db: Queryable, tokenHash: string): Promise<PortalOwner | undefined> {
  const { rows } = await db.query<PortalOwner>(
    'SELECT provider_id, environment, customer_id, return_url FROM portal_links WHERE token_hash = $1',
    [tokenHash],
  );
  return rows[0];
}

export async function insertPortalSession(
  db: Queryable,
  row: PortalOwner & {
    id: string;
    token_hash: string;
    csrf_token: string;
    expires_at: Date;
    created_at: Date;
  },
) {
  await db.query(
    `INSERT INTO portal_sessions (id, provider_id, environment, customer_id, token_hash, csrf_token, return_url,
                                  expires_at, created_at, last_seen_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.customer_id,
      row.token_hash,
      row.csrf_token,
      row.return_url,
      row.expires_at,
      row.created_at,
    ],
  );
}

/**
 * The session of a cookie's secret, seen now: unexpired and seen within `idleMs`; its
 * last_seen_at moves to `at`. Undefined for an unknown, expired or idle session.
 */
export async function findPortalSession(
  db: Queryable,
  tokenHash: string,
  at: Date,
  idleMs: number,
): Promise<(PortalOwner & { id: string; csrf_token: string }) | undefined> {
  const { rows } = await db.query<PortalOwner & { id: string; csrf_token: string }>(
    `UPDATE portal_sessions SET last_seen_at = $2
      WHERE token_hash = $1 AND expires_at > $2 AND last_seen_at > $3
      RETURNING id, provider_id, environment, customer_id, return_url, csrf_token`,
    [tokenHash, at, new Date(at.getTime() - idleMs)],
  );
  return rows[0];
}

/**
 * Takes one of a portal session's promotion-code attempts before a code is looked up: false once
 * `most` are taken, so codes tried at once can never pass the limit together.
 */
export async function takeCodeAttempt(db: Queryable, sessionId: string, most: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE portal_sessions SET promotion_code_attempts = promotion_code_attempts + 1
      WHERE id = $1 AND promotion_code_attempts < $2`,
    [sessionId, most],
  );
  return rowCount === 1;
}

/** Gives an attempt back: the code matched a coupon, so it was no guess. */
export async function giveBackCodeAttempt(db: Queryable, sessionId: string): Promise<void> {
  await db.query(
    `UPDATE portal_sessions SET promotion_code_attempts = promotion_code_attempts - 1
      WHERE id = $1 AND promotion_code_attempts > 0`,
    [sessionId],
  );
}

export async function deletePortalSession(db: Queryable, id: string) {
  await db.query('DELETE FROM portal_sessions WHERE id = $1', [id]);
}

/** What a mailed code proves: an address to sign in with, or a new address for the customer. */
export type PortalCodePurpose = 'sign_in' | 'email_change';

export interface PortalCodeRow {
  id: string;
  purpose: PortalCodePurpose;
  provider_id: string;
  environment: Environment;
  email: string;
  customer_id: string | null;
  code_hash: string;
  attempts: number;
  expires_at: Date;
  used_at: Date | null;
  created_at: Date;
}

export async function insertPortalCode(db: Queryable, row: Omit<PortalCodeRow, 'attempts' | 'used_at'>) {
  await db.query(
    `INSERT INTO portal_sign_in_codes (id, provider_id, environment, email, customer_id, code_hash, expires_at, created_at, purpose)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.email,
      row.customer_id,
      row.code_hash,
      row.expires_at,
      row.created_at,
      row.purpose,
    ],
  );
}

/**
 * Which codes an attempt may use: those of the tenant with this purpose, and for a new address
 * only the signed-in customer's own (`customerId`).
 */
export type CodeScope = {
  providerId: string;
  environment: Environment;
  purpose: PortalCodePurpose;
  customerId?: string;
};

const SCOPED = `id = $1 AND provider_id = $2 AND environment = $3 AND purpose = $4
        AND ($5::text IS NULL OR customer_id = $5)`;

/**
 * Counts one attempt at a code in `scope`: the row with its attempts so far when it is open
 * (unused, unexpired, attempts left), 'closed' when it is not, undefined when there is none.
 */
export async function attemptPortalCode(
  db: Queryable,
  scope: CodeScope,
  id: string,
  at: Date,
  maxAttempts: number,
): Promise<PortalCodeRow | 'closed' | undefined> {
  const key = [id, scope.providerId, scope.environment, scope.purpose, scope.customerId ?? null];
  const { rows } = await db.query<PortalCodeRow>(
    `UPDATE portal_sign_in_codes SET attempts = attempts + 1
      WHERE ${SCOPED} AND used_at IS NULL AND expires_at > $6 AND attempts < $7
      RETURNING *`,
    [...key, at, maxAttempts],
  );
  if (rows[0] !== undefined) return rows[0];
  const { rowCount } = await db.query(`SELECT 1 FROM portal_sign_in_codes WHERE ${SCOPED}`, key);
  return (rowCount ?? 0) > 0 ? 'closed' : undefined;
}

/** A code in `scope` as it stands (the address a code to confirm was mailed to), counting nothing. */
export async function findPortalCode(
  db: Queryable,
  scope: CodeScope,
  id: string,
): Promise<PortalCodeRow | undefined> {
  const { rows } = await db.query<PortalCodeRow>(`SELECT * FROM portal_sign_in_codes WHERE ${SCOPED}`, [
    id,
    scope.providerId,
    scope.environment,
    scope.purpose,
    scope.customerId ?? null,
  ]);
  return rows[0];
}

/** Uses a code once: true for the one caller that did. */
export async function usePortalCode(db: Queryable, id: string, at: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE portal_sign_in_codes SET used_at = $2 WHERE id = $1 AND used_at IS NULL',
    [id, at],
  );
  return (rowCount ?? 0) > 0;
}
