import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient, type Queryable, transactionOn } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { applyDiscount } from '../billing/discounts';
import { findCoupon } from '../coupons/repository';
import { discountOf } from '../coupons/service';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findPlan, settingsOf } from '../plans/repository';
import { isCurrency } from '../plans/rules';
import { findProduct } from '../products/repository';
import { getProvider } from '../providers/repository';
import { firstCharges } from '../purchases/changes';
import { findSession, insertSession, type SessionRow } from './repository';

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
  /** A coupon for the plan, already checked by the activation that offers the session. */
  couponId?: string | undefined;
}

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
      amount: r.amount,
      currency: r.currency,
      customer: r.customer_id,
      product: r.product_id,
      plan: r.plan_id,
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
      currency: r.currency,
      successUrl: r.success_url,
      cancelUrl: r.cancel_url,
      purchaseRef: r.purchase_id,
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
    if ([input.planRef !== undefined, input.topup !== undefined, setup].filter(Boolean).length !== 1)
      throw problem('/planRef', 'send one of planRef, topup or setup: true');
    const customer = await findCustomer(db, auth, input.customerRef);
    if (customer === undefined)
      throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
    const id = newId(ID.checkoutSession);
    const at = this.clock.now();
    let fields: Pick<SessionRow, 'kind' | 'plan_id' | 'product_id' | 'topup_credits' | 'amount' | 'currency'>;
    if (input.planRef !== undefined) {
      const plan = await findPlan(db, auth, input.planRef);
      if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${input.planRef}`);
      const product = await findProduct(db, auth, plan.product_id);
      if (plan.status !== 'active' || product?.status !== 'active')
        throw problem('/planRef', 'the plan is not on sale');
      const s = settingsOf(plan);
      const coupon = input.couponId === undefined ? undefined : await findCoupon(db, auth, input.couponId);
      // The first invoice as it will be: its charges, less the coupon's discount.
      const charges = firstCharges(s, at);
      const lines = coupon === undefined ? charges : applyDiscount(charges, discountOf(coupon, at));
      const dueNow = s.trialDays > 0 ? 0 : lines.reduce((sum, line) => sum + line.amount, 0);
      fields = {
        kind: 'plan',
        plan_id: plan.id,
        product_id: plan.product_id,
        topup_credits: null,
        amount: dueNow,
        currency: s.currency,
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
      fields = {
        kind: 'topup',
        plan_id: null,
        product_id: null,
        topup_credits: topup.credits,
        amount: topup.amount,
        currency,
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
      coupon_id: input.couponId ?? null,
    };
    const write = async (tx: PoolClient) => {
      await insertSession(tx, row);
      await writeEvent(tx, { ...auth, type: 'checkout_session.created', object: this.eventObject(row), at });
    };
    await (on === undefined ? inTransaction(this.pool, write) : transactionOn(on, write));
    return this.toApi(row);
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
