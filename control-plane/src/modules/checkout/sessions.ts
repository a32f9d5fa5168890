import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, type Queryable, transactionOn } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { applyDiscount } from '../billing/discounts';
import { type CouponRow, releaseRedemption } from '../coupons/repository';
import { type CouponService, discountOf, type RedemptionTarget, redemptionTarget } from '../coupons/service';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findPlan, settingsOf } from '../plans/repository';
import { isCurrency, type PlanSettings } from '../plans/rules';
import { findProduct } from '../products/repository';
import { getProvider } from '../providers/repository';
import { firstCharges } from '../purchases/changes';
import {
  countCodeFailure,
  findSession,
  insertSession,
  type SessionRow,
  setSessionCoupon,
} from './repository';

/** Codes matching no coupon that one session's page may try before it stops taking them. */
const MAX_CODE_FAILURES = 10;

export type { SessionRow };

export interface CheckoutInput {
  customerRef: string;
  planRef?: string | undefined;
  topup?: { credits: number; amount: number; currency?: string | undefined } | undefined;
  /** Collects a card alone (Stripe Checkout's setup mode): nothing is charged. */
  setup?: boolean | undefined;
  successUrl?: string | undefined;
  cancelUrl?: string | undefined;
  expiresInMinutes?: number | undefined;
  /** A coupon (id or code) the session applies to the plan: checked now, redeemed when paid. */
  coupon?: string | undefined;
  /** The hosted page offers a field for the customer's promotion code (plan and top-up sessions). */
  allowPromotionCodes?: boolean | undefined;
  /** `required`: the customer gives a billing address, saved on them when paid (Stripe's name). */
  billingAddressCollection?: 'auto' | 'required' | undefined;
  /** The customer may give a tax id, saved on them when paid (Stripe's tax_id_collection). */
  taxIdCollection?: { enabled: boolean; required?: 'never' | 'if_supported' | undefined } | undefined;
}

/**
 * What a plan checkout charges now: nothing for a trial, else the first invoice's charges (the
 * first period's price and the setup fee) less the coupon's discount, as the activation will
 * charge them when the session is paid.
 */
export function planDueNow(settings: PlanSettings, coupon: CouponRow | undefined, at: Date): number {
  if (settings.trialDays > 0) return 0;
  const charges = firstCharges(settings, at);
  const lines = coupon === undefined ? charges : applyDiscount(charges, discountOf(coupon, at));
  return lines.reduce((sum, line) => sum + line.amount, 0);
}

/**
 * What a top-up checkout charges now: its price less the coupon's discount, taken once (a
 * top-up is one payment, whatever the coupon's duration), rounded as invoice lines are.
 */
export function topupDueNow(price: number, coupon: CouponRow | undefined, at: Date): number {
  if (coupon === undefined) return price;
  const line = {
    kind: 'base' as const,
    description: '',
    quantity: 1,
    unitAmount: `${price}`,
    amount: price,
    period: null,
  };
  return applyDiscount([line], discountOf(coupon, at)).reduce((sum, each) => sum + each.amount, 0);
}

/** A top-up as a coupon is redeemed on it: of no product, measured by its price. */
export const topupTarget = (
  row: Pick<SessionRow, 'customer_id' | 'currency' | 'amount' | 'amount_subtotal'>,
) => ({
  customerId: row.customer_id,
  productId: null,
  currency: row.currency,
  subtotal: row.amount_subtotal ?? row.amount,
});

/** What the session's coupon takes off what is due now; null where the subtotal is not known. */
const discountOfSession = (r: Pick<SessionRow, 'amount' | 'amount_subtotal'>) =>
  r.amount_subtotal === null ? null : r.amount_subtotal - r.amount;

/**
 * Checkout sessions as records: created for a plan purchase or a credit top-up, read back and
 * shown through the API. Paying one is the CheckoutService's; purchases and the paywall create
 * them through here, so neither depends on the other.
 */
export class CheckoutSessions {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    /** Where the hosted pages (checkout, the customer portal) are served. */
    readonly publicUrl: string,
    private readonly coupons: Pick<CouponService, 'check' | 'checkCode' | 'redeem'>,
  ) {}

  urlOf(id: string): string {
    return this.url(id);
  }

  url(id: string): string {
    return `${this.publicUrl}/checkout/${id}`;
  }

  eventObject(r: SessionRow) {
    return {
      id: r.id,
      session_id: r.id,
      url: this.url(r.id),
      status: r.status,
      kind: r.kind,
      amount: r.amount,
      amount_subtotal: r.amount_subtotal,
      amount_discount: discountOfSession(r),
      currency: r.currency,
      customer: r.customer_id,
      product: r.product_id,
      plan: r.plan_id,
      credits: r.topup_credits,
      coupon: r.coupon_id,
      expires_at: unixSeconds(r.expires_at),
      created: unixSeconds(r.created_at),
    };
  }

  toApi(r: SessionRow) {
    return {
      id: r.id,
      url: this.url(r.id),
      status: r.status,
      kind: r.kind,
      customerRef: r.customer_id,
      planRef: r.plan_id,
      productId: r.product_id,
      credits: r.topup_credits,
      amount: r.amount,
      amountSubtotal: r.amount_subtotal,
      amountDiscount: discountOfSession(r),
      currency: r.currency,
      successUrl: r.success_url,
      cancelUrl: r.cancel_url,
      purchaseRef: r.purchase_id,
      coupon: r.coupon_id,
      allowPromotionCodes: r.allow_promotion_codes,
      billingAddressCollection: r.billing_address_collection,
      taxIdCollection: {
        enabled: r.tax_id_collection,
        required: r.tax_id_required ? ('if_supported' as const) : ('never' as const),
      },
      expiresAt: r.expires_at.toISOString(),
      createdAt: r.created_at.toISOString(),
    };
  }

  /**
   * `on`: a connection the caller holds (the paywall's, under its advisory lock); every query of
   * the creation then runs on it, none waits for another connection from the pool.
   */
  /** A session for `input`; `source` says who offers it (the paywall's are its funnel). */
  async create(
    auth: AuthContext,
    input: CheckoutInput,
    on?: PoolClient,
    source: SessionRow['source'] = 'api',
  ) {
    const db: Queryable = on ?? this.pool;
    const problem = (path: string, message: string) =>
      new ValidationError([{ path, message, location: 'body' }]);
    const setup = input.setup === true;
    if (input.taxIdCollection?.required === 'if_supported' && input.taxIdCollection.enabled !== true)
      throw problem('/taxIdCollection/required', 'needs enabled: true');
    if (setup && (input.coupon !== undefined || input.allowPromotionCodes === true))
      throw problem(
        input.coupon !== undefined ? '/coupon' : '/allowPromotionCodes',
        'applies to a plan or top-up checkout only',
      );
    let couponId: string | null = null;
    if ([input.planRef !== undefined, input.topup !== undefined, setup].filter(Boolean).length !== 1)
      throw problem('/planRef', 'send one of planRef, topup or setup: true');
    const customer = await findCustomer(db, auth, input.customerRef);
    if (customer === undefined)
      throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
    const id = newId(ID.checkoutSession);
    const at = this.clock.now();
    let fields: Pick<
      SessionRow,
      'kind' | 'plan_id' | 'product_id' | 'topup_credits' | 'amount' | 'currency' | 'amount_subtotal'
    >;
    if (input.planRef !== undefined) {
      const plan = await findPlan(db, auth, input.planRef);
      if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${input.planRef}`);
      const product = await findProduct(db, auth, plan.product_id);
      if (plan.status !== 'active' || product?.status !== 'active')
        throw problem('/planRef', 'the plan is not on sale');
      const s = settingsOf(plan);
      const target = redemptionTarget(customer.id, plan.product_id, s);
      const coupon =
        input.coupon === undefined ? undefined : await this.coupons.check(db, auth, input.coupon, target);
      const dueNow = planDueNow(s, coupon, at);
      couponId = coupon?.id ?? null;
      fields = {
        kind: 'plan',
        plan_id: plan.id,
        product_id: plan.product_id,
        topup_credits: null,
        amount: dueNow,
        currency: s.currency,
        amount_subtotal: planDueNow(s, undefined, at),
      };
    } else if (setup) {
      const merchant = await getProvider(db, auth.providerId);
      fields = {
        kind: 'setup',
        plan_id: null,
        product_id: null,
        topup_credits: null,
        amount: 0,
        currency: merchant?.defaultCurrency ?? 'usd',
        amount_subtotal: 0,
      };
    } else {
      const topup = input.topup;
      if (topup === undefined) throw problem('/topup', 'is required');
      const merchant = await getProvider(db, auth.providerId);
      const currency = (topup.currency ?? merchant?.defaultCurrency ?? 'usd').toLowerCase();
      if (!isCurrency(currency)) throw problem('/topup/currency', 'is not an ISO 4217 code');
      const allowed = merchant?.supportedTopupCurrencies;
      if (allowed !== null && allowed !== undefined && allowed.length > 0 && !allowed.includes(currency)) {
        throw problem('/topup/currency', `top-ups are accepted in ${allowed.join(', ')}`);
      }
      const target = topupTarget({
        customer_id: customer.id,
        currency,
        amount: topup.amount,
        amount_subtotal: topup.amount,
      });
      const coupon =
        input.coupon === undefined ? undefined : await this.coupons.check(db, auth, input.coupon, target);
      couponId = coupon?.id ?? null;
      fields = {
        kind: 'topup',
        plan_id: null,
        product_id: null,
        topup_credits: topup.credits,
        amount: topupDueNow(topup.amount, coupon, at),
        currency,
        amount_subtotal: topup.amount,
      };
    }
    const row: SessionRow = {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: customer.id,
      ...fields,
      status: 'active',
      success_url: input.successUrl ?? `${this.url(id)}/complete`,
      cancel_url: input.cancelUrl ?? null,
      purchase_id: null,
      expires_at: new Date(at.getTime() + (input.expiresInMinutes ?? 60) * 60_000),
      completed_at: null,
      created_at: at,
      source,
      opened_at: null,
      coupon_id: couponId,
      allow_promotion_codes: !setup && input.allowPromotionCodes === true,
      promotion_code_failures: 0,
      billing_address_collection: input.billingAddressCollection ?? 'auto',
      tax_id_collection: input.taxIdCollection?.enabled === true,
      tax_id_required: input.taxIdCollection?.required === 'if_supported',
    };
    const write = async (tx: PoolClient) => {
      await insertSession(tx, row);
      await writeEvent(tx, { ...auth, type: 'checkout_session.created', object: this.eventObject(row), at });
    };
    await (on === undefined ? inTransaction(this.pool, write) : transactionOn(on, write));
    return this.toApi(row);
  }

  /**
   * A promotion code typed on the hosted page (`null` takes it off): the session's coupon and the
   * amount due change together, unless a payer holds the session. Codes only, never coupon ids.
   * Ten codes that match no coupon end the guessing on that session (429 `too_many_attempts`).
   */
  async promotionCode(id: string, code: string | null): Promise<{ amount: number; currency: string }> {
    const row = await this.load(id);
    const at = this.clock.now();
    if (row.status !== 'active' || row.expires_at <= at)
      throw new ConflictError('checkout_session_closed', 'This checkout session was closed');
    if (row.kind === 'setup' || !row.allow_promotion_codes)
      throw new ConflictError('promotion_codes_not_allowed', 'This checkout does not take promotion codes');
    if (row.promotion_code_failures >= MAX_CODE_FAILURES)
      throw new DomainError('too_many_attempts', 'Too many codes were tried on this checkout');
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    // What the code is checked against, and what is due with it (or without, for null).
    let target: RedemptionTarget = topupTarget(row);
    let due = (coupon: CouponRow | undefined) => topupDueNow(row.amount_subtotal ?? row.amount, coupon, at);
    if (row.kind === 'plan') {
      const plan = row.plan_id === null ? undefined : await findPlan(this.pool, auth, row.plan_id);
      if (plan === undefined)
        throw new ConflictError('checkout_session_closed', 'This plan is no longer on sale');
      const settings = settingsOf(plan);
      target = redemptionTarget(row.customer_id, plan.product_id, settings);
      due = (coupon) => planDueNow(settings, coupon, at);
    }
    let coupon: CouponRow | undefined;
    if (code !== null) {
      coupon = await this.coupons.checkCode(this.pool, auth, code, target);
      if (coupon === undefined) {
        await countCodeFailure(this.pool, id);
        throw new NotFoundError('coupon_not_found', `No promotion code ${code}`);
      }
    }
    const amount = due(coupon);
    const subtotal = due(undefined);
    const changed = await setSessionCoupon(
      this.pool,
      id,
      { couponId: coupon?.id ?? null, amount, subtotal },
      at,
    );
    if (changed === undefined)
      throw new ConflictError('checkout_session_in_progress', 'This checkout is being paid or was closed');
    return { amount, currency: changed.currency };
  }

  /**
   * Redeems the coupon a top-up session applies, in its payment's transaction, before the charge
   * (404/409 as any redemption, and nothing is charged); `release` gives it back should the
   * charge fail. A plan session's coupon is redeemed by the activation its payment makes.
   */
  async redeemTopupCoupon(tx: PoolClient, auth: AuthContext, row: SessionRow) {
    if (row.kind !== 'topup' || row.coupon_id === null) return { release: async () => {} };
    const coupon = row.coupon_id;
    await this.coupons.redeem(tx, auth, coupon, topupTarget(row));
    return { release: () => releaseRedemption(tx, coupon) };
  }

  async load(id: string): Promise<SessionRow> {
    const row = await findSession(this.pool, id);
    if (row === undefined) throw new NotFoundError('checkout_session_not_found', `No checkout session ${id}`);
    return row;
  }

  async get(auth: AuthContext, id: string) {
    const row = await this.load(id);
    if (row.provider_id !== auth.providerId || row.environment !== auth.environment) {
      throw new NotFoundError('checkout_session_not_found', `No checkout session ${id}`);
    }
    return this.toApi(row);
  }
}
