import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export interface CouponRow {
  id: string;
  provider_id: string;
  environment: Environment;
  name: string;
  code: string | null;
  percent_off_bps: number | null;
  amount_off: number | null;
  currency: string | null;
  duration: 'once' | 'repeating' | 'forever';
  duration_in_months: number | null;
  max_redemptions: number | null;
  times_redeemed: number;
  redeem_by: Date | null;
  product_ids: string[];
  first_time_only: boolean;
  /** The least a purchase's first invoice must come to before discounts, in its currency. */
  minimum_amount: number | null;
  minimum_amount_currency: string | null;
  /** The one customer who may redeem it; null for any. */
  customer_id: string | null;
  metadata: Record<string, string>;
  status: 'active' | 'archived';
  created_at: Date;
  updated_at: Date;
}

type Tenant = { providerId: string; environment: Environment };

/** Stores a new coupon; undefined when its code is an active coupon's already. */
export async function insertCoupon(db: Queryable, row: CouponRow): Promise<CouponRow | undefined> {
  const { rows } = await db.query<CouponRow>(
    `INSERT INTO coupons (id, provider_id, environment, name, code, percent_off_bps, amount_off, currency, duration,
                          duration_in_months, max_redemptions, times_redeemed, redeem_by, product_ids, status,
                          created_at, updated_at, first_time_only, metadata, minimum_amount,
                          minimum_amount_currency, customer_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, $12, $13, 'active', $14, $14, $15, $16, $17, $18, $19)
     ON CONFLICT (provider_id, environment, lower(code)) WHERE code IS NOT NULL AND status = 'active' DO NOTHING
     RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.name,
      row.code,
      row.percent_off_bps,
      row.amount_off,
      row.currency,
      row.duration,
      row.duration_in_months,
      row.max_redemptions,
      row.redeem_by,
      row.product_ids,
      row.created_at,
      row.first_time_only,
      row.metadata,
      row.minimum_amount,
      row.minimum_amount_currency,
      row.customer_id,
    ],
  );
  return rows[0];
}

/** A coupon by id, or by code (any case) among the active ones. */
export async function findCoupon(db: Queryable, tenant: Tenant, ref: string): Promise<CouponRow | undefined> {
  const { rows } = await db.query<CouponRow>(
    `SELECT * FROM coupons WHERE provider_id = $1 AND environment = $2
        AND (id = $3 OR (code IS NOT NULL AND status = 'active' AND lower(code) = lower($3)))
      ORDER BY id = $3 DESC LIMIT 1`,
    [tenant.providerId, tenant.environment, ref],
  );
  return rows[0];
}

/** The active coupon of a code (any case): what a customer's typed code may name, never an id. */
export async function findCouponByCode(
  db: Queryable,
  tenant: Tenant,
  code: string,
): Promise<CouponRow | undefined> {
  const { rows } = await db.query<CouponRow>(
    `SELECT * FROM coupons WHERE provider_id = $1 AND environment = $2 AND code IS NOT NULL AND status = 'active'
        AND lower(code) = lower($3)`,
    [tenant.providerId, tenant.environment, code],
  );
  return rows[0];
}

export async function listCoupons(
  db: Queryable,
  tenant: Tenant,
  filter: {
    after?: string | undefined;
    limit: number;
    status?: string | undefined;
    code?: string | undefined;
  },
): Promise<CouponRow[]> {
  const { rows } = await db.query<CouponRow>(
    `SELECT * FROM coupons WHERE provider_id = $1 AND environment = $2
        AND ($3::text IS NULL OR id < $3) AND ($4::text IS NULL OR status = $4)
        AND ($5::text IS NULL OR lower(code) = lower($5))
      ORDER BY id DESC LIMIT $6`,
    [
      tenant.providerId,
      tenant.environment,
      filter.after ?? null,
      filter.status ?? null,
      filter.code ?? null,
      filter.limit,
    ],
  );
  return rows;
}

/** Changes a coupon's name and metadata (its terms never change). */
export async function updateCoupon(
  db: Queryable,
  tenant: Tenant,
  id: string,
  change: { name: string; metadata: Record<string, string> },
  at: Date,
): Promise<CouponRow | undefined> {
  const { rows } = await db.query<CouponRow>(
    `UPDATE coupons SET name = $4, metadata = $5, updated_at = $6
      WHERE provider_id = $1 AND environment = $2 AND id = $3
     RETURNING *`,
    [tenant.providerId, tenant.environment, id, change.name, change.metadata, at],
  );
  return rows[0];
}

/** Whether the customer has ever paid: a succeeded payment (first-time-only coupons). */
export async function hasPaid(db: Queryable, customerId: string): Promise<boolean> {
  const { rows } = await db.query(
    "SELECT 1 FROM payments WHERE customer_id = $1 AND status = 'succeeded' LIMIT 1",
    [customerId],
  );
  return rows.length > 0;
}

/**
 * Archives an active coupon (no more redemptions; its code is free again); undefined when there
 * is no active coupon of that id. Discounts already given stay.
 */
export async function archiveCoupon(
  db: Queryable,
  tenant: Tenant,
  id: string,
  at: Date,
): Promise<CouponRow | undefined> {
  const { rows } = await db.query<CouponRow>(
    `UPDATE coupons SET status = 'archived', updated_at = $4
      WHERE provider_id = $1 AND environment = $2 AND id = $3 AND status = 'active' RETURNING *`,
    [tenant.providerId, tenant.environment, id, at],
  );
  return rows[0];
}

/**
 * Counts one redemption of the coupon `id` at `at`, in the caller's transaction, if it may still
 * be redeemed then: active, before its redeem-by date, under its maximum. The guard is in the
 * UPDATE, so concurrent redemptions of the last one cannot both pass; answers undefined when it
 * may not be (the caller reads the row to say why).
 */
export async function redeemCoupon(db: Queryable, id: string, at: Date): Promise<CouponRow | undefined> {
  const { rows } = await db.query<CouponRow>(
    `UPDATE coupons SET times_redeemed = times_redeemed + 1
      WHERE id = $1 AND status = 'active' AND (redeem_by IS NULL OR redeem_by > $2)
        AND (max_redemptions IS NULL OR times_redeemed < max_redemptions)
     RETURNING *`,
    [id, at],
  );
  return rows[0];
}

/**
 * Gives back a redemption counted in the same transaction, whose payment then failed (the
 * transaction commits to keep the failed attempt): the coupon's row stays locked by the
 * redemption until then, so no other redeemer saw the count in between.
 */
export async function releaseRedemption(db: Queryable, id: string): Promise<void> {
  await db.query(
    'UPDATE coupons SET times_redeemed = times_redeemed - 1 WHERE id = $1 AND times_redeemed > 0',
    [id],
  );
}

/** Products of the provider's environment among `ids`. */
export async function existingProducts(db: Queryable, tenant: Tenant, ids: string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM products WHERE provider_id = $1 AND environment = $2 AND id = ANY($3)',
    [tenant.providerId, tenant.environment, ids],
  );
  return new Set(rows.map((r) => r.id));
}
