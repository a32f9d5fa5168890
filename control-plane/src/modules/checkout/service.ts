import { atTestTime, type Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findCoupon } from '../coupons/repository';
import type { CreditService } from '../credits/service';
import { findCustomer, lockCustomerRow } from '../customers/repository';
import type { CustomerService } from '../customers/service';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { MethodInput, Processors } from '../payments/processor';
import { findProcessorCustomer } from '../payments/repository';
import type { PaymentService } from '../payments/service';
import { findPlan, settingsOf } from '../plans/repository';
import { findProduct } from '../products/repository';
import { getProvider } from '../providers/repository';
import { latestPurchasePerProduct } from '../purchases/repository';
import type { PurchaseService } from '../purchases/service';
import { testTimeOf } from '../test-clocks/repository';
import { asksTaxId, type BillingInput, billingChange } from './billing';
import { type CheckoutView, formatMoney } from './page';
import { couponWords, planPriceLines, topupCouponWords } from './price-words';
import {
  claimSession,
  expireDueSessions,
  expireOpenSessionsOf,
  lockOpenSession,
  markOpened,
  markSessionUsed,
  releaseSession,
  type SessionRow,
  topupAttempts,
} from './repository';
import type { CheckoutInput, CheckoutSessions } from './sessions';

export type { CheckoutInput };

/**
 * Paying a checkout session on the hosted page (one payer at a time), the page's view of it,
 * and expiry. Sessions move active → used (paid) or active → expired (past expiresAt), with
 * checkout_session.completed / expired.
 */
export class CheckoutService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly sessions: CheckoutSessions,
    private readonly purchases: PurchaseService,
    private readonly payments: PaymentService,
    private readonly credits: CreditService,
    private readonly processors: Processors,
    private readonly customers: CustomerService,
  ) {}

  urlOf(id: string): string {
    return this.sessions.urlOf(id);
  }

  /** A promotion code typed on the hosted page, or null to take it off (sessions.ts). */
  promotionCode(id: string, code: string | null) {
    return this.sessions.promotionCode(id, code);
  }

  create(auth: AuthContext, input: CheckoutInput) {
    return this.sessions.create(auth, input);
  }

  get(auth: AuthContext, id: string) {
    return this.sessions.get(auth, id);
  }

  /** What the hosted page shows; undefined when the session can no longer be paid. */
  async view(id: string): Promise<CheckoutView | undefined> {
    const row = await this.sessions.load(id);
    if (row.status !== 'active' || row.expires_at <= this.clock.now()) return undefined;
    const merchant = await getProvider(this.pool, row.provider_id);
    if (merchant === undefined) return undefined;
    const auth = { providerId: row.provider_id, environment: row.environment };
    const lines: string[] = [];
    let title = row.kind === 'setup' ? 'Add a card' : `${row.topup_credits ?? 0} credits`;
    if (row.kind === 'setup')
      lines.push('Saved as your default card for future payments and renewals; nothing is charged now');
    if (row.kind === 'topup' && row.coupon_id !== null) {
      const coupon = await findCoupon(this.pool, auth, row.coupon_id);
      if (coupon !== undefined)
        lines.push(topupCouponWords(row.amount_subtotal ?? row.amount, row.currency, coupon));
    }
    if (row.plan_id !== null) {
      const plan = await findPlan(this.pool, auth, row.plan_id);
      const product =
        row.product_id === null ? undefined : await findProduct(this.pool, auth, row.product_id);
      if (plan === undefined) return undefined;
      title = `${product?.name ?? ''} · ${plan.name}`;
      lines.push(...planPriceLines(settingsOf(plan)));
      const coupon = row.coupon_id === null ? undefined : await findCoupon(this.pool, auth, row.coupon_id);
      if (coupon !== undefined) lines.push(couponWords(coupon));
      // A switch from a paid plan of the product credits its unused time when paid.
      const current = (await latestPurchasePerProduct(this.pool, row.customer_id)).find(
        (p) =>
          p.product_id === plan.product_id &&
          p.plan_id !== plan.id &&
          p.status === 'active' &&
          p.is_recurring &&
          p.amount > 0,
      );
      if (current !== undefined) {
        const from = (await findPlan(this.pool, auth, current.plan_id))?.name ?? current.plan_id;
        lines.push(`Less the unused time of your ${from} plan, worked out when you pay`);
      }
    }
    return {
      sessionId: row.id,
      merchant: {
        displayName: merchant.displayName,
        logoUrl: merchant.logoUrl,
        brandColor: merchant.brandColor,
        termsUrl: merchant.termsUrl,
        privacyUrl: merchant.privacyUrl,
        supportEmail: merchant.supportEmail,
      },
      title,
      lines,
      dueNow:
        row.kind === 'setup'
          ? 'Nothing is charged today'
          : `${formatMoney(row.amount, row.currency)} due today`,
      action: row.kind === 'setup' ? 'Save card' : 'Pay',
      cancelUrl: row.cancel_url,
      sandbox: row.environment === 'sandbox',
      promotion:
        row.kind !== 'setup' && row.allow_promotion_codes ? { applied: row.coupon_id !== null } : null,
      billing: await this.billingAsk(row),
      continueUrl: (await this.codeFirst(row)) ? `/checkout/${row.id}/card` : null,
    };
  }

  /**
   * Whether the session's own page comes before the processor's (live, with Stripe): when it
   * takes promotion codes, which only our page asks for; the card is then given on the
   * processor's page (`processorPage`), for what is due with the code applied.
   */
  async codeFirst(session: string | SessionRow): Promise<boolean> {
    const row = typeof session === 'string' ? await this.sessions.load(session) : session;
    if (row.environment !== 'live' || !row.allow_promotion_codes || row.kind === 'setup') return false;
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const processor = await this.processors.current(auth).catch(() => undefined);
    return processor?.cardPage !== undefined;
  }

  /**
   * The billing fields the page shows, the address filled with the customer's current one. A
   * tax ID required "if supported" is required where the customer's country has a kind of one:
   * by the country chosen on the page when it asks the address (billing-fields.ts), else by the
   * customer's own, required when none is known.
   */
  private async billingAsk(row: SessionRow): Promise<CheckoutView['billing']> {
    const required = row.billing_address_collection === 'required';
    if (!required && !row.tax_id_collection) return null;
    const auth = { providerId: row.provider_id, environment: row.environment };
    const customer =
      required || row.tax_id_required ? await findCustomer(this.pool, auth, row.customer_id) : undefined;
    return {
      address: required ? (customer?.address ?? null) : false,
      taxId: !row.tax_id_collection
        ? false
        : row.tax_id_required &&
            (customer?.tax_ids.length ?? 0) === 0 &&
            asksTaxId(required, customer?.address)
          ? 'required'
          : 'optional',
    };
  }

  /**
   * Where the customer gives a card when the processor has a page of its own (live mode with
   * Stripe: a Stripe Checkout Session, made once per session); undefined when our page takes it.
   */
  /** The customer opened the session's page: the funnel's second step, noted once. */
  async opened(id: string): Promise<void> {
    await markOpened(this.pool, id, this.clock.now());
  }

  async processorPage(id: string): Promise<string | undefined> {
    const row = await this.sessions.load(id);
    if (row.environment !== 'live' || row.status !== 'active' || row.expires_at <= this.clock.now())
      return undefined;
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    const processor = await this.processors.current(auth).catch(() => undefined);
    const view = await this.view(id);
    if (processor?.cardPage === undefined || view === undefined) return undefined;
    const customer = await findCustomer(this.pool, auth, row.customer_id);
    if (customer === undefined) return undefined;
    const redirect = new URL(row.success_url);
    redirect.searchParams.set('session_id', row.id);
    return processor.cardPage(
      {
        id: customer.id,
        email: customer.email,
        name: customer.name,
        address: customer.address,
        taxIds: customer.tax_ids,
        processorCustomer: await findProcessorCustomer(this.pool, customer.id, processor.name),
      },
      {
        checkoutSession: row.id,
        currency: row.currency,
        description: [view.title, ...view.lines, view.dueNow].join(' · '),
        successUrl: redirect.toString(),
        cancelUrl: row.cancel_url,
        billingAddress: row.billing_address_collection === 'required',
        taxId: row.tax_id_collection,
        // Our tax ids are not on Stripe's customer: Stripe asks one only of a customer who has none.
        taxIdRequired: row.tax_id_required && customer.tax_ids.length === 0,
        coupon: row.coupon_id,
      },
    );
  }

  /**
   * The processor's page saved the customer's card for session `id` (Stripe's
   * checkout.session.completed): the session is paid with it as on our own page. A session of
   * another provider or environment is not touched; one already paid answers 409
   * checkout_session_closed, so a redelivered event charges nothing.
   */
  async completeFromProcessor(
    providerId: string,
    id: string,
    paymentMethod: string,
    billing?: BillingInput,
  ): Promise<void> {
    const row = await this.sessions.load(id);
    if (row.provider_id !== providerId || row.environment !== 'live')
      throw new ConflictError('checkout_session_closed', `Checkout session ${id} is not this account's`);
    await this.pay(id, { paymentMethod }, billing, true);
  }

  /**
   * Pays a session from the hosted page; answers where to send the customer next. One payer at
   * a time: the session is claimed with a guarded UPDATE (a lease, released on failure), so
   * concurrent or repeated submissions get 409 instead of charging again. A top-up charges,
   * credits and closes the session in one transaction. The session lives in real time (its
   * expiry, its claim); what the payment does for a sandbox customer on a test clock (the
   * purchase it starts, the charge, the events) happens at the clock's time, as every request
   * about that customer does.
   */
  async pay(
    id: string,
    card: MethodInput,
    billing?: BillingInput,
    fromProcessor = false,
  ): Promise<{ redirectUrl: string }> {
    const row = await this.claim(id);
    const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
    let clockTime: Date | undefined;
    try {
      if (row.environment === 'sandbox')
        clockTime = await testTimeOf(this.pool, auth, { customerRef: row.customer_id });
    } catch (error) {
      await this.release(row.id);
      throw error;
    }
    const work = () => this.payClaimed(row, auth, card, billing, fromProcessor);
    return clockTime === undefined ? work() : atTestTime(clockTime, work);
  }

  /** `pay` for a session claimed by this payer: released again unless the payment used it. */
  private async payClaimed(
    row: SessionRow,
    auth: AuthContext,
    card: MethodInput,
    billing: BillingInput | undefined,
    fromProcessor: boolean,
  ): Promise<{ redirectUrl: string }> {
    let used = false;
    try {
      // The billing details go on the customer first, so the first invoice names them.
      const change = billingChange(row, billing, fromProcessor);
      if (change !== undefined) await this.customers.update(auth, row.customer_id, change);
      await this.payments.attachCard(auth, row.customer_id, card);
      if (row.kind === 'setup') {
        // The card is saved as the default (above); the session is done.
        await inTransaction(this.pool, (tx) => this.markUsed(tx, auth, row, null));
      } else if (row.kind === 'plan' && row.plan_id !== null) {
        const result = await this.purchases.activate(auth, {
          customerRef: row.customer_id,
          planRef: row.plan_id,
          coupon: row.coupon_id ?? undefined,
        });
        if (result.status !== 'activated' && result.status !== 'already_active')
          throw new DomainError('card_declined', result.message);
        await inTransaction(this.pool, (tx) => this.markUsed(tx, auth, row, result.purchaseRef ?? null));
      } else {
        const failure = await inTransaction(this.pool, async (tx) => {
          // The customer's lock before the charge, as every balance movement takes it: a deletion
          // committed since the card was attached is seen here, and nothing is charged.
          const status = await lockCustomerRow(tx, row.customer_id);
          if (status === undefined || status === 'deleted')
            throw new NotFoundError('customer_not_found', `No customer ${row.customer_id}`);
          // Then the session's: still open, and kept open until this charge is recorded.
          if (!(await lockOpenSession(tx, row.id)))
            throw new ConflictError('checkout_session_closed', 'This checkout session was closed');
          // Its coupon is counted first (under the coupon's guard, with the customer locked for a
          // first-time-only one); one fully off leaves nothing to charge.
          const redemption = await this.sessions.redeemTopupCoupon(tx, auth, row);
          // Attempts of this session so far (the claim keeps this count from racing).
          const attempt = await topupAttempts(tx, row.customer_id, row.id);
          const charged =
            row.amount === 0
              ? undefined
              : await this.payments.charge(tx, auth, {
                  customerId: row.customer_id,
                  purchaseId: null,
                  productId: null,
                  planId: null,
                  amount: row.amount,
                  currency: row.currency,
                  reason: 'topup',
                  periodKey: row.id,
                  attempt,
                  revenue: [{ amount: row.amount, start: null, end: null, line: 'top_up' }],
                });
          // A refused card keeps its failed attempt (and payment.failed); the session stays open,
          // and its coupon unredeemed.
          if (charged?.status === 'failed') {
            await redemption.release();
            return charged.failureReason ?? 'failed';
          }
          await this.credits.moveIn(
            tx,
            auth,
            row.customer_id,
            { kind: 'top_up', amount: row.topup_credits ?? 0, reason: 'checkout' },
            `checkout:${row.id}`,
          );
          await this.markUsed(tx, auth, row, null);
          return undefined;
        });
        if (failure !== undefined)
          throw new DomainError('card_declined', `The card was refused (${failure})`);
        // The proxy may now admit calls on the new credits.
        await this.credits.announce(row.customer_id);
      }
      used = true;
    } finally {
      if (!used) await this.release(row.id);
    }
    const redirect = new URL(row.success_url);
    redirect.searchParams.set('session_id', row.id);
    return { redirectUrl: redirect.toString() };
  }

  /** Takes the session for one payer, or says why it cannot be paid now. */
  private async claim(id: string): Promise<SessionRow> {
    const at = this.clock.now();
    const claimed = await claimSession(this.pool, id, at);
    if (claimed !== undefined) return claimed;
    const row = await this.sessions.load(id);
    if (row.status === 'active' && row.expires_at > at)
      throw new ConflictError(
        'checkout_session_in_progress',
        'This checkout session is being paid; wait for it to finish',
      );
    throw new ConflictError(
      'checkout_session_closed',
      `This checkout session is ${row.status === 'active' ? 'expired' : row.status}`,
    );
  }

  private async release(id: string): Promise<void> {
    await releaseSession(this.pool, id);
  }

  private async markUsed(tx: PoolClient, auth: AuthContext, row: SessionRow, purchaseId: string | null) {
    const at = this.clock.now();
    const used = await markSessionUsed(tx, row.id, at, purchaseId);
    if (used === undefined)
      throw new ConflictError('checkout_session_closed', 'This checkout session was closed');
    await writeEvent(tx, {
      ...auth,
      type: 'checkout_session.completed',
      object: this.sessions.eventObject(used),
      previousAttributes: { status: 'active' },
      at,
    });
  }

  /** Marks sessions past their expiry as expired, each with its events; run by the scheduler. */
  async expireDue(): Promise<number> {
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const rows = await expireDueSessions(tx, at);
      await this.writeExpired(tx, rows, 'abandoned', at);
      return rows.length;
    });
  }

  /**
   * Customer deletion (a `customers.onDelete` hook, in the deletion's transaction after the
   * customer's lock): its open sessions expire, so its links stop offering a payment; one being
   * paid is left to its payer (`expireOpenSessionsOf`).
   */
  async endAllOf(tx: PoolClient, customerId: string): Promise<void> {
    const at = this.clock.now();
    await this.writeExpired(tx, await expireOpenSessionsOf(tx, customerId, at), 'customer_deleted', at);
  }

  /** Each expired session's events: the session's, and the cancellation of the payment it was opened for. */
  private async writeExpired(
    tx: PoolClient,
    rows: readonly SessionRow[],
    reason: 'abandoned' | 'customer_deleted',
    at: Date,
  ): Promise<void> {
    for (const row of rows) {
      const tenant = { providerId: row.provider_id, environment: row.environment };
      await writeEvent(tx, {
        ...tenant,
        type: 'checkout_session.expired',
        object: this.sessions.eventObject(row),
        previousAttributes: { status: 'active' },
        at,
      });
      await writeEvent(tx, {
        ...tenant,
        type: 'payment.canceled',
        object: {
          id: row.id,
          checkout_session: row.id,
          amount: row.amount,
          currency: row.currency,
          customer: row.customer_id,
          product: row.product_id,
          plan: row.plan_id,
          cancellation_reason: reason,
          created: unixSeconds(at),
        },
        at,
      });
    }
  }
}
