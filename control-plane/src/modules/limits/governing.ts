import { calendarPeriod } from '@mcp-meter/contracts/limits';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import { fundedCredits } from '../credits/repository';
import { findDefaultPlanId, findPlan } from '../plans/repository';
import { isCreditPaid, requiresPayment } from '../plans/rules';
import { type AccessPurchase, findAccessPurchase } from '../purchases/repository';
import type { GoverningPlanRow } from './repository';

/** The plan whose limit a customer's calls to a product count against, and its period. */
export interface Governing {
  planId: string;
  limit: number | null;
  periodStart: Date;
  periodEnd: Date | null;
  /** A plan paid from credits: each call also spends `perUnit` of the customer's credits. */
  credits: { perUnit: number; funded: number } | null;
}

/**
 * Which plan governs a customer's use of a product (spec 1, rule 1): the plan of the purchase
 * that grants access, or else the product's default plan while it is free; none otherwise.
 */
export class GoverningPlans {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  /** The customer's access-granting purchase of the product, or the product's free default plan. */
  async of(auth: AuthContext, customerId: string, productId: string): Promise<Governing | undefined> {
    const purchase = await findAccessPurchase(this.pool, customerId, productId);
    const planId = purchase?.plan_id ?? (await findDefaultPlanId(this.pool, productId));
    const plan = planId === undefined ? undefined : await findPlan(this.pool, auth, planId);
    return this.given(
      purchase,
      plan,
      async () => (await fundedCredits(this.pool, [customerId])).get(customerId) ?? 0,
    );
  }

  /**
   * The plan that governs, given the access purchase (if any) and the row of its plan or, without
   * a purchase, of the product's default plan (which governs only while it is free).
   */
  async given(
    purchase: Pick<AccessPurchase, 'plan_id' | 'period_start' | 'period_end'> | undefined,
    plan: GoverningPlanRow | undefined,
    /** Every credit made available to the customer: read only for a plan paid from credits. */
    funded: () => Promise<number> | number,
  ): Promise<Governing | undefined> {
    if (purchase !== undefined) {
      const creditPaid =
        plan !== undefined && isCreditPaid({ type: plan.type, billingModel: plan.billing_model });
      return {
        planId: purchase.plan_id,
        limit: plan?.usage_limit ?? null,
        periodStart: purchase.period_start,
        periodEnd: purchase.period_end,
        credits: creditPaid
          ? {
              perUnit: plan.credits_per_unit,
              funded: await funded(),
            }
          : null,
      };
    }
    if (
      plan === undefined ||
      requiresPayment({
        price: plan.price,
        basePrice: plan.base_price,
        setupFee: plan.setup_fee,
        unitAmount: plan.unit_amount,
        tiers: plan.tiers,
      })
    )
      return undefined;
    const period = calendarPeriod(plan.billing_cycle, plan.billing_interval_days, this.clock.now());
    return {
      planId: plan.id,
      limit: plan.usage_limit,
      periodStart: period.start,
      periodEnd: period.end,
      credits: null,
    };
  }
}
