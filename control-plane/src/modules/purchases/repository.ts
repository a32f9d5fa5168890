import type { Queryable } from '../../db/pool';
import type { PurchaseRow } from './service';
import { GRANTS_ACCESS } from './state-machine';

export interface AccessPurchase {
  id: string;
  plan_id: string;
  period_start: Date;
  period_end: Date | null;
}

/** The customer's purchase of the product that grants access right now (trialing, active, past due), if any. */
export async function findAccessPurchase(
  db: Queryable,
  customerId: string,
  productId: string,
): Promise<AccessPurchase | undefined> {
  const { rows } = await db.query<AccessPurchase>(
    `SELECT id, plan_id, period_start, period_end FROM purchases
      WHERE customer_id = $1 AND product_id = $2 AND status = ANY($3)
      ORDER BY updated_at DESC LIMIT 1`,
    [customerId, productId, [...GRANTS_ACCESS]],
  );
  return rows[0];
}

/** Products the customer holds an access-granting purchase of. */
export async function accessProductIds(db: Queryable, customerId: string): Promise<string[]> {
  const { rows } = await db.query<{ product_id: string }>(
    'SELECT DISTINCT product_id FROM purchases WHERE customer_id = $1 AND status = ANY($2)',
    [customerId, [...GRANTS_ACCESS]],
  );
  return rows.map((r) => r.product_id);
}

/** A purchase by id, locked for the caller's transaction. */
export async function lockPurchase(db: Queryable, id: string): Promise<PurchaseRow | undefined> {
  const { rows } = await db.query<PurchaseRow>('SELECT * FROM purchases WHERE id = $1 FOR UPDATE', [id]);
  return rows[0];
}
