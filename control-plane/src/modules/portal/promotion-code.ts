import type { Pool } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { CouponService, RedemptionTarget } from '../coupons/service';
import { giveBackCodeAttempt, takeCodeAttempt } from './repository';

/** Codes that match no coupon a portal session may try before its guessing ends. */
export const MAX_PORTAL_CODE_ATTEMPTS = 10;

/** What a promotion code may be: a coupon's code is 3–40 letters, digits, `-` and `_`. */
const CODE_FORM = /^[A-Za-z0-9_-]{3,40}$/;

/**
 * A promotion code a customer typed in the portal, as the coupon it names: its id and its code as
 * the provider wrote it (docs/coupons.md). Codes
 * only, never coupon ids; a product must take codes in its portal (`portalPromotionCodes`). Each
 * lookup takes one of the session's ten attempts first and gives it back when the code names a
 * coupon (fitting or not), so
 * only codes that match nothing use them up, also when many are sent at once (then 429
 * `too_many_attempts`). 404 `coupon_not_found`; 409 `coupon_not_redeemable` with why.
 */
export async function portalCoupon(
  pool: Pool,
  coupons: Pick<CouponService, 'checkCode'>,
  session: { id: string },
  auth: AuthContext,
  product: { portal_promotion_codes: boolean },
  code: string,
  target: RedemptionTarget,
): Promise<{ id: string; code: string }> {
  if (!product.portal_promotion_codes)
    throw new ConflictError('promotion_codes_not_allowed', 'This plan change does not take promotion codes');
  if (!(await takeCodeAttempt(pool, session.id, MAX_PORTAL_CODE_ATTEMPTS)))
    throw new DomainError(
      'too_many_attempts',
      'Too many promotion codes were tried; sign in again to try more',
    );
  let coupon: Awaited<ReturnType<typeof coupons.checkCode>>;
  try {
    coupon = CODE_FORM.test(code) ? await coupons.checkCode(pool, auth, code, target) : undefined;
  } catch (error) {
    // A coupon's code that does not fit this change (409, with why) was no guess either.
    if (error instanceof DomainError && error.code === 'coupon_not_redeemable')
      await giveBackCodeAttempt(pool, session.id);
    throw error;
  }
  if (coupon === undefined) throw new NotFoundError('coupon_not_found', `No promotion code ${code}`);
  await giveBackCodeAttempt(pool, session.id);
  // As the provider wrote it, however the customer typed it.
  return { id: coupon.id, code: coupon.code ?? code };
}
