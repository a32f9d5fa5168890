import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import { hashKey, keyHint } from '../providers/keys';

export interface ApiKeyRow {
  id: string;
  name: string | null;
  key_hint: string;
  created_by_email: string | null;
  created_at: Date;
  expires_at: Date | null;
}

const COLUMNS = `k.id, k.name, k.key_hint, u.email AS created_by_email, k.created_at, k.expires_at`;

/** The environment's keys that still open the API (not revoked, not past their end), newest first. */
export async function listActiveKeys(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  at: Date,
): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT ${COLUMNS} FROM api_keys k LEFT JOIN console_users u ON u.id = k.created_by
      WHERE k.provider_id = $1 AND k.environment = $2 AND k.revoked_at IS NULL
        AND (k.expires_at IS NULL OR k.expires_at > $3)
      ORDER BY k.created_at DESC, k.id DESC`,
    [tenant.providerId, tenant.environment, at],
  );
  return rows;
}

/** One active key of the environment, locked for a change (a roll or a revocation). */
export async function lockActiveKey(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  id: string,
  at: Date,
): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT ${COLUMNS} FROM api_keys k LEFT JOIN console_users u ON u.id = k.created_by
      WHERE k.id = $1 AND k.provider_id = $2 AND k.environment = $3 AND k.revoked_at IS NULL
        AND (k.expires_at IS NULL OR k.expires_at > $4)
      FOR UPDATE OF k`,
    [id, tenant.providerId, tenant.environment, at],
  );
  return rows[0];
}

export async function insertNamedKey(
  db: Queryable,
  key: {
    tenant: { providerId: string; environment: Environment };
    secret: string;
    name: string | null;
    createdBy: string | null;
    at: Date;
  },
): Promise<string> {
  const id = newId(ID.apiKey);
  await db.query(
    `INSERT INTO api_keys (id, provider_id, environment, key_hash, key_hint, name, created_by, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      id,
      key.tenant.providerId,
      key.tenant.environment,
      hashKey(key.secret),
      keyHint(key.secret),
      key.name,
      key.createdBy,
      key.at,
    ],
  );
  return id;
}

/** Sets when a key stops working (a roll's overlap), never later than an end it already has. */
export async function expireKey(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE api_keys SET expires_at = LEAST(COALESCE(expires_at, $2), $2) WHERE id = $1', [
    id,
    at,
  ]);
}

export async function revokeKey(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL', [id, at]);
}

export async function findKey(db: Queryable, id: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT ${COLUMNS} FROM api_keys k LEFT JOIN console_users u ON u.id = k.created_by WHERE k.id = $1`,
    [id],
  );
  return rows[0];
}
