import type { Logger } from '@mcp-meter/contracts/kit';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { keysetPage, positionOf } from '../../http/keyset';
import type { Mailer } from '../../mail';
import type { AuthContext } from '../../tenancy';
import { findInvoice, type InvoiceRow, listInvoices } from '../billing/repository';
import { hostedInvoiceUrl } from '../billing/service';
import { customerFilter } from '../customers/filter';
import { findCustomer } from '../customers/repository';
import { findDefaultMethod, findPaymentSummary, type PaymentSummary } from '../payments/repository';
import { findPlan } from '../plans/repository';
import { signInPath } from '../portal/page';
import { getProvider } from '../providers/repository';
import { composeMail } from './compose';
import {
  changeMailKinds,
  type LeasedMail,
  leaseDueMails,
  listMails,
  MAIL_KINDS,
  type MailKind,
  type MailRow,
  mailKinds,
  settleMail,
  topUpOfPayment,
} from './repository';
import type { CustomerEmailSettings, CustomerEmailUpdate, CustomerMailQuery } from './schemas';

/** The settings' names for the kinds, as the API shows them. */
const SETTING_OF: Record<MailKind, keyof Static<typeof CustomerEmailSettings>> = {
  payment_failed: 'paymentFailed',
  trial_ending: 'trialEnding',
  upcoming_renewal: 'upcomingRenewal',
  receipt: 'receipts',
  refund: 'refunds',
  auto_topup_failed: 'autoTopUpFailed',
  card_expiring: 'expiringCards',
  cancellation: 'cancellations',
};

/** After each failed attempt, the wait before the next; after the last, the mail has failed. */
export const MAIL_RETRY_MINUTES = [1, 5, 30, 120, 360] as const;
/** How long a mail taken for sending is another pass's to leave alone (a send times out in 35 s). */
const LEASE_MS = 5 * 60_000;

const toMessage = (r: MailRow) => ({
  id: r.id,
  kind: r.kind,
  status: r.status,
  customerRef: r.customer_id,
  event: r.event_id,
  to: r.to_address,
  subject: r.subject,
  attempts: r.attempts,
  lastError: r.last_error,
  createdAt: r.created_at.toISOString(),
  sentAt: r.sent_at?.toISOString() ?? null,
});

/**
 * Mail to a provider's customers about their billing, as Stripe Billing sends it: a failed
 * recurring payment (with the day of the next try and a way to pay now), a trial about to end, a
 * renewal coming up, a receipt, a refund, an automatic top-up that could not be paid, a card about
 * to expire, a plan cancelled. A provider turns each kind on per environment; every event of a
 * kind turned on writes its mail in its own transaction (repository.ts), and `runDue`, a job of
 * the scheduler's pass, words and sends it, trying again on MAIL_RETRY_MINUTES. A mail is sent
 * at least once: SMTP accepting it and a crash before it is marked sent would send it again.
 */
export class CustomerEmails {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
    private readonly logger: Logger,
    private readonly publicUrl: string,
  ) {}

  async settings(auth: AuthContext): Promise<Static<typeof CustomerEmailSettings>> {
    return this.flags(await mailKinds(this.pool, auth));
  }

  private flags(kinds: readonly MailKind[]): Static<typeof CustomerEmailSettings> {
    const on = new Set(kinds);
    return Object.fromEntries(MAIL_KINDS.map((k) => [SETTING_OF[k], on.has(k)])) as Static<
      typeof CustomerEmailSettings
    >;
  }

  async update(auth: AuthContext, input: Static<typeof CustomerEmailUpdate>) {
    const kinds = await changeMailKinds(
      this.pool,
      auth,
      {
        on: MAIL_KINDS.filter((k) => input[SETTING_OF[k]] === true),
        off: MAIL_KINDS.filter((k) => input[SETTING_OF[k]] === false),
      },
      this.clock.now(),
    );
    return this.flags(kinds);
  }

  async list(auth: AuthContext, query: Static<typeof CustomerMailQuery>) {
    const customerId = await customerFilter(this.pool, auth, query.customerRef);
    const rows = await listMails(this.pool, auth, {
      customerId,
      ...(query.cursor === undefined ? {} : { after: positionOf(query.cursor) }),
      limit: query.limit,
    });
    return keysetPage(rows, query.limit, toMessage);
  }

  /** Sends what is due, a batch at a time; answers how many mails were sent. */
  async runDue(batch = 50): Promise<number> {
    let sent = 0;
    for (;;) {
      const now = this.clock.now();
      const due = await leaseDueMails(this.pool, now, new Date(now.getTime() + LEASE_MS), batch);
      for (const mail of due) if (await this.sendOne(mail)) sent++;
      if (due.length < batch) return sent;
    }
  }

  private async sendOne(mail: LeasedMail): Promise<boolean> {
    try {
      const message = await this.word(mail);
      if (message === null) return false;
      await this.mailer.send(message);
      // Written to the log (MAIL_TO_LOG) is not sent: nobody received it.
      const status = this.mailer.delivers ? 'sent' : 'logged';
      await settleMail(this.pool, mail, { status, ...message, at: this.clock.now() });
      return true;
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      const wait = MAIL_RETRY_MINUTES[mail.attempts - 1];
      this.logger.warn({ err: error, mail: mail.id, attempt: mail.attempts }, 'customer mail not sent');
      await settleMail(
        this.pool,
        mail,
        wait === undefined
          ? { status: 'failed', why }
          : { status: 'pending', why, retryAt: new Date(this.clock.now().getTime() + wait * 60_000) },
      );
      return false;
    }
  }

  /** The message, or null (and the mail skipped) when there is nobody to send it to. */
  private async word(mail: LeasedMail): Promise<{ to: string; subject: string; text: string } | null> {
    const tenant = { providerId: mail.provider_id, environment: mail.environment };
    const customer = await findCustomer(this.pool, tenant, mail.customer_id);
    const skip = async (why: string) => {
      await settleMail(this.pool, mail, { status: 'skipped', why });
      return null;
    };
    // The setting as it is now: a kind turned off since its event sends nothing more.
    if (!(await mailKinds(this.pool, tenant)).includes(mail.kind))
      return skip('this kind of mail was turned off');
    if (customer === undefined) return skip('the customer was deleted');
    if (customer.email === null) return skip('the customer has no email address');
    if (mail.event === null) return skip('the event is no longer kept');
    const object = mail.event.data.object;
    const merchant = await getProvider(this.pool, mail.provider_id);
    const payment = await this.paymentOf(mail, object);
    const planId = typeof object.plan === 'string' ? object.plan : (payment?.plan_id ?? null);
    const plan = planId === null ? undefined : await findPlan(this.pool, tenant, planId);
    const invoice = await this.invoiceOf(mail, object, payment);
    const message = composeMail({
      kind: mail.kind,
      type: mail.event.type,
      occurredAt: mail.event.created,
      object,
      sandbox: mail.environment === 'sandbox',
      merchant: {
        displayName: merchant?.displayName ?? 'Your provider',
        supportEmail: merchant?.supportEmail ?? null,
      },
      customerName: customer.name,
      planName: plan?.name ?? null,
      invoice:
        invoice === undefined
          ? null
          : {
              total: invoice.total,
              currency: invoice.currency,
              hostedUrl: hostedInvoiceUrl(this.publicUrl, invoice),
            },
      payment:
        payment === undefined
          ? null
          : { amount: payment.amount, currency: payment.currency, createdAt: payment.created_at },
      topUp:
        mail.kind === 'receipt' && typeof object.id === 'string'
          ? ((await topUpOfPayment(this.pool, object.id)) ?? null)
          : null,
      hasCard: (await findDefaultMethod(this.pool, customer.id)) !== undefined,
      portalUrl: `${this.publicUrl}${signInPath(tenant)}`,
    });
    return { to: customer.email, ...message };
  }

  /** The payment a receipt is for, or the one a refund returns money of. */
  private async paymentOf(
    mail: LeasedMail,
    object: Record<string, unknown>,
  ): Promise<PaymentSummary | undefined> {
    const id = mail.kind === 'receipt' ? object.id : mail.kind === 'refund' ? object.payment : undefined;
    return typeof id === 'string' ? findPaymentSummary(this.pool, id) : undefined;
  }

  /** A failed payment's open invoice (the purchase's newest), or the invoice a payment paid. */
  private async invoiceOf(
    mail: LeasedMail,
    object: Record<string, unknown>,
    payment: PaymentSummary | undefined,
  ): Promise<InvoiceRow | undefined> {
    const tenant = { providerId: mail.provider_id, environment: mail.environment };
    if (mail.kind === 'payment_failed' && typeof object.id === 'string') {
      const open = await listInvoices(this.pool, tenant, {
        after: null,
        customerId: mail.customer_id,
        purchaseId: object.id,
        status: 'open',
        limit: 100,
      });
      return open.at(-1);
    }
    const invoiceId = payment?.invoice_id ?? null;
    return invoiceId === null ? undefined : findInvoice(this.pool, tenant, invoiceId);
  }
}
