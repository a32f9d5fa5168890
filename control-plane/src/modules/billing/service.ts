import { priceUsage } from '@mcp-meter/contracts/pricing';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, UnavailableError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import { findCustomer } from '../customers/repository';
import { findPlan, settingsOf } from '../plans/repository';
import { pricingOf } from '../plans/rules';
import { getProvider } from '../providers/repository';
import { periodEnd } from '../purchases/periods';
import { findPurchase, lockPurchase } from '../purchases/repository';
import type { PurchaseRow } from '../purchases/service';
import { discountedAt } from './discounts';
import type { InvoiceDocument } from './document';
import type { Collection, Invoicing } from './invoicing';
import {
  findInvoice,
  findInvoiceByToken,
  type InvoiceRow,
  listInvoices,
  lockInvoiceOfPeriod,
  voidOpenInvoice,
} from './repository';
import type { Invoice, UpcomingInvoice } from './schemas';

const iso = (d: Date | null) => d?.toISOString() ?? null;

/**
 * The customer's copy of an invoice (the hosted page; its PDF below it), null for a draft: as
 * with Stripe, the link comes with finalizing.
 */
export const hostedInvoiceUrl = (publicUrl: string, r: Pick<InvoiceRow, 'status' | 'access_token'>) =>
  r.status === 'draft' ? null : `${publicUrl}/invoice/${r.access_token}`;

/** The invoice as the API answers it; `publicUrl` is where its hosted page lives. */
export const toInvoice = (r: InvoiceRow, publicUrl: string): Invoice => ({
  id: r.id,
  status: r.status,
  customerRef: r.customer_id,
  customerName: r.billed_to.name,
  customerEmail: r.billed_to.email,
  customerAddress: r.billed_to.address,
  customerTaxIds: r.billed_to.taxIds,
  issuer: r.issuer,
  purchaseRef: r.purchase_id,
  productId: r.product_id,
  planRef: r.plan_id,
  billingReason: r.billing_reason as Invoice['billingReason'],
  currency: r.currency,
  usage:
    r.usage_period_start === null || r.usage_period_end === null || r.usage_units === null
      ? null
      : {
          periodStart: r.usage_period_start.toISOString(),
          periodEnd: r.usage_period_end.toISOString(),
          units: r.usage_units,
          freeUnits: r.free_units ?? 0,
          billableUnits: Math.max(0, r.usage_units - (r.free_units ?? 0)),
        },
  lines: r.lines,
  total: r.total,
  amountPaid: r.amount_paid,
  amountDue: r.status === 'open' || r.status === 'draft' ? r.total - r.amount_paid : 0,
  attemptCount: r.attempt_count,
  paymentId: r.payment_id,
  createdAt: r.created_at.toISOString(),
  finalizedAt: iso(r.finalized_at),
  paidAt: iso(r.paid_at),
  closedAt: iso(r.closed_at),
  nextPaymentAttempt: iso(r.next_retry_at),
  hostedUrl: hostedInvoiceUrl(publicUrl, r),
  pdfUrl: r.status === 'draft' ? null : `${hostedInvoiceUrl(publicUrl, r)}/pdf`,
});

/**
 * Invoices as providers read them, and the upcoming invoice: what the current period of a
 * usage-based or hybrid purchase has run up, priced by its plan (see pricing.ts). Invoices are
 * issued by invoicing.ts, when a purchase is first paid and when its periods close.
 */
export class BillingService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly invoicing: Pick<Invoicing, 'unitsOf'>,
    private readonly publicUrl: string,
    private readonly dunning: {
      forgive(tx: PoolClient, purchase: PurchaseRow): Promise<PurchaseRow>;
      closeNow(
        tx: PoolClient,
        purchase: PurchaseRow,
      ): Promise<{ row: PurchaseRow; publish: boolean } | undefined>;
      usageSettled(): Promise<boolean>;
      publish(rows: PurchaseRow[]): Promise<void>;
      payNow(
        tx: PoolClient,
        purchase: PurchaseRow,
        invoice: InvoiceRow,
      ): Promise<{ collection: Collection; renewed?: PurchaseRow }>;
    },
    private readonly cards: { hasDefaultMethod(db: PoolClient, customerId: string): Promise<boolean> },
  ) {}

  /**
   * Pays an open invoice now with the customer's default card (after a new card, say), apart
   * from the dunning schedule: a failure neither uses up a retry nor moves the next one. Paid,
   * the past-due purchase it billed renews (`purchase.renewed`, `usage.reset`); a final-usage
   * invoice is only paid. Purchase, then invoice, are locked, so calls at once and dunning's own
   * retry charge it once; a paid invoice is answered as it is. A declined card is 402
   * `card_declined` with the attempt recorded (`payment.failed`) and the invoice still open.
   */
  async pay(auth: AuthContext, id: string): Promise<Invoice> {
    const found = await findInvoice(this.pool, auth, id);
    if (found === undefined) throw new NotFoundError('invoice_not_found', `No invoice ${id}`);
    const outcome = await inTransaction(this.pool, async (tx) => {
      // The purchase first, then the invoice: the order the billing scheduler locks them in.
      const purchase = await lockPurchase(tx, found.purchase_id);
      const invoice = await lockInvoiceOfPeriod(tx, found.purchase_id, found.period_key);
      if (invoice === undefined || purchase === undefined)
        throw new NotFoundError('invoice_not_found', `No invoice ${id}`);
      if (invoice.status === 'paid') return { invoice, renewed: undefined, failure: null };
      if (invoice.status !== 'open')
        throw new ConflictError(
          'invoice_not_open',
          invoice.status === 'draft'
            ? `Invoice ${id} is a draft; finalize it first`
            : `Invoice ${id} is ${invoice.status}; only open invoices can be paid`,
        );
      if (!(await this.cards.hasDefaultMethod(tx, invoice.customer_id)))
        throw new ConflictError(
          'payment_method_required',
          'The customer has no card to pay with; add one first',
        );
      const { collection, renewed } = await this.dunning.payNow(tx, purchase, invoice);
      return { invoice: collection.invoice, renewed, failure: collection.failureReason };
    });
    if (outcome.renewed !== undefined) await this.dunning.publish([outcome.renewed]);
    if (outcome.invoice.status !== 'paid')
      throw new DomainError(
        'card_declined',
        `The card was declined (${outcome.failure ?? 'declined'}); invoice ${id} stays open`,
      );
    return toInvoice(outcome.invoice, this.publicUrl);
  }

  /**
   * Voids an unpaid (open) invoice: nothing more is collected on it. When it is the invoice
   * dunning was retrying, the period it billed is forgiven: the retries stop and the purchase
   * moves on to its next period, `active` again (`purchase.updated`, `usage.reset`). Idempotent: voiding a void invoice answers it again; a paid or
   * uncollectible one is 409 `invoice_not_open`.
   */
  async void(auth: AuthContext, id: string): Promise<Invoice> {
    const found = await findInvoice(this.pool, auth, id);
    if (found === undefined) throw new NotFoundError('invoice_not_found', `No invoice ${id}`);
    const outcome = await inTransaction(this.pool, async (tx) => {
      // The purchase first, then the invoice: the order the billing scheduler locks them in.
      const purchase = await lockPurchase(tx, found.purchase_id);
      const invoice = await lockInvoiceOfPeriod(tx, found.purchase_id, found.period_key);
      if (invoice === undefined) throw new NotFoundError('invoice_not_found', `No invoice ${id}`);
      if (invoice.status === 'void') return { invoice, purchase: undefined };
      if (invoice.status !== 'open')
        throw new ConflictError(
          'invoice_not_open',
          `Invoice ${id} is ${invoice.status}; only open invoices can be voided`,
        );
      const voided = await voidOpenInvoice(tx, invoice.id, this.clock.now());
      if (voided === undefined) throw new Error(`invoice ${id} left open while locked`);
      const collecting = purchase?.status === 'past_due' && invoice.billing_reason === 'renewal';
      const updated =
        purchase !== undefined && collecting ? await this.dunning.forgive(tx, purchase) : undefined;
      return { invoice: voided, purchase: updated };
    });
    if (outcome.purchase !== undefined) await this.dunning.publish([outcome.purchase]);
    return toInvoice(outcome.invoice, this.publicUrl);
  }

  /**
   * Finalizes a draft now instead of after the lateness allowance: the period closes as the
   * scheduler would close it (recounted, the invoice `open` and collected, the purchase renewed or
   * ended), provided the usage bus has stored every record it holds; otherwise 503
   * `usage_not_settled` and the draft stays. A finalized invoice is answered as it is, so retries
   * and concurrent calls close the period once.
   */
  async finalize(auth: AuthContext, id: string): Promise<Invoice> {
    const found = await findInvoice(this.pool, auth, id);
    if (found === undefined) throw new NotFoundError('invoice_not_found', `No invoice ${id}`);
    if (found.status !== 'draft') return toInvoice(found, this.publicUrl);
    if (!(await this.dunning.usageSettled()))
      throw new UnavailableError(
        'usage_not_settled',
        'Usage records are still on their way to the usage store; try again in a moment',
      );
    const outcome = await inTransaction(this.pool, async (tx) => {
      // The purchase first, then the invoice: the order the billing scheduler locks them in.
      const purchase = await lockPurchase(tx, found.purchase_id);
      const closed = purchase === undefined ? undefined : await this.dunning.closeNow(tx, purchase);
      return { invoice: await findInvoice(tx, auth, id), closed };
    });
    if (outcome.closed?.publish === true) await this.dunning.publish([outcome.closed.row]);
    if (outcome.invoice === undefined || outcome.invoice.status === 'draft')
      throw new ConflictError('invoice_not_finalizable', `Invoice ${id} has no ended period to close`);
    return toInvoice(outcome.invoice, this.publicUrl);
  }

  /** The hosted page's and PDF's view of an invoice, by its token; undefined when there is none. */
  async document(token: string): Promise<InvoiceDocument | undefined> {
    if (!/^[0-9a-f]{64}$/.test(token)) return undefined;
    const row = await findInvoiceByToken(this.pool, token);
    if (row === undefined) return undefined;
    const merchant = await getProvider(this.pool, row.provider_id);
    if (merchant === undefined) return undefined;
    const invoice = toInvoice(row, this.publicUrl);
    if (invoice.pdfUrl === null) return undefined;
    return {
      invoice,
      merchant: {
        displayName: merchant.displayName,
        supportEmail: merchant.supportEmail,
        logoUrl: merchant.logoUrl,
        brandColor: merchant.brandColor,
      },
      pdfUrl: invoice.pdfUrl,
      sandbox: row.environment === 'sandbox',
    };
  }

  async get(auth: AuthContext, id: string): Promise<Invoice> {
    const row = await findInvoice(this.pool, auth, id);
    if (row === undefined) throw new NotFoundError('invoice_not_found', `No invoice ${id}`);
    return toInvoice(row, this.publicUrl);
  }

  async list(
    auth: AuthContext,
    query: {
      limit: number;
      cursor?: string | undefined;
      customerRef?: string | undefined;
      purchaseRef?: string | undefined;
      status?: string | undefined;
    },
  ) {
    let customerId: string | null = null;
    if (query.customerRef !== undefined) {
      const customer = await findCustomer(this.pool, auth, query.customerRef);
      if (customer === undefined) return { data: [], nextCursor: null };
      customerId = customer.id;
    }
    const rows = await listInvoices(this.pool, auth, {
      after: decodeCursor(query.cursor) ?? null,
      customerId,
      purchaseId: query.purchaseRef ?? null,
      status: query.status ?? null,
      limit: query.limit + 1,
    });
    return toPage(rows, query.limit, (row) => toInvoice(row, this.publicUrl));
  }

  /**
   * The usage lines the purchase's current period would close with if it ended now: the units the
   * plan's limit counts on the requests meter since the period started (calls admitted for this
   * product and usage reported for it; refused calls never count), less the free units, priced.
   */
  async upcoming(auth: AuthContext, purchaseRef: string): Promise<UpcomingInvoice> {
    const purchase = await findPurchase(this.pool, auth, purchaseRef, false);
    if (purchase === undefined) throw new NotFoundError('purchase_not_found', `No purchase ${purchaseRef}`);
    const plan = await findPlan(this.pool, auth, purchase.plan_id);
    if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${purchase.plan_id}`);
    const settings = settingsOf(plan);
    const asOf = this.clock.now();
    const pricesUsage = settings.type === 'usage-based' || settings.type === 'hybrid';
    let units = 0;
    if (pricesUsage) {
      // Everything of the period so far, records stamped a little ahead of this clock included.
      const to = purchase.period_end ?? new Date(asOf.getTime() + 86_400_000);
      units = await this.invoicing.unitsOf(this.pool, auth, purchase, purchase.period_start, to);
    }
    const priced = pricesUsage
      ? priceUsage(
          pricingOf(settings),
          BigInt(units),
          BigInt(settings.freeUnits + purchase.rollover_units),
          'call',
        )
      : { billableUnits: 0n, lines: [], total: 0 };
    const renewal = renewalOf(purchase, settings);
    const discount = upcomingDiscount(purchase, priced.lines, renewal);
    return {
      purchaseRef: purchase.id,
      customerRef: purchase.customer_id,
      planRef: purchase.plan_id,
      currency: purchase.currency,
      periodStart: purchase.period_start.toISOString(),
      periodEnd: purchase.period_end === null ? null : purchase.period_end.toISOString(),
      asOf: asOf.toISOString(),
      usage: {
        units,
        freeUnits: settings.freeUnits + purchase.rollover_units,
        billableUnits: Number(priced.billableUnits),
      },
      lines: priced.lines,
      total: priced.total,
      renewal,
      discount,
      amountDue: priced.total + (renewal === null ? 0 : renewal.base + renewal.setupFee) + discount,
    };
  }
}

/**
 * What the purchase's discount would take off the invoice closing its period, as it stands now
 * (0 or negative): the usage so far and the renewal's charges, discounted as that invoice will
 * be if the discount still applies when it is issued (at the renewal, else at the period's end).
 */
function upcomingDiscount(
  purchase: PurchaseRow,
  usage: Array<{ description: string; quantity: number; unitAmount: string; amount: number }>,
  renewal: ReturnType<typeof renewalOf>,
): number {
  const issuedAt = renewal?.chargedAt ?? purchase.period_end?.toISOString();
  if (issuedAt === undefined) return 0;
  const flat = (kind: 'base' | 'setup_fee', amount: number) =>
    amount > 0
      ? [{ kind, description: kind, quantity: 1, unitAmount: String(amount), amount, period: null }]
      : [];
  const lines = discountedAt(
    [
      ...usage.map((line) => ({ ...line, kind: 'usage' as const, period: null })),
      ...flat('base', renewal?.base ?? 0),
      ...flat('setup_fee', renewal?.setupFee ?? 0),
    ],
    purchase.discount ?? null,
    new Date(issuedAt),
  );
  return lines.filter((line) => line.kind === 'discount').reduce((sum, line) => sum + line.amount, 0);
}

/**
 * What the invoice closing the purchase's period charges beside its usage, as the scheduler will
 * issue it: at a trial's end the first period's price and the deferred setup fee; at a period's
 * end the next period's price, when the purchase renews. Null when nothing is charged then, and
 * while past due.
 */
function renewalOf(purchase: PurchaseRow, settings: ReturnType<typeof settingsOf>) {
  const renews =
    purchase.is_recurring &&
    purchase.auto_renew &&
    !purchase.cancel_at_period_end &&
    !purchase.pays_from_credits &&
    // Past due, the open invoice is being retried: what follows depends on it.
    ['trialing', 'active'].includes(purchase.status);
  const start = purchase.status === 'trialing' ? purchase.trial_end : purchase.period_end;
  if (!renews || start === null) return null;
  const setupFee = purchase.status === 'trialing' ? purchase.setup_fee_due : 0;
  if (purchase.amount === 0 && setupFee === 0) return null;
  return {
    chargedAt: start.toISOString(),
    periodStart: start.toISOString(),
    periodEnd: periodEnd(start, settings, purchase.anchor_day).toISOString(),
    base: purchase.amount,
    setupFee,
  };
}
