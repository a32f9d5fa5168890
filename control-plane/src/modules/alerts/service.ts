import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import type { UsageReader } from '@mcp-meter/contracts/usage';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import type { Mailer } from '../../mail';
import type { AuthContext } from '../../tenancy';
import type { BillingService } from '../billing/service';
import { formatMoney } from '../checkout/page';
import { findCustomer } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import { findMeter, REQUESTS_METER } from '../meters/repository';
import { findPlan } from '../plans/repository';
import { getProvider } from '../providers/repository';
import {
  type AlertMail,
  type AlertRow,
  deleteAlert,
  type FiringKey,
  insertAlert,
  leaseUnsentMails,
  listAlerts,
  lowBalances,
  markMailed,
  recordFiring,
  watchedAllowances,
  watchedSpends,
} from './repository';
import type { Alert, AlertCreate } from './schemas';

/** How long one pass has to send an alert's mail before another takes it over. */
const MAIL_LEASE_MS = 5 * 60_000;

const toAlert = (row: AlertRow): Static<typeof Alert> => ({
  id: row.id,
  planRef: row.plan_id,
  customerRef: row.customer_id,
  kind: row.kind,
  threshold: Number(row.threshold),
  createdAt: row.created_at.toISOString(),
});

/** One crossing to announce: the alert, whom it concerns, and what was measured. */
interface Crossing {
  alertId: string;
  tenant: AuthContext;
  customerId: string;
  kind: AlertRow['kind'];
  threshold: number;
  periodKey: string;
  value: number;
  /** For allowance and spend alerts: the purchase; its limit, or the currency of the amounts. */
  purchaseId?: string;
  limit?: number;
  currency?: string;
}

/**
 * Spend and usage alerts (docs/portal.md#alerts): a provider's on a plan, or a customer's own.
 * Each scheduler pass measures what every alert watches (the calls of each purchase's period
 * against its plan's limit, from the usage store as the limit counters start from; the credit
 * balance) and announces each crossing once per period: a `customer.alert_triggered` event,
 * written with the firing's row, whose primary key makes it once however many passes race, and
 * a mail to the customer when they have an address.
 */
export class AlertService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly reader: UsageReader,
    private readonly mailer: Mailer,
    private readonly logger: Logger,
    /** Prices a period's usage so far, as the upcoming invoice does (spend alerts). */
    private readonly billing: Pick<BillingService, 'upcoming'>,
  ) {}

  async create(auth: AuthContext, input: Static<typeof AlertCreate>) {
    const problem = (path: string, message: string) =>
      new ValidationError([{ path, message, location: 'body' }]);
    if ((input.planRef === undefined) === (input.customerRef === undefined))
      throw problem('/planRef', 'send either planRef (every customer of the plan) or customerRef');
    if (input.kind === 'allowance_percent' && (input.threshold < 1 || input.threshold > 1000))
      throw problem('/threshold', 'is a percent of the allowance, from 1 to 1000');
    if (input.kind === 'spend_amount' && input.threshold < 1)
      throw problem('/threshold', 'is an amount in minor units (cents), at least 1');
    let planId: string | null = null;
    let customerId: string | null = null;
    if (input.planRef !== undefined) {
      const plan = await findPlan(this.pool, auth, input.planRef);
      if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${input.planRef}`);
      if (input.kind === 'allowance_percent' && plan.usage_limit === null)
        throw problem('/planRef', 'the plan has no limit to measure an allowance against');
      if (input.kind === 'spend_amount' && !['usage-based', 'hybrid'].includes(plan.type))
        throw problem('/planRef', 'the plan prices no usage: its spend never grows within a period');
      planId = plan.id;
    } else if (input.customerRef !== undefined) {
      const customer = await findCustomer(this.pool, auth, input.customerRef);
      if (customer === undefined)
        throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
      customerId = customer.id;
    }
    const row = await insertAlert(this.pool, {
      id: newId(ID.alert),
      provider_id: auth.providerId,
      environment: auth.environment,
      plan_id: planId,
      customer_id: customerId,
      kind: input.kind,
      threshold: input.threshold,
      created_at: this.clock.now(),
    });
    if (row === undefined) throw new ConflictError('alert_exists', 'The same alert exists already');
    return toAlert(row);
  }

  async list(auth: AuthContext, query: { planRef?: string | undefined; customerRef?: string | undefined }) {
    const customer =
      query.customerRef === undefined ? undefined : await findCustomer(this.pool, auth, query.customerRef);
    if (query.customerRef !== undefined && customer === undefined) return { data: [] };
    const rows = await listAlerts(this.pool, auth, { planId: query.planRef, customerId: customer?.id });
    return { data: rows.map(toAlert) };
  }

  async remove(auth: AuthContext, id: string) {
    const row = await deleteAlert(this.pool, auth, id);
    if (row === undefined) throw new NotFoundError('alert_not_found', `No alert ${id}`);
    return { id: row.id, deleted: true as const };
  }

  /** Scheduler job: every crossing not announced yet; answers how many it announced. */
  async runDue(): Promise<number> {
    const at = this.clock.now();
    const crossings: Crossing[] = [];
    for (const w of await watchedAllowances(this.pool)) {
      const tenant: AuthContext = { providerId: w.provider_id, environment: w.environment };
      try {
        const meter = await findMeter(this.pool, w.provider_id, w.environment, REQUESTS_METER);
        if (meter === undefined) continue;
        const used = await this.reader.limitUsage({
          ...tenant,
          meterRef: meter.id,
          customerRef: w.customer_id,
          productId: w.product_id,
          from: w.period_start,
          to: new Date(at.getTime() + 60_000),
        });
        // Whole numbers: used / limit ≥ threshold %, without rounding either side.
        if (used * 100 < Number(w.threshold) * w.usage_limit) continue;
        crossings.push({
          alertId: w.alert_id,
          tenant,
          customerId: w.customer_id,
          kind: 'allowance_percent',
          threshold: Number(w.threshold),
          periodKey: `${w.purchase_id}:${w.period_start.toISOString()}`,
          value: Math.floor((used * 100) / w.usage_limit),
          purchaseId: w.purchase_id,
          limit: w.usage_limit,
        });
      } catch (error) {
        // The usage store away: measured again at the next pass, nothing lost.
        this.logger.warn({ err: error, alert: w.alert_id }, 'allowance alert not measured');
      }
    }
    for (const w of await watchedSpends(this.pool)) {
      const tenant: AuthContext = { providerId: w.provider_id, environment: w.environment };
      try {
        // The period's price was paid in advance (a trial's is not yet); the usage so far as the
        // upcoming invoice prices it, to the cent.
        const usage = (await this.billing.upcoming(tenant, w.purchase_id)).total;
        const spent = (w.status === 'active' ? w.amount : 0) + usage;
        if (spent < Number(w.threshold)) continue;
        crossings.push({
          alertId: w.alert_id,
          tenant,
          customerId: w.customer_id,
          kind: 'spend_amount',
          threshold: Number(w.threshold),
          periodKey: `${w.purchase_id}:${w.period_start.toISOString()}`,
          value: spent,
          purchaseId: w.purchase_id,
          currency: w.currency,
        });
      } catch (error) {
        this.logger.warn({ err: error, alert: w.alert_id }, 'spend alert not measured');
      }
    }
    for (const b of await lowBalances(this.pool))
      crossings.push({
        alertId: b.alert_id,
        tenant: { providerId: b.provider_id, environment: b.environment },
        customerId: b.customer_id,
        kind: 'credit_balance',
        threshold: Number(b.threshold),
        periodKey: `funding:${b.funding}`,
        value: Number(b.balance),
      });
    let fired = 0;
    for (const crossing of crossings) if (await this.announce(crossing, at)) fired++;
    await this.resendMails(at);
    return fired;
  }

  /**
   * The firing, its event and its mail in one transaction, then the mail is sent; false when
   * fired already. A mail not sent (a crash, SMTP away) is sent by a later pass (resendMails).
   */
  private async announce(c: Crossing, at: Date): Promise<boolean> {
    const mail = await this.mailOf(c);
    const fired = await inTransaction(this.pool, async (tx) => {
      if (!(await recordFiring(tx, { ...c, at }, mail))) return false;
      await writeEvent(tx, {
        ...c.tenant,
        type: 'customer.alert_triggered',
        object: {
          alert: c.alertId,
          customer: c.customerId,
          kind: c.kind,
          threshold: c.threshold,
          value: c.value,
          period: c.periodKey,
          ...(c.purchaseId === undefined ? {} : { purchase: c.purchaseId }),
          ...(c.limit === undefined ? {} : { limit: c.limit }),
          ...(c.currency === undefined ? {} : { currency: c.currency }),
          created: unixSeconds(at),
        },
        at,
      });
      return true;
    });
    if (fired && mail !== null)
      await this.send({ alert_id: c.alertId, customer_id: c.customerId, period_key: c.periodKey, ...mail });
    return fired;
  }

  /** Sends a firing's mail and marks it sent; a failure is logged, and a later pass tries again. */
  private async send(mail: FiringKey & AlertMail): Promise<void> {
    try {
      await this.mailer.send({ to: mail.to, subject: mail.subject, text: mail.text });
      await markMailed(this.pool, mail, this.clock.now());
    } catch (error) {
      this.logger.error(
        { err: error, alert: mail.alert_id },
        'alert mail not sent; a later pass tries again',
      );
    }
  }

  /** Mails of the last day whose sending did not finish within five minutes, sent again. */
  private async resendMails(at: Date): Promise<void> {
    const unsent = await leaseUnsentMails(
      this.pool,
      at,
      new Date(at.getTime() - MAIL_LEASE_MS),
      new Date(at.getTime() - 86_400_000),
    );
    for (const mail of unsent) await this.send(mail);
  }

  /** What to mail the customer about a crossing; null when they have no address. */
  private async mailOf(c: Crossing): Promise<AlertMail | null> {
    const customer = await findCustomer(this.pool, c.tenant, c.customerId);
    if (customer?.email == null) return null;
    const merchant = (await getProvider(this.pool, c.tenant.providerId))?.displayName ?? 'Your provider';
    const money = (cents: number) => formatMoney(cents, c.currency ?? 'usd');
    const { subject, text } = {
      allowance_percent: {
        subject: `${c.threshold}% of your allowance used`,
        text: `You have used ${c.value}% of your allowance this period (${c.threshold}% was your alert).`,
      },
      credit_balance: {
        subject: 'your credits are running low',
        text: `Your credit balance is ${c.value} credits, below the ${c.threshold} of your alert.`,
      },
      spend_amount: {
        subject: `you have spent ${money(c.threshold)} this period`,
        text: `You have spent ${money(c.value)} this period, reaching the ${money(c.threshold)} of your alert.`,
      },
    }[c.kind];
    return { to: customer.email, subject: `${merchant}: ${subject}`, text };
  }
}
