import type { Queryable } from '../db/pool';

/** The repository of Idempotency-Keys: one row per tenant and key, with the response once done. */

type Tenant = { providerId: string; environment: string };

export interface StoredKey {
  request_hash: string;
  state: 'in_progress' | 'done';
  response_status: number | null;
  response_body: string | null;
  created_at: Date;
}

/**
 * Claims the key for a request, forgetting first a claim older than `expiredBefore`: true when
 * this request holds it now, false when another request already does.
 */
export async function claimKey(
  db: Queryable,
  tenant: Tenant,
  claim: { key: string; method: string; path: string; hash: string; at: Date; expiredBefore: Date },
): Promise<boolean> {
  await db.query(
    'DELETE FROM idempotency_keys WHERE provider_id = $1 AND environment = $2 AND key = $3 AND created_at < $4',
    [tenant.providerId, tenant.environment, claim.key, claim.expiredBefore],
  );
  const claimed = await db.query(
    `INSERT INTO idempotency_keys (provider_id, environment, key, method, path, request_hash, state, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'in_progress', $7) ON CONFLICT DO NOTHING`,
    [tenant.providerId, tenant.environment, claim.key, claim.method, claim.path, claim.hash, claim.at],
  );
  return claimed.rowCount === 1;
}

export async function findKey(db: Queryable, tenant: Tenant, key: string): Promise<StoredKey | undefined> {
  const { rows } = await db.query<StoredKey>(
    `SELECT request_hash, state, response_status, response_body, created_at FROM idempotency_keys
      WHERE provider_id = $1 AND environment = $2 AND key = $3`,
    [tenant.providerId, tenant.environment, key],
  );
  return rows[0];
}

/** Forgets a claim, so the client's retry runs again. */
export async function releaseKey(db: Queryable, tenant: Tenant, key: string): Promise<void> {
  await db.query('DELETE FROM idempotency_keys WHERE provider_id = $1 AND environment = $2 AND key = $3', [
    tenant.providerId,
    tenant.environment,
    key,
  ]);
}

/** Keeps the response of the request that held the key, for its replays. */
export async function completeKey(
  db: Queryable,
  tenant: Tenant,
  key: string,
  response: { status: number; body: string },
): Promise<void> {
  await db.query(
    `UPDATE idempotency_keys SET state = 'done', response_status = $4, response_body = $5
      WHERE provider_id = $1 AND environment = $2 AND key = $3`,
    [tenant.providerId, tenant.environment, key, response.status, response.body],
  );
}
