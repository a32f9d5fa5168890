import type { JsonWebKey } from 'node:crypto';
import type { Environment } from '@mcp-meter/ingest';
import type { PoolClient, Queryable } from '../../db/pool';

export interface SigningKeyRow {
  kid: string;
  /** Plain JWK of rows written before keys were sealed; null once sealed. */
  private_jwk: JsonWebKey | null;
  private_jwk_sealed: string | null;
  public_jwk: JsonWebKey;
}

export interface RevocationRow {
  customer_id: string;
  provider_id: string;
  environment: Environment;
  revoked_before: Date;
}

export async function activeSigningKey(db: Queryable): Promise<SigningKeyRow | undefined> {
  const { rows } = await db.query<SigningKeyRow>(
    'SELECT kid, private_jwk, private_jwk_sealed, public_jwk FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 1',
  );
  return rows[0];
}

export async function insertSigningKey(
  db: Queryable,
  key: { kid: string; sealed: string; publicJwk: JsonWebKey; at: Date },
): Promise<void> {
  await db.query(
    'INSERT INTO signing_keys (kid, algorithm, private_jwk_sealed, public_jwk, created_at) VALUES ($1, $2, $3, $4, $5)',
    [key.kid, 'ES256', key.sealed, key.publicJwk, key.at],
  );
}

/** Replaces a plain private key with its sealed form. */
export async function sealSigningKey(db: Queryable, kid: string, sealed: string): Promise<void> {
  await db.query('UPDATE signing_keys SET private_jwk_sealed = $2, private_jwk = NULL WHERE kid = $1', [
    kid,
    sealed,
  ]);
}

export async function retireSigningKey(db: Queryable, kid: string, at: Date): Promise<void> {
  await db.query('UPDATE signing_keys SET retired_at = $2 WHERE kid = $1 AND retired_at IS NULL', [kid, at]);
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
