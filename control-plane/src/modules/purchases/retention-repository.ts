import type { Queryable } from '../../db/pool';
import type { AuthContext } from '../../tenancy';

/**
 * A retention offer taken instead of cancelling, written in the transaction that redeemed its
 * coupon on the purchase: what the cancellation report counts as kept.
 */
export async function recordRetentionSave(
  db: Queryable,
  auth: AuthContext,
  save: { purchaseId: string; productId: string; couponId: string; at: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO retention_saves (purchase_id, provider_id, environment, product_id, coupon_id, saved_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [save.purchaseId, auth.providerId, auth.environment, save.productId, save.couponId, save.at],
  );
}
