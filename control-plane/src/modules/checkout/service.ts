import { ID, newId } from '@mcp-meter/ingest/kit';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../errors';
import type { CreditService } from '../credits/service';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { CardInput } from '../payments/processor';
import type { PaymentService } from '../payments/service';
import { findPlan, settingsOf } from '../plans/repository';
import { isCurrency } from '../plans/rules';
import { findProduct } from '../products/repository';
import { getProvider } from '../providers/repository';
import type { AuthContext } from '../providers/service';
import { type PurchaseService, recurringAmount } from '../purchases/service';
import { type CheckoutView, formatMoney } from './page';

interface SessionRow {
  id: string;
  provider_id: string;
  environment: 'sandbox' | 'live';
  customer_id: string;
  kind: 'plan' | 'topup';
  plan_id: string | null;
  product_id: string | null;
  topup_credits: number | null;
  amount: number;
  currency: string;
  status: 'active' | 'used' | 'expired';
  success_url: string;
  cancel_url: string | null;
  purchase_id: string | null;
  expires_at: Date;
  completed_at: Date | null;
  created_at: Date;
}

export interface CheckoutInput {
  customerRef: string;
  planRef?: string | undefined;
  topup?: { credits: number; amount: number; currency?: string | undefined } | undefined;
  successUrl?: string | undefined;
  cancelUrl?: string | undefined;
  expiresInMinutes?: number | undefined;
}

const CYCLE_WORDS: Record<string, string> = {
  weekly: 'week',
  monthly: 'month',
  quarterly: 'quarter',
  yearly: 'year',
};

/**
 * Hosted checkout: a session for one plan purchase or one credit top-up, paid on the hosted
 * page, used once. Sessions move active → used (paid) or active → expired (past expiresAt),
 * with checkout_session.created / completed / expired.
 */
export class CheckoutService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly publicUrl: string,
    private readonly purchases: PurchaseService,
    private readonly payments: PaymentService,
    private readonly credits: CreditService,
  ) {}

  urlOf(id: string): string {
    return this.url(id);
  }

  private url(id: string): string {
    return `${this.publicUrl}/checkout/${id}`;
  }

  private eventObject(r: SessionRow) {
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

  async create(auth: AuthContext, input: CheckoutInput) {
    const problem = (path: string, message: string) =>
      new ValidationError([{ path, message, location: 'body' }]);
    if ((input.planRef === undefined) === (input.topup === undefined))
      throw problem('/planRef', 'send either planRef or topup');
    const customer = await findCustomer(this.pool, auth, input.customerRef);
    if (customer === undefined)
      throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
    const id = newId(ID.checkoutSession);
    const at = this.clock.now();
    let fields: Pick<SessionRow, 'kind' | 'plan_id' | 'product_id' | 'topup_credits' | 'amount' | 'currency'>;
    if (input.planRef !== undefined) {
      const plan = await findPlan(this.pool, auth, input.planRef);
      if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${input.planRef}`);
      const product = await findProduct(this.pool, auth, plan.product_id);
      if (plan.status !== 'active' || product?.status !== 'active')
        throw problem('/planRef', 'the plan is not on sale');
      const s = settingsOf(plan);
      const dueNow = s.trialDays > 0 ? 0 : recurringAmount(s) + s.setupFee;
      fields = {
        kind: 'plan',
        plan_id: plan.id,
        product_id: plan.product_id,
        topup_credits: null,
        amount: dueNow,
        currency: s.currency,
      };
    } else {
      const topup = input.topup;
      if (topup === undefined) throw problem('/topup', 'is required');
      const merchant = await getProvider(this.pool, auth.providerId);
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
    };
    await inTransaction(this.pool, async (tx) => {
      await tx.query(
        `INSERT INTO checkout_sessions (id, provider_id, environment, customer_id, kind, plan_id, product_id, topup_credits, amount, currency,
                                        status, success_url, cancel_url, purchase_id, expires_at, completed_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
        [
          row.id,
          row.provider_id,
          row.environment,
          row.customer_id,
          row.kind,
          row.plan_id,
          row.product_id,
          row.topup_credits,
          row.amount,
          row.currency,
          row.status,
          row.success_url,
          row.cancel_url,
          row.purchase_id,
          row.expires_at,
          row.completed_at,
          row.created_at,
        ],
      );
      await writeEvent(tx, { ...auth, type: 'checkout_session.created', object: this.eventObject(row), at });
    });
    return this.toApi(row);
  }

  private async load(id: string): Promise<SessionRow> {
    const { rows } = await this.pool.query<SessionRow>('SELECT * FROM checkout_sessions WHERE id = $1', [id]);
    if (rows[0] === undefined)
      throw new NotFoundError('checkout_session_not_found', `No checkout session ${id}`);
    return rows[0];
  }

  async get(auth: AuthContext, id: string) {
    const row = await this.load(id);
    if (row.provider_id !== auth.providerId || row.environment !== auth.environment) {
      throw new NotFoundError('checkout_session_not_found', `No checkout session ${id}`);
    }
    return this.toApi(row);
  }

  /** What the hosted page shows; undefined when the session can no longer be paid. */
  async view(id: string): Promise<CheckoutView | undefined> {
    const row = await this.load(id);
    if (row.status !== 'active' || row.expires_at <= this.clock.now()) return undefined;
    const merchant = await getProvider(this.pool, row.provider_id);
    if (merchant === undefined) return undefined;
    const auth = { providerId: row.provider_id, environment: row.environment };
    const lines: string[] = [];
    let title = `${row.topup_credits ?? 0} credits`;
    if (row.plan_id !== null) {
      const plan = await findPlan(this.pool, auth, row.plan_id);
      const product =
        row.product_id === null ? undefined : await findProduct(this.pool, auth, row.product_id);
      if (plan === undefined) return undefined;
      const s = settingsOf(plan);
      title = `${product?.name ?? ''} · ${plan.name}`;
      const price = formatMoney(recurringAmount(s), s.currency);
      lines.push(
        s.billingCycle === null
          ? `${price} once`
          : `${price} per ${CYCLE_WORDS[s.billingCycle] ?? `${s.billingIntervalDays} days`}`,
      );
      if (s.type === 'usage-based' || s.type === 'hybrid')
        lines.push(`plus ${formatMoney(s.price, s.currency)} per unit used`);
      if (s.trialDays > 0) lines.push(`${s.trialDays}-day free trial; the first charge is at its end`);
      if (s.setupFee > 0) lines.push(`One-time setup fee ${formatMoney(s.setupFee, s.currency)}`);
    }
    return {
      sessionId: row.id,
      merchant: {
        displayName: merchant.displayName,
        logoUrl: merchant.logoUrl,
        termsUrl: merchant.termsUrl,
        privacyUrl: merchant.privacyUrl,
        supportEmail: merchant.supportEmail,
      },
      title,
      lines,
      dueNow: `${formatMoney(row.amount, row.currency)} due today`,
      cancelUrl: row.cancel_url,
      sandbox: row.environment === 'sandbox',
    };
  }

  /**
   * Pays a session from the hosted page; answers where to send the customer next. One payer at
   * a time: the session is claimed with a guarded UPDATE (a lease, released on failure), so
   * concurrent or repeated submissions get 409 instead of charging again. A top-up charges,
   * credits and closes the session in one transaction.
   */
  async pay(id: string, card: CardInput): Promise<{ redirectUrl: string }> {
    const row = await this.claim(id);
    let used = false;
    try {
      const auth: AuthContext = { providerId: row.provider_id, environment: row.environment };
      await this.payments.attachCard(auth, row.customer_id, card);
      if (row.kind === 'plan' && row.plan_id !== null) {
        const result = await this.purchases.activate(auth, {
          customerRef: row.customer_id,
          planRef: row.plan_id,
        });
        if (result.status !== 'activated' && result.status !== 'already_active')
          throw new DomainError('card_declined', result.message);
        await inTransaction(this.pool, (tx) => this.markUsed(tx, auth, row, result.purchaseRef ?? null));
      } else {
        const failure = await inTransaction(this.pool, async (tx) => {
          // Attempts of this session so far (the claim keeps this count from racing).
          const { rows } = await tx.query<{ attempts: number }>(
            `SELECT count(*)::int AS attempts FROM payments WHERE customer_id = $1 AND period_key = $2 AND purchase_id IS NULL`,
            [row.customer_id, row.id],
          );
          const charged = await this.payments.charge(tx, auth, {
            customerId: row.customer_id,
            purchaseId: null,
            productId: null,
            planId: null,
            amount: row.amount,
            currency: row.currency,
            reason: 'topup',
            periodKey: row.id,
            attempt: rows[0]?.attempts ?? 0,
          });
          // A refused card keeps its failed attempt (and payment.failed); the session stays open.
          if (charged.status === 'failed') return charged.failureReason ?? 'failed';
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
    const { rows } = await this.pool.query<SessionRow>(
      `UPDATE checkout_sessions SET paying_until = $2::timestamptz + interval '2 minutes'
        WHERE id = $1 AND status = 'active' AND expires_at > $2 AND (paying_until IS NULL OR paying_until <= $2)
        RETURNING *`,
      [id, at],
    );
    if (rows[0] !== undefined) return rows[0];
    const row = await this.load(id);
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
    await this.pool.query(
      `UPDATE checkout_sessions SET paying_until = NULL WHERE id = $1 AND status = 'active'`,
      [id],
    );
  }

  private async markUsed(tx: PoolClient, auth: AuthContext, row: SessionRow, purchaseId: string | null) {
    const at = this.clock.now();
    const { rows } = await tx.query<SessionRow>(
      `UPDATE checkout_sessions SET status = 'used', completed_at = $2, purchase_id = $3, paying_until = NULL
        WHERE id = $1 AND status = 'active' RETURNING *`,
      [row.id, at, purchaseId],
    );
    const used = rows[0];
    if (used === undefined)
      throw new ConflictError('checkout_session_closed', 'This checkout session was closed');
    await writeEvent(tx, {
      ...auth,
      type: 'checkout_session.completed',
      object: this.eventObject(used),
      previousAttributes: { status: 'active' },
      at,
    });
  }

  /** Marks sessions past their expiry as expired, each with its event; run by the scheduler. */
  async expireDue(): Promise<number> {
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<SessionRow>(
        `UPDATE checkout_sessions SET status = 'expired' WHERE id IN (
           SELECT id FROM checkout_sessions WHERE status = 'active' AND expires_at <= $1 ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED)
         RETURNING *`,
        [at],
      );
      for (const row of rows) {
        await writeEvent(tx, {
          providerId: row.provider_id,
          environment: row.environment,
          type: 'checkout_session.expired',
          object: this.eventObject(row),
          previousAttributes: { status: 'active' },
          at,
        });
      }
      return rows.length;
    });
  }
}
