import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, type Queryable } from '../../db/pool';
import { ConflictError, NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { type Discount, discountApplies, discountedAt } from '../billing/discounts';
import type { StoredLine } from '../billing/repository';
import {
  type CouponService,
  discountOf,
  type RedemptionTarget,
  redemptionTarget,
  toDiscount,
} from '../coupons/service';
import { writeEvent } from '../events/outbox';
import { findPlan, settingsOf } from '../plans/repository';
import { findPurchase, type PurchaseRow, setDiscount } from './repository';
import { recordRetentionSave } from './retention-repository';
import { eventObject, toPurchase } from './views';

/**
 * The discount a plan switch keeps from the purchase it replaces: while it applies, and for an
 * amount off (in one currency) only when the new plan is in that currency.
 */
function kept(replaced: PurchaseRow | undefined, target: { currency: string }, now: Date): Discount | null {
  const discount = replaced?.discount ?? null;
  if (!discountApplies(discount, now)) return null;
  if (discount.currency !== null && discount.currency !== target.currency.toLowerCase()) return null;
  return discount;
}

/** Statuses in which a purchase still has invoices to come, so a discount can change them. */
const BILLABLE = new Set(['pending', 'trialing', 'active', 'past_due']);

/**
 * A purchase's discount (docs/coupons.md): redeemed with the activation that creates it, carried
 * over by a plan switch, set or removed on a purchase in force. The discount is kept on the
 * purchase; the invoices take it off their charges (billing/discounts.ts).
 */
export class PurchaseDiscounts {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly coupons: CouponService,
  ) {}

  /**
   * The discount of the purchase an activation creates, in its transaction: the coupon it names,
   * redeemed now (404/409 when it cannot be, undoing the activation), or else the discount of the
   * purchase it replaces while that still applies, as Stripe keeps a subscription's discount
   * across a price change (an amount off only to a plan in its currency). The new purchase is
   * created with it.
   */
  async forActivation(
    tx: PoolClient,
    auth: AuthContext,
    target: RedemptionTarget,
    replaced: PurchaseRow | undefined,
    coupon: string | undefined,
  ): Promise<Discount | null> {
    if (coupon !== undefined) return this.coupons.redeem(tx, auth, coupon, target);
    return kept(replaced, target, this.clock.now());
  }

  /** A first invoice's `charges` less the new purchase's discount, when it applies now. */
  firstCharges(discount: Discount | null, charges: StoredLine[]): StoredLine[] {
    return discountedAt(charges, discount, this.clock.now());
  }

  /**
   * What an activation's preview or checkout shows: the coupon named (checked, not redeemed) or
   * the replaced purchase's discount, taken off `charges` as the first invoice will.
   */
  async preview(
    db: Queryable,
    auth: AuthContext,
    target: RedemptionTarget,
    replaced: PurchaseRow | undefined,
    coupon: string | undefined,
    charges: StoredLine[],
  ): Promise<StoredLine[]> {
    const now = this.clock.now();
    let discount: Discount | null = null;
    if (coupon !== undefined) discount = discountOf(await this.coupons.check(db, auth, coupon, target), now);
    else discount = kept(replaced, target, now);
    return discountedAt(charges, discount, now);
  }

  /**
   * POST /v1/sdk/purchases/:ref/discount: redeems a coupon on a purchase in force, replacing the
   * discount it had (as Stripe's subscription update with a coupon). Its invoices from now on
   * take it off; those already issued stay as they are.
   */
  async apply(auth: AuthContext, ref: string, coupon: string, options: { retentionOffer?: boolean } = {}) {
    return inTransaction(this.pool, async (tx) => {
      const row = await this.billable(tx, auth, ref);
      // A retention offer is taken by a purchase without a discount, once: decided under the
      // row's lock, so a form sent twice at once redeems the coupon once.
      if (options.retentionOffer === true && row.discount !== null)
        throw new ConflictError('coupon_not_redeemable', 'This plan has a discount already');
      // Measured against the plan as bought: its price for a period and setup fee.
      const plan = await findPlan(tx, auth, row.plan_id);
      if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${row.plan_id}`);
      const target = redemptionTarget(row.customer_id, row.product_id, settingsOf(plan));
      const discount = await this.coupons.redeem(tx, auth, coupon, target);
      await setDiscount(tx, row.id, discount);
      await this.announce(tx, auth, row, discount);
      if (options.retentionOffer === true)
        await recordRetentionSave(tx, auth, {
          purchaseId: row.id,
          productId: row.product_id,
          couponId: discount.coupon,
          at: this.clock.now(),
        });
      return toPurchase({ ...row, discount });
    });
  }

  /** DELETE /v1/sdk/purchases/:ref/discount: its next invoices are charged in full. */
  async remove(auth: AuthContext, ref: string) {
    return inTransaction(this.pool, async (tx) => {
      const row = await findPurchase(tx, auth, ref, true);
      if (row === undefined) throw new NotFoundError('purchase_not_found', `No purchase ${ref}`);
      if (row.discount !== null) {
        await setDiscount(tx, row.id, null);
        await this.announce(tx, auth, row, null);
      }
      return toPurchase({ ...row, discount: null });
    });
  }

  /** purchase.updated, with the discount it had as the previous attribute. */
  private async announce(tx: PoolClient, auth: AuthContext, row: PurchaseRow, discount: Discount | null) {
    await writeEvent(tx, {
      ...auth,
      type: 'purchase.updated',
      object: eventObject({ ...row, discount }),
      previousAttributes: { discount: row.discount === null ? null : toDiscount(row.discount) },
      at: this.clock.now(),
    });
  }

  private async billable(tx: PoolClient, auth: AuthContext, ref: string): Promise<PurchaseRow> {
    const row = await findPurchase(tx, auth, ref, true);
    if (row === undefined) throw new NotFoundError('purchase_not_found', `No purchase ${ref}`);
    if (!BILLABLE.has(row.status))
      throw new ConflictError(
        'invalid_transition',
        `Purchase ${row.id} is ${row.status}: it has no invoices to come`,
      );
    return row;
  }
}
