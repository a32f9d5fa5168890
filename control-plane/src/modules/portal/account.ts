import type { Pool } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { ALERT_KINDS, type AlertKind } from '../alerts/repository';
import type { AlertService } from '../alerts/service';
import type { BillingService } from '../billing/service';
import { formatMoney } from '../checkout/page';
import { couponWords, planPriceLines } from '../checkout/price-words';
import type { CheckoutSessions } from '../checkout/sessions';
import { type CouponService, redemptionTarget } from '../coupons/service';
import type { PaymentService } from '../payments/service';
import { findPlan, type PlanRow, plansOnSale, settingsOf } from '../plans/repository';
import { findProduct } from '../products/repository';
import type { CancellationInput } from '../purchases/cancellation';
import type { PurchaseService } from '../purchases/service';
import type { ChangeView } from './plan-pages';
import { portalCoupon } from './promotion-code';
import type { PortalService } from './service';

type Form = { csrf?: string | undefined };

const tenantOf = (session: { provider_id: string; environment: 'sandbox' | 'live' }): AuthContext => ({
  providerId: session.provider_id,
  environment: session.environment,
});

/** Why a typed promotion code was not taken: shown beside the code field, the preview without it. */
const CODE_REFUSALS = new Set([
  'coupon_not_found',
  'coupon_not_redeemable',
  'too_many_attempts',
  'promotion_codes_not_allowed',
]);

/** A purchase the customer may change: in force and recurring. */
const CHANGEABLE = ['trialing', 'active', 'past_due'];

/**
 * What a signed-in customer changes about how they pay (docs/portal.md): their cards, their plan
 * (with the proration previewed and then charged exactly), and cancelling now with the unused
 * time refunded. Every action goes through the services the API answers with, in the customer's
 * own tenant, and only on the customer's own purchases and cards; each form proves its CSRF token.
 */
export class PortalAccount {
  constructor(
    private readonly pool: Pool,
    private readonly publicUrl: string,
    private readonly portal: Pick<PortalService, 'signedIn' | 'proven' | 'merchant' | 'currencyOf'>,
    private readonly deps: {
      payments: Pick<PaymentService, 'makeDefault' | 'removeMethod' | 'hasDefaultMethod'>;
      purchases: PurchaseService;
      checkoutSessions: CheckoutSessions;
      alerts: Pick<AlertService, 'create' | 'list' | 'remove'>;
      billing: Pick<BillingService, 'get' | 'pay'>;
      coupons: Pick<CouponService, 'checkCode' | 'check'>;
    },
  ) {}

  /**
   * Pays one of the customer's own open invoices now with their default card (after a new card,
   * say): the API's payment on request, apart from the dunning schedule. Another customer's
   * invoice is as absent as an unknown one; a declined card shows the portal with why (402).
   */
  async payInvoice(secret: string | undefined, form: Form & { id: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const invoice = await this.deps.billing.get(auth, form.id);
    if (invoice.customerRef !== session.customer_id)
      throw new NotFoundError('invoice_not_found', `No invoice ${form.id}`);
    await this.deps.billing.pay(auth, invoice.id);
    return 'paid' as const;
  }

  /** A hosted checkout that saves a card as the default, charging nothing; answers its URL. */
  async addCard(secret: string | undefined, form: Form): Promise<string | undefined> {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const checkout = await this.deps.checkoutSessions.create(tenantOf(session), {
      customerRef: session.customer_id,
      setup: true,
      successUrl: `${this.publicUrl}/portal?done=card`,
      cancelUrl: `${this.publicUrl}/portal`,
    });
    return checkout.url;
  }

  async makeDefaultCard(secret: string | undefined, form: Form & { id: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    await this.deps.payments.makeDefault(tenantOf(session), session.customer_id, form.id);
    return 'default' as const;
  }

  async removeCard(secret: string | undefined, form: Form & { id: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    await this.deps.payments.removeMethod(tenantOf(session), session.customer_id, form.id);
    return 'removed' as const;
  }

  /** One of the customer's own purchases in force; any other is as absent as an unknown one. */
  private async ownPurchase(auth: AuthContext, customerId: string, ref: string) {
    const purchase = await this.deps.purchases.get(auth, ref);
    if (purchase.customerRef !== customerId || !CHANGEABLE.includes(purchase.status))
      throw new NotFoundError('purchase_not_found', `No purchase ${ref} to change`);
    return purchase;
  }

  /**
   * The plan-change page: the other plans of the purchase's product on sale, and with `planRef`
   * the preview of switching to it (the new invoice, the credit, what is charged and refunded),
   * with `code` (a product taking codes in its portal) the promotion code's coupon applied; a code
   * refused shows the preview without it and why, with the refusal's status.
   */
  async changePage(
    secret: string | undefined,
    purchaseRef: string,
    planRef: string | undefined,
    code: string | undefined,
  ): Promise<ChangeView | undefined> {
    const session = await this.portal.signedIn(secret);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const purchase = await this.ownPurchase(auth, session.customer_id, purchaseRef);
    const [product, current, onSale] = await Promise.all([
      findProduct(this.pool, auth, purchase.productId),
      findPlan(this.pool, auth, purchase.planRef),
      plansOnSale(this.pool, purchase.productId),
    ]);
    const choices = onSale
      .filter((p) => p.id !== purchase.planRef)
      .map((p) => ({ id: p.id, name: p.name, lines: planPriceLines(settingsOf(p)) }));
    let preview: ChangeView['preview'] = null;
    let applied: string | null = null;
    let refusal: DomainError | undefined;
    if (planRef !== undefined) {
      const chosen = choices.find((c) => c.id === planRef);
      const plan = onSale.find((p) => p.id === planRef);
      if (chosen === undefined || plan === undefined)
        throw new ValidationError([
          { path: '/plan', message: 'names no other plan of this product on sale', location: 'querystring' },
        ]);
      let coupon: string | undefined;
      const typed = code?.trim() ?? '';
      if (typed !== '' && product !== undefined)
        try {
          const target = redemptionTarget(session.customer_id, purchase.productId, settingsOf(plan));
          const found = await portalCoupon(
            this.pool,
            this.deps.coupons,
            session,
            auth,
            product,
            typed,
            target,
          );
          coupon = found.id;
          applied = found.code;
        } catch (error) {
          if (!(error instanceof DomainError) || !CODE_REFUSALS.has(error.code)) throw error;
          refusal = error;
        }
      const p = await this.deps.purchases.changes.previewActivation(auth, {
        customerRef: session.customer_id,
        planRef,
        coupon,
      });
      const money = (cents: number) => formatMoney(cents, p.currency);
      preview = {
        planRef,
        planName: chosen.name,
        lines: p.lines.map((l) => ({ description: l.description, amount: money(l.amount) })),
        credit: money(p.credit),
        dueNow: money(p.dueNow),
        refund: p.refund > 0 ? money(p.refund) : null,
        checkoutRequired: p.checkoutRequired,
        prorationDate: p.prorationDate,
      };
    }
    return {
      merchant: await this.portal.merchant(session),
      csrfToken: session.csrf_token,
      purchaseRef: purchase.reference,
      product: product?.name ?? purchase.productId,
      plan: current?.name ?? purchase.planRef,
      choices,
      preview,
      promotionCodes: product?.portal_promotion_codes === true,
      code: applied,
      codeRefusal: refusal === undefined ? null : { code: refusal.code, message: refusal.message },
    };
  }

  /**
   * Switches to the previewed plan at the preview's proration date, so the charge is the one
   * shown, redeeming the promotion code the preview applied (checked again: it may have been used
   * up meanwhile). Without a card the switch goes through hosted checkout (which prorates when
   * paid, and redeems the code then) and comes back here; answers where to go next.
   */
  async confirmChange(
    secret: string | undefined,
    form: Form & { purchaseRef: string; planRef: string; prorationDate: string; code: string },
  ): Promise<string | undefined> {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const purchase = await this.ownPurchase(auth, session.customer_id, form.purchaseRef);
    const plan = await findPlan(this.pool, auth, form.planRef);
    if (plan === undefined || plan.product_id !== purchase.productId)
      throw new ValidationError([
        { path: '/planRef', message: 'names no other plan of this product', location: 'body' },
      ]);
    let coupon: string | undefined;
    if (form.code.trim() !== '') {
      const product = await findProduct(this.pool, auth, purchase.productId);
      if (product !== undefined) {
        const target = redemptionTarget(session.customer_id, purchase.productId, settingsOf(plan));
        const code = form.code.trim();
        coupon = (await portalCoupon(this.pool, this.deps.coupons, session, auth, product, code, target)).id;
      }
    }
    // No card on file: the switch is paid at checkout (which prorates when paid), back to here.
    if (!(await this.deps.payments.hasDefaultMethod(this.pool, session.customer_id))) {
      const terms = await this.deps.purchases.changes.previewActivation(auth, {
        customerRef: session.customer_id,
        planRef: plan.id,
        coupon,
      });
      if (terms.checkoutRequired) {
        const checkout = await this.deps.checkoutSessions.create(auth, {
          customerRef: session.customer_id,
          planRef: plan.id,
          coupon,
          successUrl: `${this.publicUrl}/portal?done=changed`,
          cancelUrl: `${this.publicUrl}/portal`,
        });
        return checkout.url;
      }
    }
    const result = await this.deps.purchases.activate(auth, {
      customerRef: session.customer_id,
      planRef: plan.id,
      prorationDate: form.prorationDate,
      coupon,
    });
    if (result.status === 'activated') return '/portal?done=changed';
    throw new DomainError(
      result.status === 'payment_required' ? 'card_declined' : 'invalid_transition',
      result.message,
    );
  }

  /** The cancel page: at period end, or now with the unused paid time refunded (previewed). */
  async cancelPage(secret: string | undefined, purchaseRef: string) {
    const session = await this.portal.signedIn(secret);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const purchase = await this.ownPurchase(auth, session.customer_id, purchaseRef);
    const [product, plan, preview] = await Promise.all([
      findProduct(this.pool, auth, purchase.productId),
      findPlan(this.pool, auth, purchase.planRef),
      this.deps.purchases.changes.previewCancellation(auth, purchase.reference),
    ]);
    return {
      merchant: await this.portal.merchant(session),
      csrfToken: session.csrf_token,
      purchaseRef: purchase.reference,
      product: product?.name ?? purchase.productId,
      plan: plan?.name ?? purchase.planRef,
      retention: await this.retentionOffer(auth, purchase, product?.retention_coupon_id ?? null, plan),
      periodEnd: purchase.periodEnd,
      atPeriodEnd: purchase.isRecurring && !purchase.cancelAtPeriodEnd,
      refund: preview.refund > 0 ? formatMoney(preview.refund, preview.currency) : null,
      prorationDate: preview.prorationDate,
    };
  }

  /**
   * The product's retention offer on the cancel page, in words: only to a purchase without a
   * discount (an offer does not replace one), and only while the coupon can be redeemed on it.
   */
  private async retentionOffer(
    auth: AuthContext,
    purchase: { customerRef: string; productId: string; discount: unknown },
    couponId: string | null,
    plan: PlanRow | undefined,
  ): Promise<string | null> {
    if (couponId === null || purchase.discount !== null || plan === undefined) return null;
    const target = redemptionTarget(purchase.customerRef, purchase.productId, settingsOf(plan));
    const coupon = await this.deps.coupons.check(this.pool, auth, couponId, target).catch(() => undefined);
    return coupon === undefined ? null : couponWords(coupon);
  }

  /**
   * The customer takes the retention offer instead of cancelling: its coupon is redeemed on the
   * purchase (under the coupon's guard, so a last redemption goes to one customer), as
   * `POST /v1/sdk/purchases/{ref}/discount` does. A purchase with a discount already is 409.
   */
  async acceptRetention(secret: string | undefined, form: Form & { purchaseRef: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const purchase = await this.ownPurchase(auth, session.customer_id, form.purchaseRef);
    const product = await findProduct(this.pool, auth, purchase.productId);
    const couponId = product?.retention_coupon_id ?? null;
    if (couponId === null)
      throw new ConflictError('coupon_not_redeemable', 'This plan has no offer to keep it');
    if (purchase.discount !== null)
      throw new ConflictError('coupon_not_redeemable', 'This plan has a discount already');
    await this.deps.purchases.discounts.apply(auth, purchase.reference, couponId, { retentionOffer: true });
    return 'retained' as const;
  }

  /**
   * The customer adds an alert of their own (the provider's on their plans apply too): a percent
   * of the allowance or a credit balance as a whole number; an amount of spend as money in the
   * currency of their plans ("25" or "25.50"), kept in minor units.
   */
  async addAlert(secret: string | undefined, form: Form & { kind: string; threshold: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    if (!(ALERT_KINDS as readonly string[]).includes(form.kind))
      throw new ValidationError([{ path: '/kind', message: 'names no kind of alert', location: 'body' }]);
    const kind = form.kind as AlertKind;
    const auth = tenantOf(session);
    const threshold =
      kind === 'spend_amount'
        ? minorUnits(form.threshold, await this.portal.currencyOf(auth, session.customer_id))
        : wholeNumber(form.threshold);
    await this.deps.alerts.create(auth, { customerRef: session.customer_id, kind, threshold });
    return 'alert' as const;
  }

  /** Removes one of the customer's own alerts; any other id is as absent as an unknown one. */
  async removeAlert(secret: string | undefined, form: Form & { id: string }) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const own = await this.deps.alerts.list(auth, { customerRef: session.customer_id });
    if (!own.data.some((a) => a.id === form.id))
      throw new NotFoundError('alert_not_found', `No alert ${form.id}`);
    await this.deps.alerts.remove(auth, form.id);
    return 'unalerted' as const;
  }

  /** Ends the purchase now, refunding its unused paid time as the cancel page showed it. */
  async cancelNow(
    secret: string | undefined,
    form: Form & { purchaseRef: string; prorationDate: string; cancellationDetails: CancellationInput },
  ) {
    const session = await this.portal.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const purchase = await this.ownPurchase(auth, session.customer_id, form.purchaseRef);
    await this.deps.purchases.cancel(auth, purchase.reference, {
      prorate: true,
      prorationDate: form.prorationDate,
      cancellationDetails: form.cancellationDetails,
    });
    return 'ended' as const;
  }
}

const fieldProblem = (message: string) =>
  new ValidationError([{ path: '/threshold', message, location: 'body' }]);

/** A whole number a form field holds: digits only, at most 13. */
function wholeNumber(text: string): number {
  const trimmed = text.trim();
  if (!/^\d{1,13}$/.test(trimmed)) throw fieldProblem('must be a whole number');
  return Number(trimmed);
}

/**
 * Money typed in a form ("25", "25.5", "25.50") as minor units of `currency`, exactly: no more
 * decimals than the currency has, and no float on the way.
 */
export function minorUnits(text: string, currency: string): number {
  const digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions()
    .maximumFractionDigits as number;
  const match = /^(\d{1,11})(?:\.(\d+))?$/.exec(text.trim());
  if (match === null || (match[2] ?? '').length > digits)
    throw fieldProblem(`must be an amount in ${currency.toUpperCase()} with at most ${digits} decimals`);
  return Number(`${match[1]}${(match[2] ?? '').padEnd(digits, '0')}`);
}
