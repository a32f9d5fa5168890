import { prepared, type Queryable } from '../../db/pool';
import type { Tenant } from '../products/repository';
import { GRANTS_ACCESS } from '../purchases/state-machine';

/**
 * What a limit check is about, found in one round trip: the customer (by id or externalRef, never
 * a deleted one), the product (by id or reference), the customer's access-granting purchase of
 * it (the latest, as `findAccessPurchase` picks) and, without one, the product's active default
 * plan. A limit check used to make these four queries one after another.
 */
export interface LimitSubject {
  customerId: string | undefined;
  productId: string | undefined;
  purchase: { id: string; plan_id: string; period_start: Date; period_end: Date | null } | undefined;
  /** The product's active default plan; looked for only when there is no purchase. */
  defaultPlanId: string | undefined;
}

interface SubjectRow {
  customer_id: string | null;
  product_id: string | null;
  purchase_id: string | null;
  plan_id: string | null;
  period_start: Date | null;
  period_end: Date | null;
  default_plan_id: string | null;
}

export async function findLimitSubject(
  db: Queryable,
  tenant: Tenant,
  customerRef: string,
  productRef: string,
): Promise<LimitSubject> {
  const { rows } = await db.query<SubjectRow>(
    prepared(
      'limit_subject',
      `WITH c AS (
         SELECT id FROM customers
          WHERE provider_id = $1 AND environment = $2 AND status <> 'deleted' AND (id = $3 OR external_ref = $3)
          ORDER BY (id = $3) DESC LIMIT 1
       ), pr AS (
         SELECT id FROM products
          WHERE provider_id = $1 AND environment = $2 AND (id = $4 OR reference = $4)
          LIMIT 1
       ), pu AS (
         SELECT p.id, p.plan_id, p.period_start, p.period_end FROM purchases p
          WHERE p.customer_id = (SELECT id FROM c) AND p.product_id = (SELECT id FROM pr) AND p.status = ANY($5)
          ORDER BY p.updated_at DESC LIMIT 1
       )
       SELECT (SELECT id FROM c) AS customer_id,
              (SELECT id FROM pr) AS product_id,
              pu.id AS purchase_id, pu.plan_id, pu.period_start, pu.period_end,
              CASE WHEN pu.id IS NULL THEN
                (SELECT id FROM plans WHERE product_id = (SELECT id FROM pr) AND is_default AND status = 'active' LIMIT 1)
              END AS default_plan_id
         FROM (SELECT 1) one LEFT JOIN pu ON true`,
      [tenant.providerId, tenant.environment, customerRef, productRef, [...GRANTS_ACCESS]],
    ),
  );
  const row = rows[0];
  return {
    customerId: row?.customer_id ?? undefined,
    productId: row?.product_id ?? undefined,
    purchase:
      row?.purchase_id != null && row.plan_id !== null && row.period_start !== null
        ? {
            id: row.purchase_id,
            plan_id: row.plan_id,
            period_start: row.period_start,
            period_end: row.period_end,
          }
        : undefined,
    defaultPlanId: row?.default_plan_id ?? undefined,
  };
}
