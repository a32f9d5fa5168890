import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import type { Tool } from './schemas';

export interface McpServerRow {
  id: string;
  provider_id: string;
  environment: Environment;
  name: string;
  subdomain: string;
  url: string;
  product_id: string | null;
  status: 'active' | 'inactive' | 'suspended';
  avatar_url: string | null;
  default_plan_id: string | null;
  tools: Tool[];
  deleted_at: Date | null;
  auth_header_name: string | null;
  auth_api_key_sealed: string | null;
  /** Browser origins (`https://app.example`) allowed to call through the proxy. */
  allowed_origins: string[];
}

type Tenant = { providerId: string; environment: Environment };

/** Throws PostgreSQL's unique violation (23505) when the subdomain is taken by a live server. */
export async function insertServer(db: Queryable, row: McpServerRow, at: Date): Promise<void> {
  await db.query(
    `INSERT INTO mcp_servers (id, provider_id, environment, name, subdomain, url, product_id, status, avatar_url, default_plan_id, tools,
                              created_at, updated_at, auth_header_name, auth_api_key_sealed, allowed_origins)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.name,
      row.subdomain,
      row.url,
      row.product_id,
      row.status,
      row.avatar_url,
      row.default_plan_id,
      JSON.stringify(row.tools),
      at,
      row.auth_header_name,
      row.auth_api_key_sealed,
      row.allowed_origins,
    ],
  );
}

/** A live server of the tenant, by id or subdomain. */
export async function findServer(
  db: Queryable,
  tenant: Tenant,
  ref: string,
): Promise<McpServerRow | undefined> {
  const { rows } = await db.query<McpServerRow>(
    'SELECT * FROM mcp_servers WHERE provider_id = $1 AND environment = $2 AND (id = $3 OR subdomain = $3) AND deleted_at IS NULL',
    [tenant.providerId, tenant.environment, ref],
  );
  return rows[0];
}

export async function updateServer(db: Queryable, row: McpServerRow, at: Date): Promise<void> {
  await db.query(
    `UPDATE mcp_servers SET url = $2, product_id = $3, default_plan_id = $4, avatar_url = $5, status = $6, tools = $7, updated_at = $8,
            auth_header_name = $9, auth_api_key_sealed = $10, allowed_origins = $11
      WHERE id = $1`,
    [
      row.id,
      row.url,
      row.product_id,
      row.default_plan_id,
      row.avatar_url,
      row.status,
      JSON.stringify(row.tools),
      at,
      row.auth_header_name,
      row.auth_api_key_sealed,
      row.allowed_origins,
    ],
  );
}

export async function softDeleteServer(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE mcp_servers SET deleted_at = $2, updated_at = $2 WHERE id = $1', [id, at]);
}

export async function listServers(db: Queryable, tenant: Tenant): Promise<McpServerRow[]> {
  const { rows } = await db.query<McpServerRow>(
    'SELECT * FROM mcp_servers WHERE provider_id = $1 AND environment = $2 AND deleted_at IS NULL ORDER BY id',
    [tenant.providerId, tenant.environment],
  );
  return rows;
}

/** Every server of every tenant, deleted ones last (their snapshots are removed). */
export async function allServers(db: Queryable): Promise<McpServerRow[]> {
  const { rows } = await db.query<McpServerRow>('SELECT * FROM mcp_servers ORDER BY deleted_at NULLS LAST');
  return rows;
}

/** The provider's default currency, usd when unset. */
export async function providerCurrency(db: Queryable, providerId: string): Promise<string> {
  const { rows } = await db.query<{ currency: string }>(
    `SELECT COALESCE(default_currency, 'usd') AS currency FROM providers WHERE id = $1`,
    [providerId],
  );
  return rows[0]?.currency ?? 'usd';
}

/** Net revenue (payments less succeeded refunds) per product, in one currency, in minor units. */
export async function netRevenueByProduct(
  db: Queryable,
  tenant: Tenant,
  currency: string,
  productIds: string[],
): Promise<Map<string, number>> {
  const { rows } = await db.query<{ product_id: string; net: string }>(
    `SELECT p.product_id, (SUM(p.amount) - COALESCE(SUM(rf.refunded), 0))::text AS net
       FROM payments p
       LEFT JOIN (SELECT payment_id, SUM(amount) AS refunded FROM refunds WHERE status = 'succeeded' GROUP BY payment_id) rf
         ON rf.payment_id = p.id
      WHERE p.provider_id = $1 AND p.environment = $2 AND p.status = 'succeeded' AND p.currency = $3
        AND p.product_id = ANY($4)
      GROUP BY p.product_id`,
    [tenant.providerId, tenant.environment, currency, productIds],
  );
  return new Map(rows.map((r) => [r.product_id, Number(r.net)]));
}
