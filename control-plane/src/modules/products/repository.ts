import type { Environment } from '@mcp-meter/contracts/usage-record';
import { prepared, type Queryable } from '../../db/pool';

export interface ProductRow {
  id: string;
  provider_id: string;
  environment: Environment;
  reference: string;
  name: string;
  description: string | null;
  product_type: string;
  is_mcp_pay: boolean;
  /** The paywall's checkout sessions for its plans offer a promotion-code field. */
  paywall_promotion_codes: boolean;
  /** The customer portal's plan change takes a promotion code. */
  portal_promotion_codes: boolean;
  /** The coupon the portal's cancel page offers a customer about to cancel; null for none. */
  retention_coupon_id: string | null;
  metadata: Record<string, string>;
  status: 'active' | 'archived';
  created_at: Date;
  updated_at: Date;
}

export interface Tenant {
  providerId: string;
  environment: Environment;
}

export async function insertProduct(db: Queryable, row: ProductRow): Promise<ProductRow> {
  const { rows } = await db.query<ProductRow>(
    `INSERT INTO products (id, provider_id, environment, reference, name, description, product_type, is_mcp_pay,
                           metadata, status, created_at, updated_at, paywall_promotion_codes,
                           portal_promotion_codes, retention_coupon_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.reference,
      row.name,
      row.description,
      row.product_type,
      row.is_mcp_pay,
      row.metadata,
      row.status,
      row.created_at,
      row.updated_at,
      row.paywall_promotion_codes,
      row.portal_promotion_codes,
      row.retention_coupon_id,
    ],
  );
  const inserted = rows[0];
  if (inserted === undefined) throw new Error('product insert returned no row');
  return inserted;
}

/** `ref` is the product id or its reference, within the tenant only. */
export async function findProduct(
  db: Queryable,
  tenant: Tenant,
  ref: string,
  options: { forUpdate?: boolean } = {},
): Promise<ProductRow | undefined> {
  const forUpdate = options.forUpdate === true;
  const text = `SELECT * FROM products WHERE provider_id = $1 AND environment = $2 AND (id = $3 OR reference = $3)
     ${forUpdate ? 'FOR NO KEY UPDATE' : ''}`;
  const values = [tenant.providerId, tenant.environment, ref];
  const { rows } = await db.query<ProductRow>(
    forUpdate ? { text, values } : prepared('product_by_ref', text, values),
  );
  return rows[0];
}

export async function listProducts(
  db: Queryable,
  tenant: Tenant,
  options: { after?: string | undefined; limit: number; status?: string | undefined },
): Promise<ProductRow[]> {
  const { rows } = await db.query<ProductRow>(
    `SELECT * FROM products
      WHERE provider_id = $1 AND environment = $2 AND ($3::text IS NULL OR id > $3) AND ($4::text IS NULL OR status = $4)
      ORDER BY id LIMIT $5`,
    [tenant.providerId, tenant.environment, options.after ?? null, options.status ?? null, options.limit + 1],
  );
  return rows;
}

export async function updateProduct(db: Queryable, row: ProductRow): Promise<ProductRow> {
  const { rows } = await db.query<ProductRow>(
    `UPDATE products SET reference = $2, name = $3, description = $4, product_type = $5, is_mcp_pay = $6,
            metadata = $7, status = $8, updated_at = $9, paywall_promotion_codes = $10,
            portal_promotion_codes = $11, retention_coupon_id = $12
      WHERE id = $1 RETURNING *`,
    [
      row.id,
      row.reference,
      row.name,
      row.description,
      row.product_type,
      row.is_mcp_pay,
      row.metadata,
      row.status,
      row.updated_at,
      row.paywall_promotion_codes,
      row.portal_promotion_codes,
      row.retention_coupon_id,
    ],
  );
  const updated = rows[0];
  if (updated === undefined) throw new Error('product update returned no row');
  return updated;
}
