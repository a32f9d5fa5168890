import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

type Tenant = { providerId: string; environment: Environment };

export interface ClientRow {
  id: string;
  secret_hash: string | null;
  token_endpoint_auth_method: 'none' | 'client_secret_post' | 'client_secret_basic';
  redirect_uris: string[];
  client_name: string | null;
  client_uri: string | null;
  logo_uri: string | null;
  application_type: 'web' | 'native';
  created_at: Date;
  /** When the cached Client ID Metadata Document must be fetched again; null for registered clients. */
  metadata_expires_at: Date | null;
}

/**
 * Inserts a client; a metadata-document client already cached is refreshed in place (a registered
 * client is never overwritten: its id is never a URL).
 */
export async function insertClient(db: Queryable, row: ClientRow): Promise<void> {
  await db.query(
    `INSERT INTO oauth_clients (id, secret_hash, token_endpoint_auth_method, redirect_uris, client_name, client_uri,
                                logo_uri, application_type, created_at, metadata_expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (id) DO UPDATE SET redirect_uris = $4, client_name = $5, client_uri = $6, logo_uri = $7,
       application_type = $8, metadata_expires_at = $10
     WHERE oauth_clients.metadata_expires_at IS NOT NULL`,
    [
      row.id,
      row.secret_hash,
      row.token_endpoint_auth_method,
      row.redirect_uris,
      row.client_name,
      row.client_uri,
      row.logo_uri,
      row.application_type,
      row.created_at,
      row.metadata_expires_at,
    ],
  );
}

export async function findClient(db: Queryable, id: string): Promise<ClientRow | undefined> {
  const { rows } = await db.query<ClientRow>('SELECT * FROM oauth_clients WHERE id = $1', [id]);
  return rows[0];
}

/** The MCP server a resource names, whichever provider it belongs to (subdomains are global). */
export async function findServerBySubdomain(
  db: Queryable,
  subdomain: string,
): Promise<
  | {
      id: string;
      provider_id: string;
      environment: Environment;
      name: string;
      product_id: string | null;
      status: string;
      avatar_url: string | null;
    }
  | undefined
> {
  const { rows } = await db.query(
    `SELECT id, provider_id, environment, name, product_id, status, avatar_url
       FROM mcp_servers WHERE subdomain = $1 AND deleted_at IS NULL`,
    [subdomain],
  );
  return rows[0];
}

export interface LoginRow {
  customer_id: string;
  password_hash: string;
}

/** The sign-in account of an email in a tenant, if its customer is not deleted. */
export async function findLogin(db: Queryable, tenant: Tenant, email: string): Promise<LoginRow | undefined> {
  const { rows } = await db.query<LoginRow>(
    `SELECT l.customer_id, l.password_hash FROM customer_logins l JOIN customers c ON c.id = l.customer_id
      WHERE l.provider_id = $1 AND l.environment = $2 AND l.email = $3 AND c.status <> 'deleted'`,
    [tenant.providerId, tenant.environment, email],
  );
  return rows[0];
}

/**
 * Who holds an email in a tenant: the customer with a sign-in account for it, else the oldest live
 * customer the provider created with it (through the API), else nobody. A sign-in account of a
 * deleted customer is removed first, so the address can be used again.
 */
export async function accountOfEmail(
  db: Queryable,
  tenant: Tenant,
  email: string,
): Promise<{ customerId: string; hasLogin: boolean } | undefined> {
  await db.query(
    `DELETE FROM customer_logins l USING customers c
      WHERE c.id = l.customer_id AND l.provider_id = $1 AND l.environment = $2 AND l.email = $3 AND c.status = 'deleted'`,
    [tenant.providerId, tenant.environment, email],
  );
  const { rows } = await db.query<{ customer_id: string; has_login: boolean }>(
    `SELECT customer_id, true AS has_login FROM customer_logins
      WHERE provider_id = $1 AND environment = $2 AND email = $3
     UNION ALL
     (SELECT id, false FROM customers
       WHERE provider_id = $1 AND environment = $2 AND lower(email) = $3 AND status <> 'deleted'
       ORDER BY created_at, id LIMIT 1)
     ORDER BY has_login DESC LIMIT 1`,
    [tenant.providerId, tenant.environment, email],
  );
  const row = rows[0];
  return row === undefined ? undefined : { customerId: row.customer_id, hasLogin: row.has_login };
}

/** Sets a new password on a sign-in account. */
/**
 * Moves a customer's sign-in account (if they have one) to the address they proved is theirs:
 * they sign in with it from now on. False when another account of the tenant holds it.
 */
export async function moveLoginEmail(
  db: Queryable,
  customerId: string,
  email: string,
  at: Date,
): Promise<boolean> {
  try {
    await db.query('UPDATE customer_logins SET email = $2, updated_at = $3 WHERE customer_id = $1', [
      customerId,
      email,
      at,
    ]);
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === '23505') return false;
    throw error;
  }
}

export async function updateLoginPassword(
  db: Queryable,
  customerId: string,
  passwordHash: string,
  at: Date,
): Promise<void> {
  await db.query('UPDATE customer_logins SET password_hash = $2, updated_at = $3 WHERE customer_id = $1', [
    customerId,
    passwordHash,
    at,
  ]);
}

/** Inserts a sign-in account; false when the email already has one in the tenant. */
export async function insertLogin(
  db: Queryable,
  row: { customerId: string; tenant: Tenant; email: string; passwordHash: string; at: Date },
): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO customer_logins (customer_id, provider_id, environment, email, password_hash, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (provider_id, environment, email) DO NOTHING`,
    [row.customerId, row.tenant.providerId, row.tenant.environment, row.email, row.passwordHash, row.at],
  );
  return result.rowCount === 1;
}

export interface GrantRow {
  id: string;
  client_id: string;
  customer_id: string;
  provider_id: string;
  environment: Environment;
  mcp_server_id: string;
  resource: string;
  scope: string;
  revoked_at: Date | null;
  created_at: Date;
}

export async function insertGrant(db: Queryable, row: GrantRow): Promise<void> {
  await db.query(
    `INSERT INTO oauth_grants (id, client_id, customer_id, provider_id, environment, mcp_server_id, resource, scope, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      row.id,
      row.client_id,
      row.customer_id,
      row.provider_id,
      row.environment,
      row.mcp_server_id,
      row.resource,
      row.scope,
      row.created_at,
    ],
  );
}

/** A grant whose customer and server are live, with the server's product (a token's `prd`). */
export type LiveGrant = GrantRow & { product_id: string | null };

/** The grant with what a token needs of its customer and server: both must still be live. */
export async function findLiveGrant(db: Queryable, id: string): Promise<LiveGrant | undefined> {
  const { rows } = await db.query<LiveGrant>(
    `SELECT g.*, s.product_id FROM oauth_grants g
       JOIN customers c ON c.id = g.customer_id
       JOIN mcp_servers s ON s.id = g.mcp_server_id
      WHERE g.id = $1 AND g.revoked_at IS NULL AND c.status <> 'deleted' AND s.deleted_at IS NULL`,
    [id],
  );
  return rows[0];
}

/** Revokes a grant once; answers whether this call revoked it. */
export async function revokeGrant(db: Queryable, id: string, reason: string, at: Date): Promise<boolean> {
  const result = await db.query(
    'UPDATE oauth_grants SET revoked_at = $2, revoked_reason = $3 WHERE id = $1 AND revoked_at IS NULL',
    [id, at, reason],
  );
  return (result.rowCount ?? 0) > 0;
}

/** Grants revoked since `since`: the proxies are told again at start (their tokens may still be alive). */
export async function recentlyRevokedGrants(
  db: Queryable,
  since: Date,
): Promise<{ id: string; revoked_at: Date }[]> {
  const { rows } = await db.query<{ id: string; revoked_at: Date }>(
    'SELECT id, revoked_at FROM oauth_grants WHERE revoked_at >= $1',
    [since],
  );
  return rows;
}

export async function insertCode(
  db: Queryable,
  row: { codeHash: string; grantId: string; redirectUri: string; codeChallenge: string; expiresAt: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at)
     VALUES ($1, $2, $3, $4, $5)`,
    [row.codeHash, row.grantId, row.redirectUri, row.codeChallenge, row.expiresAt],
  );
}

export interface CodeRow {
  code_hash: string;
  grant_id: string;
  redirect_uri: string;
  code_challenge: string;
  expires_at: Date;
  used_at: Date | null;
}

/**
 * Spends a code: the guarded UPDATE lets exactly one of any number of concurrent exchanges have
 * it. `used` is the code as it was before, for a code spent already (a replay).
 */
export async function spendCode(
  db: Queryable,
  codeHash: string,
  at: Date,
): Promise<{ spent: CodeRow } | { used: CodeRow } | undefined> {
  const { rows } = await db.query<CodeRow>(
    'UPDATE oauth_codes SET used_at = $2 WHERE code_hash = $1 AND used_at IS NULL RETURNING *',
    [codeHash, at],
  );
  if (rows[0] !== undefined) return { spent: rows[0] };
  const { rows: seen } = await db.query<CodeRow>('SELECT * FROM oauth_codes WHERE code_hash = $1', [
    codeHash,
  ]);
  return seen[0] === undefined ? undefined : { used: seen[0] };
}

export async function insertRefreshToken(
  db: Queryable,
  row: { tokenHash: string; grantId: string; expiresAt: Date; at: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO oauth_refresh_tokens (token_hash, grant_id, expires_at, created_at) VALUES ($1, $2, $3, $4)`,
    [row.tokenHash, row.grantId, row.expiresAt, row.at],
  );
}

/**
 * Spends a refresh token (rotation): one of any number of concurrent uses gets it. `reused` names
 * the grant of a token used before, which the caller revokes.
 */
export async function spendRefreshToken(
  db: Queryable,
  tokenHash: string,
  at: Date,
): Promise<{ grantId: string } | { reused: string } | { expired: string } | undefined> {
  const { rows } = await db.query<{ grant_id: string; expires_at: Date }>(
    'UPDATE oauth_refresh_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL RETURNING grant_id, expires_at',
    [tokenHash, at],
  );
  const spent = rows[0];
  if (spent !== undefined)
    return spent.expires_at > at ? { grantId: spent.grant_id } : { expired: spent.grant_id };
  const { rows: seen } = await db.query<{ grant_id: string }>(
    'SELECT grant_id FROM oauth_refresh_tokens WHERE token_hash = $1',
    [tokenHash],
  );
  return seen[0] === undefined ? undefined : { reused: seen[0].grant_id };
}

/** The grant a refresh token belongs to, used or not (revocation, RFC 7009). */
export async function grantOfRefreshToken(db: Queryable, tokenHash: string): Promise<string | undefined> {
  const { rows } = await db.query<{ grant_id: string }>(
    'SELECT grant_id FROM oauth_refresh_tokens WHERE token_hash = $1',
    [tokenHash],
  );
  return rows[0]?.grant_id;
}

/**
 * Reserves one attempt under each key before the attempt is judged, in one guarded statement: a
 * key whose window (begun at most `windowMs` ago) already holds `limit` attempts is left as it
 * is, and every key reserved is given back, so a refused attempt counts nowhere. The upsert
 * locks each row and re-reads it before its guard, so of many attempts at once no more than
 * `limit` per key and window are reserved. Answers the keys refused, with when their windows end.
 */
export async function reserveAttempts(
  db: Queryable,
  keys: readonly { key: string; limit: number }[],
  at: Date,
  windowMs: number,
): Promise<{ key: string; windowEnds: Date }[]> {
  const names = keys.map((k) => k.key);
  const windowStart = new Date(at.getTime() - windowMs);
  // Rows in key order, so two reservations of overlapping keys lock them in the same order.
  const { rows } = await db.query<{ key: string }>(
    `INSERT INTO sign_in_failures (key, failures, window_start)
     SELECT k, 1, $3 FROM unnest($1::text[]) AS k ORDER BY k
     ON CONFLICT (key) DO UPDATE SET
       failures = CASE WHEN sign_in_failures.window_start > $4 THEN sign_in_failures.failures + 1 ELSE 1 END,
       window_start = CASE WHEN sign_in_failures.window_start > $4 THEN sign_in_failures.window_start ELSE $3 END
     WHERE sign_in_failures.window_start <= $4
        OR sign_in_failures.failures < ($2::int[])[array_position($1::text[], sign_in_failures.key)]
     RETURNING key`,
    [names, keys.map((k) => k.limit), at, windowStart],
  );
  if (rows.length === names.length) return [];
  const reserved = new Set(rows.map((r) => r.key));
  if (reserved.size > 0) await releaseAttempts(db, [...reserved]);
  const refused = names.filter((name) => !reserved.has(name));
  const { rows: windows } = await db.query<{ key: string; window_start: Date }>(
    'SELECT key, window_start FROM sign_in_failures WHERE key = ANY($1)',
    [refused],
  );
  return refused.map((key) => {
    const start = windows.find((w) => w.key === key)?.window_start ?? at;
    return { key, windowEnds: new Date(Math.max(start.getTime() + windowMs, at.getTime() + 1000)) };
  });
}

/** Gives back an attempt reserved under each key (it succeeded, or was never judged). */
export async function releaseAttempts(db: Queryable, keys: readonly string[]): Promise<void> {
  await db.query('UPDATE sign_in_failures SET failures = failures - 1 WHERE key = ANY($1) AND failures > 0', [
    keys,
  ]);
}

export async function clearFailures(db: Queryable, key: string): Promise<void> {
  await db.query('DELETE FROM sign_in_failures WHERE key = $1', [key]);
}

/** Holds, until the transaction ends, the lock of one email's sign-up in a tenant. */
export async function lockEmail(db: Queryable, tenant: Tenant, email: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [
    `signup:${tenant.providerId}:${tenant.environment}:${email}`,
  ]);
}

export interface VerificationRow {
  id: string;
  provider_id: string;
  environment: Environment;
  email: string;
  name: string | null;
  password_hash: string;
  /** The authorization request's parameters, to resume it. */
  request: Record<string, string>;
  code_hash: string;
  attempts: number;
  expires_at: Date;
  used_at: Date | null;
  created_at: Date;
}

export async function insertVerification(
  db: Queryable,
  row: Omit<VerificationRow, 'attempts' | 'used_at'>,
): Promise<void> {
  await db.query(
    `INSERT INTO email_verifications (id, provider_id, environment, email, name, password_hash, request, code_hash,
       expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.email,
      row.name,
      row.password_hash,
      row.request,
      row.code_hash,
      row.expires_at,
      row.created_at,
    ],
  );
}

/**
 * Spends one attempt at a verification's code: answers the row when it is still open (unused,
 * unexpired, attempts left), counting the attempt; `closed` when it exists but is not open.
 */
export async function attemptVerification(
  db: Queryable,
  id: string,
  at: Date,
  maxAttempts: number,
): Promise<VerificationRow | 'closed' | undefined> {
  const { rows } = await db.query<VerificationRow>(
    `UPDATE email_verifications SET attempts = attempts + 1
      WHERE id = $1 AND used_at IS NULL AND expires_at > $2 AND attempts < $3 RETURNING *`,
    [id, at, maxAttempts],
  );
  if (rows[0] !== undefined) return rows[0];
  const found = await db.query('SELECT 1 FROM email_verifications WHERE id = $1', [id]);
  return found.rows.length > 0 ? 'closed' : undefined;
}

/** Marks a verification used; false when another request used it first. */
export async function useVerification(db: Queryable, id: string, at: Date): Promise<boolean> {
  const result = await db.query(
    'UPDATE email_verifications SET used_at = $2 WHERE id = $1 AND used_at IS NULL',
    [id, at],
  );
  return result.rowCount === 1;
}

/** Whether the customer has an account of the hosted sign-in (an email and a password). */
/** Whether the customer can sign in to the portal: an account of MCP sign-in, or an email for a code. */
export async function canSignIn(db: Queryable, customerId: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM customers c WHERE c.id = $1 AND c.status <> 'deleted'
        AND (c.email IS NOT NULL OR EXISTS (SELECT 1 FROM customer_logins l WHERE l.customer_id = c.id))`,
    [customerId],
  );
  return rows.length > 0;
}
