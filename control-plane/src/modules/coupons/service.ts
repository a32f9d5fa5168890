import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import { ConflictError, type FieldProblem, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { addMonths, type Discount } from '../billing/discounts';
import { formatMoney } from '../checkout/page';
import { findCustomer } from '../customers/repository';
import { writeEvent } from '../events/outbox';
import { isCurrency, type PlanSettings, recurringAmount } from '../plans/rules';
import {
  archiveCoupon,
  type CouponRow,
  existingProducts,
  findCoupon,
  findCouponByCode,
  hasPaid,
  insertCoupon,
  listCoupons,
  redeemCoupon,
  updateCoupon,
} from './repository';
import type { Coupon, CouponCreate, CouponListQuery, CouponUpdate } from './schemas';

/** Why a coupon cannot be redeemed now, or null when it can. */
function unredeemable(row: CouponRow, at: Date): string | null {
  if (row.status !== 'active') return 'it is archived';
  if (row.redeem_by !== null && row.redeem_by <= at)
    return `it could be redeemed until ${row.redeem_by.toISOString()}`;
  if (row.max_redemptions !== null && row.times_redeemed >= row.max_redemptions)
    return `it was redeemed ${row.times_redeemed} times, its maximum`;
  return null;
}

export const toCoupon = (row: CouponRow, at: Date): Static<typeof Coupon> => ({
  id: row.id,
  name: row.name,
  code: row.code,
  percentOff: row.percent_off_bps === null ? null : row.percent_off_bps / 100,
  amountOff: row.amount_off,
  currency: row.currency,
  duration: row.duration,
  durationInMonths: row.duration_in_months,
  maxRedemptions: row.max_redemptions,
  timesRedeemed: row.times_redeemed,
  redeemBy: row.redeem_by?.toISOString() ?? null,
  productIds: row.product_ids,
  firstTimeOnly: row.first_time_only,
  minimumAmount: row.minimum_amount,
  minimumAmountCurrency: row.minimum_amount_currency,
  customerRef: row.customer_id,
  metadata: row.metadata,
  status: row.status,
  valid: unredeemable(row, at) === null,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/** A purchase's discount as the API shows it. */
export const toDiscount = (d: Discount) => ({
  coupon: d.coupon,
  name: d.name,
  code: d.code,
  percentOff: d.percentOffBps === null ? null : d.percentOffBps / 100,
  amountOff: d.amountOff,
  currency: d.currency,
  duration: d.duration,
  durationInMonths: d.durationInMonths,
  start: d.start,
  end: d.end,
});

/** What a coupon is being redeemed on: a purchase's or a top-up's customer, product, currency and amount. */
export interface RedemptionTarget {
  customerId: string;
  /** The plan's product; null for a credit top-up, which is of no product. */
  productId: string | null;
  currency: string;
  /** Its price for a period plus its setup fee, before any discount (a minimum amount's measure). */
  subtotal: number;
}

/**
 * The purchase of a plan as a coupon is redeemed on it. The subtotal is what its first invoice
 * charges before discounts, trials and credits for a replaced plan's unused time: a coupon's
 * minimum is a property of what is bought, the same whenever and however it is paid.
 */
export function redemptionTarget(
  customerId: string,
  productId: string,
  settings: PlanSettings,
): RedemptionTarget {
  return {
    customerId,
    productId,
    currency: settings.currency,
    subtotal: recurringAmount(settings) + settings.setupFee,
  };
}

/**
 * Coupons (docs/coupons.md): a provider's offers of a percentage or an amount off a purchase's
 * invoices, redeemed by id through the API or by code at checkout. A coupon's terms never change
 * after creation (its name may); archiving stops redemptions and frees its code, and leaves the
 * discounts already given as they are.
 */
export class CouponService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async create(auth: AuthContext, body: Static<typeof CouponCreate>) {
    const now = this.clock.now();
    const problems: FieldProblem[] = [];
    const add = (path: string, message: string) => problems.push({ path, message, location: 'body' });
    if ((body.percentOff === undefined) === (body.amountOff === undefined))
      add('/percentOff', 'give either percentOff or amountOff');
    if (body.amountOff !== undefined && body.currency === undefined)
      add('/currency', 'is required with amountOff');
    if (body.amountOff === undefined && body.currency !== undefined)
      add('/currency', 'goes with amountOff only');
    if (body.currency !== undefined && !isCurrency(body.currency))
      add('/currency', `"${body.currency}" is not an ISO 4217 currency code`);
    if ((body.minimumAmount === undefined) !== (body.minimumAmountCurrency === undefined))
      add('/minimumAmountCurrency', 'goes with minimumAmount, and minimumAmount with it');
    const minimumCurrency = body.minimumAmountCurrency?.toLowerCase() ?? null;
    if (minimumCurrency !== null && !isCurrency(minimumCurrency))
      add('/minimumAmountCurrency', `"${body.minimumAmountCurrency}" is not an ISO 4217 currency code`);
    else if (
      minimumCurrency !== null &&
      body.currency !== undefined &&
      body.currency.toLowerCase() !== minimumCurrency
    )
      add('/minimumAmountCurrency', 'must be the currency of amountOff');
    if ((body.duration === 'repeating') !== (body.durationInMonths !== undefined))
      add('/durationInMonths', 'is required with duration repeating, and only with it');
    const bps = body.percentOff === undefined ? null : Math.round(body.percentOff * 100);
    if (bps !== null && (Math.abs(bps - (body.percentOff ?? 0) * 100) > 1e-6 || bps < 1 || bps > 10_000))
      add('/percentOff', 'must be more than 0 and at most 100, with at most two decimals');
    const redeemBy = body.redeemBy === undefined ? null : new Date(body.redeemBy);
    if (redeemBy !== null && !(redeemBy > now)) add('/redeemBy', 'must be in the future');
    if (body.name.trim() === '' || /\p{Cc}/u.test(body.name))
      add('/name', 'must be text without control characters');
    const productIds = body.productIds ?? [];
    if (productIds.length > 0) {
      const known = await existingProducts(this.pool, auth, productIds);
      productIds.forEach((id, i) => {
        if (!known.has(id)) add(`/productIds/${i}`, `no product ${id}`);
      });
    }
    const customer =
      body.customerRef === undefined ? undefined : await findCustomer(this.pool, auth, body.customerRef);
    if (body.customerRef !== undefined && customer === undefined)
      add('/customerRef', `no customer ${body.customerRef}`);
    if (problems.length > 0) throw new ValidationError(problems);
    const row = await inTransaction(this.pool, async (tx) => {
      const inserted = await insertCoupon(tx, {
        id: newId(ID.coupon),
        provider_id: auth.providerId,
        environment: auth.environment,
        name: body.name,
        code: body.code ?? null,
        percent_off_bps: bps,
        amount_off: body.amountOff ?? null,
        currency: body.currency?.toLowerCase() ?? null,
        duration: body.duration,
        duration_in_months: body.durationInMonths ?? null,
        max_redemptions: body.maxRedemptions ?? null,
        times_redeemed: 0,
        redeem_by: redeemBy,
        product_ids: productIds,
        first_time_only: body.firstTimeOnly ?? false,
        minimum_amount: body.minimumAmount ?? null,
        minimum_amount_currency: minimumCurrency,
        customer_id: customer?.id ?? null,
        metadata: body.metadata ?? {},
        status: 'active',
        created_at: now,
        updated_at: now,
      });
      if (inserted !== undefined)
        await writeEvent(tx, { ...auth, type: 'coupon.created', object: toCoupon(inserted, now), at: now });
      return inserted;
    });
    if (row === undefined)
      throw new ConflictError('coupon_code_taken', `An active coupon has the code ${body.code} already`);
    return toCoupon(row, now);
  }

  async get(auth: AuthContext, ref: string) {
    return toCoupon(await this.find(this.pool, auth, ref), this.clock.now());
  }

  async list(auth: AuthContext, query: Static<typeof CouponListQuery>) {
    const rows = await listCoupons(this.pool, auth, {
      after: decodeCursor(query.cursor),
      limit: query.limit + 1,
      status: query.status,
      code: query.code,
    });
    const now = this.clock.now();
    return toPage(rows, query.limit, (row) => toCoupon(row, now));
  }

  /** Changes a coupon's name or metadata (only what is sent); its terms never change. */
  async update(auth: AuthContext, id: string, patch: Static<typeof CouponUpdate>) {
    const name = patch.name;
    if (name !== undefined && (name.trim() === '' || /\p{Cc}/u.test(name)))
      throw new ValidationError([
        { path: '/name', message: 'must be text without control characters', location: 'body' },
      ]);
    const now = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const before = await findCoupon(tx, auth, id);
      if (before?.id !== id) throw new NotFoundError('coupon_not_found', `No coupon ${id}`);
      const change = { name: name ?? before.name, metadata: patch.metadata ?? before.metadata };
      const row = await updateCoupon(tx, auth, id, change, now);
      if (row === undefined) throw new NotFoundError('coupon_not_found', `No coupon ${id}`);
      const previous: Record<string, unknown> = {};
      if (before.name !== row.name) previous.name = before.name;
      if (JSON.stringify(before.metadata) !== JSON.stringify(row.metadata))
        previous.metadata = before.metadata;
      if (Object.keys(previous).length > 0)
        await writeEvent(tx, {
          ...auth,
          type: 'coupon.updated',
          object: toCoupon(row, now),
          previousAttributes: previous,
          at: now,
        });
      return toCoupon(row, now);
    });
  }

  async archive(auth: AuthContext, id: string) {
    const now = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      // The guarded UPDATE archives once: a second archive finds it archived and announces nothing.
      const row = await archiveCoupon(tx, auth, id, now);
      if (row !== undefined) {
        await writeEvent(tx, {
          ...auth,
          type: 'coupon.archived',
          object: toCoupon(row, now),
          previousAttributes: { status: 'active' },
          at: now,
        });
        return toCoupon(row, now);
      }
      const current = await findCoupon(tx, auth, id);
      if (current?.id !== id) throw new NotFoundError('coupon_not_found', `No coupon ${id}`);
      return toCoupon(current, now);
    });
  }

  /**
   * Checks that the coupon `ref` (id or code) could be redeemed on `target` now, without
   * redeeming it: what checkout shows before the customer pays. Throws the reason otherwise.
   */
  async check(db: Queryable, auth: AuthContext, ref: string, target: RedemptionTarget): Promise<CouponRow> {
    const row = await this.find(db, auth, ref);
    const why = unredeemable(row, this.clock.now()) ?? (await mismatch(db, row, target));
    if (why !== null)
      throw new ConflictError('coupon_not_redeemable', `Coupon ${row.id} cannot be redeemed: ${why}`);
    return row;
  }

  /**
   * The coupon of a code a customer typed (on the hosted checkout page), checked for `target`:
   * codes only, never ids, so an id-only coupon cannot be guessed into. Undefined when no
   * active coupon has the code; 409 `coupon_not_redeemable` when it cannot be used here.
   */
  async checkCode(
    db: Queryable,
    auth: AuthContext,
    code: string,
    target: RedemptionTarget,
  ): Promise<CouponRow | undefined> {
    const row = await findCouponByCode(db, auth, code);
    if (row === undefined) return undefined;
    const why = unredeemable(row, this.clock.now()) ?? (await mismatch(db, row, target));
    if (why !== null)
      throw new ConflictError('coupon_not_redeemable', `The code ${code} cannot be used: ${why}`);
    return row;
  }

  /**
   * Redeems the coupon `ref` (id or code) for a purchase of `target`, in the caller's
   * transaction (undone with it): counts the redemption under the coupon's guard and answers the
   * discount to keep on the purchase. 404 `coupon_not_found`, 409 `coupon_not_redeemable`.
   */
  async redeem(db: Queryable, auth: AuthContext, ref: string, target: RedemptionTarget): Promise<Discount> {
    const found = await this.find(db, auth, ref);
    const now = this.clock.now();
    const wrong = await mismatch(db, found, target);
    const row = wrong === null ? await redeemCoupon(db, found.id, now) : undefined;
    if (row === undefined) {
      const current = (await findCoupon(db, auth, found.id)) ?? found;
      const why = wrong ?? unredeemable(current, now) ?? 'it was redeemed meanwhile';
      throw new ConflictError('coupon_not_redeemable', `Coupon ${found.id} cannot be redeemed: ${why}`);
    }
    return discountOf(row, now);
  }

  private async find(db: Queryable, auth: AuthContext, ref: string): Promise<CouponRow> {
    const row = await findCoupon(db, auth, ref);
    if (row === undefined) throw new NotFoundError('coupon_not_found', `No coupon ${ref}`);
    return row;
  }
}

/**
 * Why a coupon does not fit a purchase's (or top-up's) customer, product, currency or amount
 * (a coupon may be for one customer, for some products, from a minimum; first-time-only coupons
 * are for customers who never paid), or null. Redeemed in an activation, the customer's row is
 * locked, so a first payment cannot slip in between this check and the redemption.
 */
async function mismatch(db: Queryable, row: CouponRow, target: RedemptionTarget): Promise<string | null> {
  if (row.customer_id !== null && row.customer_id !== target.customerId) return 'it is for another customer';
  if (row.product_ids.length > 0 && target.productId === null)
    return "it applies to some products' plans, not to credit top-ups";
  if (row.product_ids.length > 0 && !row.product_ids.includes(target.productId ?? ''))
    return `it applies to other products than ${target.productId}`;
  if (row.currency !== null && row.currency !== target.currency.toLowerCase())
    return `it takes ${row.currency.toUpperCase()} off, and the ${target.productId === null ? 'top-up' : 'plan'} is in ${target.currency.toUpperCase()}`;
  const minimum = row.minimum_amount;
  if (minimum !== null && row.minimum_amount_currency !== target.currency.toLowerCase())
    return `it needs a purchase in ${row.minimum_amount_currency?.toUpperCase()} of at least ${formatMoney(minimum, row.minimum_amount_currency ?? '')}`;
  if (minimum !== null && target.subtotal < minimum)
    return `it needs a purchase of at least ${formatMoney(minimum, target.currency)}, and this one comes to ${formatMoney(target.subtotal, target.currency)}`;
  if (row.first_time_only && (await hasPaid(db, target.customerId)))
    return 'it is for first-time customers, and this customer has paid before';
  return null;
}

/** The discount a redemption of `row` at `at` gives. */
export function discountOf(row: CouponRow, at: Date): Discount {
  return {
    coupon: row.id,
    name: row.name,
    code: row.code,
    percentOffBps: row.percent_off_bps,
    amountOff: row.amount_off,
    currency: row.currency,
    duration: row.duration,
    durationInMonths: row.duration_in_months,
    start: at.toISOString(),
    end:
      row.duration === 'repeating' && row.duration_in_months !== null
        ? addMonths(at, row.duration_in_months).toISOString()
        : null,
  };
}
