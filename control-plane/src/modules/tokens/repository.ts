import type { JsonWebKey } from 'node:crypto';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { PoolClient, Queryable } from '../../db/pool';

export interface SigningKeyRow {
  kid: string;
  /** Plain JWK of rows written before keys were sealed; null once sealed. */
  private_jwk: JsonWebKey | null;
  private_jwk_sealed: string | null;
  public_jwk: JsonWebKey;
  /** Fingerprint of the SECRET_KEY it is sealed under; null for rows older than that. */
  secret_id: string | null;
}

export interface RevocationRow {
  customer_id: string;
  provider_id: string;
  environment: Environment;
  revoked_before: Date;
}

/** Active keys this secret may use: its own, newest first, then keys of no known secret (older rows). */
export async function usableSigningKeys(db: Queryable, secretId: string): Promise<SigningKeyRow[]> {
  const { rows } = await db.query<SigningKeyRow>(
    `SELECT kid, private_jwk, private_jwk_sealed, public_jwk, secret_id FROM signing_keys
      WHERE retired_at IS NULL AND (secret_id = $1 OR secret_id IS NULL)
      ORDER BY (secret_id IS NULL), created_at DESC`,
    [secretId],
  );
  return rows;
}

/** Records which secret a key of no known secret turned out to be sealed under. */
export async function claimSigningKey(db: Queryable, kid: string, secretId: string): Promise<void> {
  await db.query('UPDATE signing_keys SET secret_id = $2 WHERE kid = $1 AND secret_id IS NULL', [
    kid,
    secretId,
  ]);
}

export async function insertSigningKey(
  db: Queryable,
  key: { kid: string; sealed: string; publicJwk: JsonWebKey; secretId: string; at: Date },
): Promise<void> {
  await db.query(
    'INSERT INTO signing_keys (kid, algorithm, private_jwk_sealed, public_jwk, secret_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [key.kid, 'ES256', key.sealed, key.publicJwk, key.secretId, key.at],
  );
}

/** Replaces a plain private key with its sealed form. */
export async function sealSigningKey(db: Queryable, kid: string, sealed: string): Promise<void> {
  await db.query('UPDATE signing_keys SET private_jwk_sealed = $2, private_jwk = NULL WHERE kid = $1', [
    kid,
    sealed,
  ]);
}

export async function publicSigningKeys(db: Queryable): Promise<JsonWebKey[]> {
  const { rows } = await db.query<{ public_jwk: JsonWebKey }>(
    'SELECT public_jwk FROM signing_keys ORDER BY created_at',
  );
  return rows.map((r) => r.public_jwk);
}

/** Tokens of the customer issued at or before `before` are revoked (a later revocation moves it on). */
export async function upsertRevocation(
  db: Queryable | PoolClient,
  row: RevocationRow,
): Promise<RevocationRow> {
  const { rows } = await db.query<RevocationRow>(
    `INSERT INTO token_revocations (customer_id, provider_id, environment, revoked_before) VALUES ($1, $2, $3, $4)
     ON CONFLICT (customer_id) DO UPDATE SET revoked_before = GREATEST(token_revocations.revoked_before, EXCLUDED.revoked_before)
     RETURNING *`,
    [row.customer_id, row.provider_id, row.environment, row.revoked_before],
  );
  return rows[0] ?? row;
}

/** Revocations still able to matter: tokens live at most 30 days. */
export async function recentRevocations(db: Queryable, since: Date): Promise<RevocationRow[]> {
  const { rows } = await db.query<RevocationRow>(
    'SELECT * FROM token_revocations WHERE revoked_before >= $1',
    [since],
  );
  return rows;
}
