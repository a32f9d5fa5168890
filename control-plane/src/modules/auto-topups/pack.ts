import type { Queryable } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import { findPlan } from '../plans/repository';
import { findAccessPurchase } from '../purchases/repository';

/** A top-up pack: the credits it adds and its price in minor units of its plan's currency. */
export interface Pack {
  credits: number;
  amount: number;
  currency: string;
  planId: string;
}

/**
 * The pack a customer buys credits for a product in: the top-up pack of the plan they hold of it
 * now; or why there is none (`no_plan`, or `no_top_up_pack` when the plan sells none). Auto top-up
 * and the portal's Buy credits price alike through it.
 */
export async function packOf(
  db: Queryable,
  tenant: AuthContext,
  customerId: string,
  productId: string,
): Promise<Pack | 'no_plan' | 'no_top_up_pack'> {
  const purchase = await findAccessPurchase(db, customerId, productId);
  if (purchase === undefined) return 'no_plan';
  const plan = await findPlan(db, tenant, purchase.plan_id);
  if (plan === undefined || plan.topup_credits === null || plan.topup_amount === null)
    return 'no_top_up_pack';
  return {
    credits: Number(plan.topup_credits),
    amount: plan.topup_amount,
    currency: plan.currency,
    planId: plan.id,
  };
}
