import { ID, newId, sameSecret } from '@mcp-meter/contracts/kit';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { DomainError, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import type { AlertService } from '../alerts/service';
import type { AnalyticsService } from '../analytics/service';
import { packOf } from '../auto-topups/pack';
import type { AutoTopUpUpdate } from '../auto-topups/schemas';
import type { AutoTopUps } from '../auto-topups/service';
import type { BillingService } from '../billing/service';
import { formatMoney } from '../checkout/page';
import { discountTerms } from '../checkout/price-words';
import type { CheckoutSessions } from '../checkout/sessions';
import type { CreditService } from '../credits/service';
import { findCustomer } from '../customers/repository';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import type { PaymentService } from '../payments/service';
import { findPlan } from '../plans/repository';
import { findProduct } from '../products/repository';
import { getProvider } from '../providers/repository';
import type { CancellationInput } from '../purchases/cancellation';
import type { PurchaseService } from '../purchases/service';
import { newSecret, sha256 } from '../sign-in/secrets';
import type { PortalView } from './page';
import {
  deletePortalSession,
  findPortalSession,
  insertPortalLink,
  insertPortalSession,
  linkOwner,
  type PortalOwner,
  useLink,
} from './repository';
import type { PortalSessionCreate } from './schemas';
import { chartOf, type UsageChart } from './usage-chart';

/** A portal link is opened within minutes of being made, as Stripe's portal sessions are. */
export const LINK_TTL_MS = 15 * 60_000;
const DAY_MS = 86_400_000;
/** A customer's portal browser left alone this long is signed out (within its hour). */
export const SESSION_IDLE_MS = 15 * 60_000;
/** A customer's portal browser stays signed in this long. */
export const SESSION_TTL_MS = 60 * 60_000;

const tenantOf = (owner: PortalOwner): AuthContext => ({
  providerId: owner.provider_id,
  environment: owner.environment,
});

/**
 * The customer portal (docs/portal.md): a provider makes a single-use link for one of its
 * customers; opening it signs that browser in to the portal of that customer alone, which shows
 * what they pay for and lets them set their auto top-up. Everything shown is read through the
 * same services the API answers with, in the customer's own tenant.
 */
export class PortalService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly publicUrl: string,
    private readonly deps: {
      credits: CreditService;
      autoTopUps: AutoTopUps;
      purchases: PurchaseService;
      billing: BillingService;
      checkoutSessions: CheckoutSessions;
      alerts: AlertService;
      reader: UsageReader;
      payments: Pick<PaymentService, 'listMethods'>;
      /** The usage chart: calls by day and tool, as the usage analytics API answers them. */
      analytics: Pick<AnalyticsService, 'usage'>;
      /** The customer accounts of MCP sign-in: the portal signs in with the same email and password. */
      accounts: {
        verifyAccount(
          tenant: AuthContext,
          credentials: { email: string; password: string; address: string },
        ): Promise<string>;
      };
    },
  ) {}

  /**
   * Calls of the purchase's period so far against its plan's limit, counted as the limit counter
   * starts from; null when the usage store cannot be read now (the page says so, nothing else).
   */
  private async allowanceOf(
    auth: AuthContext,
    customerId: string,
    purchase: { productId: string; periodStart: string },
    limit: number,
  ) {
    const meter = await findMeter(this.pool, auth.providerId, auth.environment, REQUESTS_METER);
    if (meter === undefined) return null;
    try {
      const used = await this.deps.reader.limitUsage({
        ...auth,
        meterRef: meter.id,
        customerRef: customerId,
        productId: purchase.productId,
        from: new Date(purchase.periodStart),
        to: new Date(this.clock.now().getTime() + 60_000),
      });
      return { used, limit, left: Math.max(0, limit - used) };
    } catch {
      return null;
    }
  }

  /** A single-use link to the portal of the customer; another provider's customer is 404. */
  async createLink(auth: AuthContext, input: Static<typeof PortalSessionCreate>) {
    const customer = await findCustomer(this.pool, auth, input.customerRef);
    if (customer === undefined)
      throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
    const token = newSecret();
    const at = this.clock.now();
    const expiresAt = new Date(at.getTime() + LINK_TTL_MS);
    const id = newId(ID.portalLink);
    await insertPortalLink(this.pool, {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: customer.id,
      token_hash: sha256(token),
      return_url: input.returnUrl ?? null,
      expires_at: expiresAt,
      created_at: at,
    });
    return {
      id,
      customerRef: customer.id,
      url: `${this.publicUrl}/portal/sessions/${token}`,
      returnUrl: input.returnUrl ?? null,
      expiresAt: expiresAt.toISOString(),
    };
  }

  /**
   * Opens a link: a new signed-in browser (its cookie's secret) if the link was unused and
   * unexpired, else the merchant to name on the page that says so (undefined: no such link).
   */
  async open(token: string) {
    const at = this.clock.now();
    const owner = await useLink(this.pool, sha256(token), at);
    if (owner === undefined) {
      const spent = await linkOwner(this.pool, sha256(token));
      return {
        kind: 'spent' as const,
        merchant: spent === undefined ? undefined : await this.merchant(spent),
        tenant: spent === undefined ? undefined : tenantOf(spent),
      };
    }
    return { kind: 'opened' as const, secret: await this.startSession(owner, at) };
  }

  /** A new signed-in browser of the owner's customer: its cookie's secret. */
  private async startSession(owner: PortalOwner, at: Date): Promise<string> {
    const secret = newSecret();
    await insertPortalSession(this.pool, {
      ...owner,
      id: newId(ID.portalSession),
      token_hash: sha256(secret),
      csrf_token: newSecret(),
      expires_at: new Date(at.getTime() + SESSION_TTL_MS),
      created_at: at,
    });
    return secret;
  }

  /** The merchant a sign-in page is for, or undefined when the provider is not known here. */
  async signInPage(tenant: AuthContext) {
    const provider = await getProvider(this.pool, tenant.providerId);
    if (provider === undefined || (tenant.environment === 'live' && !provider.liveEnabled)) return undefined;
    return this.merchant({
      provider_id: tenant.providerId,
      environment: tenant.environment,
      customer_id: '',
      return_url: null,
    });
  }

  /**
   * Signs a browser in with the customer's account of this provider (the email and password of
   * MCP sign-in, under its throttles): a new session's secret. A wrong email or password is 401.
   */
  async signIn(tenant: AuthContext, credentials: { email: string; password: string; address: string }) {
    return this.startFor(tenant, await this.deps.accounts.verifyAccount(tenant, credentials));
  }

  /** A new signed-in browser of a customer proven by other means (a mailed code): its secret. */
  startFor(tenant: AuthContext, customerId: string) {
    return this.startSession(
      {
        provider_id: tenant.providerId,
        environment: tenant.environment,
        customer_id: customerId,
        return_url: null,
      },
      this.clock.now(),
    );
  }

  /** The signed-in browser of `secret`, or undefined. */
  async signedIn(secret: string | undefined) {
    if (secret === undefined || secret === '') return undefined;
    return findPortalSession(this.pool, sha256(secret), this.clock.now(), SESSION_IDLE_MS);
  }

  async merchant(owner: PortalOwner) {
    const provider = await getProvider(this.pool, owner.provider_id);
    return {
      displayName: provider?.displayName ?? 'Your provider',
      logoUrl: provider?.logoUrl ?? null,
      brandColor: provider?.brandColor ?? null,
      supportEmail: provider?.supportEmail ?? null,
    };
  }

  /** What the signed-in customer's portal page shows, or undefined when the browser is not signed in. */
  async view(
    secret: string | undefined,
    notice: PortalView['notice'] = null,
  ): Promise<PortalView | undefined> {
    const session = await this.signedIn(secret);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const customerRef = session.customer_id;
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) return undefined;
    const [balance, movements, purchases, invoices, drafts, alerts] = await Promise.all([
      this.deps.credits.balance(auth, customerRef),
      this.deps.credits.list(auth, customerRef, { limit: 10 }),
      this.deps.purchases.list(auth, { limit: 20, customerRef }),
      this.deps.billing.list(auth, { limit: 10, customerRef }),
      this.deps.billing.list(auth, { limit: 10, customerRef, status: 'draft' }),
      this.deps.alerts.list(auth, { customerRef }),
    ]);
    const [cards, usage] = await Promise.all([
      this.deps.payments.listMethods(auth, customerRef),
      this.usageOf(auth, customerRef, purchases.data),
    ]);
    const autoTopUp = await this.deps.autoTopUps.get(auth, customerRef).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    });
    const plans = await Promise.all(
      purchases.data.map(async (p) => {
        const live = ['trialing', 'active', 'past_due'].includes(p.status);
        const [plan, product, upcoming] = await Promise.all([
          findPlan(this.pool, auth, p.planRef),
          findProduct(this.pool, auth, p.productId),
          // The usage store unreadable: no figures of the period, the rest of the page as ever.
          live ? this.deps.billing.upcoming(auth, p.reference).catch(() => null) : null,
        ]);
        const money = (cents: number) => formatMoney(cents, p.currency);
        return {
          purchaseRef: p.reference,
          cancellable: p.isRecurring && p.status === 'active' && !p.cancelAtPeriodEnd,
          changeable: ['trialing', 'active', 'past_due'].includes(p.status),
          productId: p.productId,
          product: product?.name ?? p.productId,
          plan: plan?.name ?? p.planRef,
          status: p.status,
          // An ended purchase ended when it ended, not when its period would have.
          periodEnd: p.endedAt ?? p.periodEnd,
          cancelAtPeriodEnd: p.cancelAtPeriodEnd,
          discount: p.discount === null ? null : discountTerms(p.discount, this.clock.now()),
          // Usage priced by the period (post-paid): what it comes to so far, as the upcoming invoice.
          usageSoFar:
            plan === undefined ||
            !['usage-based', 'hybrid'].includes(plan.type) ||
            plan.billing_model === 'pre-paid' ||
            upcoming === null
              ? null
              : { calls: upcoming.usage.billableUnits, total: money(upcoming.total) },
          // The whole next invoice: the period's price in advance beside the usage so far.
          nextInvoice:
            upcoming?.renewal == null
              ? null
              : {
                  at: upcoming.renewal.chargedAt,
                  total: money(upcoming.amountDue),
                  advance: money(upcoming.renewal.base + upcoming.renewal.setupFee),
                  usage: upcoming.total > 0 ? money(upcoming.total) : null,
                  discount: upcoming.discount < 0 ? money(-upcoming.discount) : null,
                },
          allowance:
            plan?.usage_limit == null || !['trialing', 'active', 'past_due'].includes(p.status)
              ? undefined
              : await this.allowanceOf(auth, customerRef, p, plan.usage_limit),
          pack:
            plan === undefined || plan.topup_credits === null || plan.topup_amount === null
              ? null
              : `${Number(plan.topup_credits)} credits for ${formatMoney(plan.topup_amount, plan.currency)}`,
        };
      }),
    );
    return {
      merchant: await this.merchant(session),
      customer: {
        ref: customer.id,
        email: customer.email,
        name: customer.name,
        telephone: customer.telephone,
        address: customer.address,
        taxIds: customer.tax_ids,
      },
      sandbox: session.environment === 'sandbox',
      csrfToken: session.csrf_token,
      returnUrl: session.return_url,
      credits: balance.credits,
      plans,
      movements: movements.data.map((m) => ({
        at: m.createdAt,
        kind: m.kind,
        amount: m.amount,
        balance: m.balance,
        reason: m.reason,
      })),
      upcoming: drafts.data.map((i) => ({ id: i.id, total: formatMoney(i.total, i.currency) })),
      invoices: invoices.data.map((i) => ({
        id: i.id,
        at: i.finalizedAt ?? i.createdAt,
        status: i.status,
        total: formatMoney(i.total, i.currency),
        pdfUrl: i.pdfUrl,
      })),
      autoTopUp:
        autoTopUp === null
          ? null
          : {
              productRef: autoTopUp.productRef,
              threshold: autoTopUp.threshold,
              packs: autoTopUp.packs,
              status: autoTopUp.status,
              lastFailure: autoTopUp.lastFailure,
            },
      alerts: alerts.data.map((a) => ({ id: a.id, kind: a.kind, threshold: a.threshold })),
      currency: await this.currencyOf(auth, customerRef),
      cards: cards.data.map((c) => ({
        id: c.id,
        text: `${c.brand} ending ${c.last4}, expires ${String(c.expMonth).padStart(2, '0')}/${c.expYear}`,
        isDefault: c.isDefault,
      })),
      usage,
      notice,
    };
  }

  /**
   * The customer's calls by day and tool since the earliest current period of their plans (the
   * last 30 days without one; at most 92 days), as the usage analytics API answers them; null
   * when the usage store cannot be read now.
   */
  private async usageOf(
    auth: AuthContext,
    customerRef: string,
    purchases: Array<{ status: string; periodStart: string }>,
  ): Promise<UsageChart | null> {
    const now = this.clock.now().getTime();
    const starts = purchases
      .filter((p) => ['trialing', 'active', 'past_due'].includes(p.status))
      .map((p) => Date.parse(p.periodStart));
    const from = Math.max(now - 92 * DAY_MS, starts.length === 0 ? now - 30 * DAY_MS : Math.min(...starts));
    try {
      const answer = await this.deps.analytics.usage(auth, {
        from: new Date(from).toISOString(),
        customerRef,
        groupBy: 'tool',
        grain: 'day',
        limit: 5,
      });
      return chartOf(answer);
    } catch (error) {
      if (error instanceof DomainError) return null;
      throw error;
    }
  }

  /** The signed-in customer sets (or turns off) their own auto top-up; the form proves CSRF. */
  async setAutoTopUp(
    secret: string | undefined,
    form: { csrf?: string | undefined; input: Static<typeof AutoTopUpUpdate> | null },
  ) {
    const session = await this.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    if (form.input === null) {
      await this.deps.autoTopUps.remove(auth, session.customer_id).catch((error: unknown) => {
        if (!(error instanceof NotFoundError)) throw error;
      });
      return 'off' as const;
    }
    await this.deps.autoTopUps.set(auth, session.customer_id, form.input);
    return 'saved' as const;
  }

  /** The session of `secret` with its CSRF token proven; undefined when not signed in. */
  async proven(secret: string | undefined, csrf: string | undefined) {
    const session = await this.signedIn(secret);
    if (session === undefined) return undefined;
    if (!sameSecret(csrf ?? '', session.csrf_token))
      throw new DomainError('csrf_failed', 'The form is out of date: reload the page and try again');
    return session;
  }

  /**
   * Credits bought from the portal: a hosted checkout for `packs` of the top-up pack of the
   * customer's plan of the product, coming back to the portal once paid. Answers its URL.
   */
  async buyCredits(
    secret: string | undefined,
    form: { csrf?: string | undefined; productRef: string; packs: number },
  ): Promise<string | undefined> {
    const session = await this.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const pack = await packOf(this.pool, auth, session.customer_id, form.productRef);
    if (typeof pack === 'string')
      throw new ValidationError([
        { path: '/productRef', message: 'names no plan of yours that sells credit packs', location: 'body' },
      ]);
    // A product that takes promotion codes in its portal takes them on its packs' checkout too.
    const product = await findProduct(this.pool, auth, form.productRef);
    const checkout = await this.deps.checkoutSessions.create(auth, {
      customerRef: session.customer_id,
      topup: {
        credits: pack.credits * form.packs,
        amount: pack.amount * form.packs,
        currency: pack.currency,
      },
      allowPromotionCodes: product?.portal_promotion_codes === true,
      successUrl: `${this.publicUrl}/portal?done=bought`,
      cancelUrl: `${this.publicUrl}/portal`,
    });
    return checkout.url;
  }

  /** Cancels one of the customer's own recurring purchases at the end of its period. */
  async cancelAtPeriodEnd(
    secret: string | undefined,
    form: { csrf?: string | undefined; purchaseRef: string; cancellationDetails: CancellationInput },
  ) {
    const session = await this.proven(secret, form.csrf);
    if (session === undefined) return undefined;
    const auth = tenantOf(session);
    const purchase = await this.deps.purchases.get(auth, form.purchaseRef);
    // Another customer's purchase is as absent as one that does not exist.
    if (purchase.customerRef !== session.customer_id)
      throw new NotFoundError('purchase_not_found', `No purchase ${form.purchaseRef}`);
    const why = form.cancellationDetails;
    await this.deps.purchases.cancel(auth, purchase.reference, {
      atPeriodEnd: true,
      cancellationDetails: why,
    });
    return 'cancelled' as const;
  }

  /** The currency the customer pays in: their first plan's, else the merchant's default. */
  async currencyOf(auth: AuthContext, customerId: string): Promise<string> {
    const first = await this.deps.purchases.list(auth, { limit: 1, customerRef: customerId });
    return (
      first.data[0]?.currency ?? (await getProvider(this.pool, auth.providerId))?.defaultCurrency ?? 'usd'
    );
  }

  async signOut(secret: string | undefined): Promise<string | null> {
    const session = await this.signedIn(secret);
    if (session === undefined) return null;
    await deletePortalSession(this.pool, session.id);
    return session.return_url;
  }
}
