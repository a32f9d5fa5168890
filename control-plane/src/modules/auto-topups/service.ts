import { ID, type Logger, newId } from '@mcp-meter/contracts/kit';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { lockBalance } from '../credits/repository';
import type { CreditService } from '../credits/service';
import type { UsageDebits } from '../credits/usage-debits';
import { findCustomer, lockCustomerRow } from '../customers/repository';
import { unixSeconds, writeEvent } from '../events/outbox';
import type { PaymentService } from '../payments/service';
import { findProduct } from '../products/repository';
import { packOf } from './pack';
import {
  type AutoTopUpRow,
  deleteAutoTopUp,
  dueAutoTopUps,
  findAutoTopUp,
  lockAutoTopUp,
  recordAttempt,
  upsertAutoTopUp,
} from './repository';
import type { AutoTopUp, AutoTopUpUpdate } from './schemas';

/** Failed attempts in a row after which a setting stops until it is set again. */
export const MAX_FAILURES = 3;
/** How long a failed attempt holds the next one back, by failures in a row. */
const RETRY_AFTER_MS = [60 * 60_000, 6 * 60 * 60_000];

const toSetting = (row: AutoTopUpRow): Static<typeof AutoTopUp> => ({
  id: row.id,
  customerRef: row.customer_id,
  productRef: row.product_id,
  threshold: Number(row.threshold),
  packs: row.packs,
  status: row.status,
  failures: row.failures,
  lastFailure: row.last_failure,
  retryAt: row.retry_at?.toISOString() ?? null,
  updatedAt: row.updated_at.toISOString(),
});

/** What one check of a customer's auto top-up came to. */
export type TopUpOutcome =
  | { kind: 'none' }
  | { kind: 'not_needed'; balance: number }
  | { kind: 'succeeded'; credits: number; amount: number; paymentId: string }
  | { kind: 'failed'; reason: string; stopped: boolean };

/**
 * Auto top-up (docs/credits.md): when usage takes a customer's credit balance under the
 * threshold they set, one off-session charge of their default card buys packs of the top-up pack
 * of their plan of the named product, and the credits land in the same transaction as the
 * payment. The decision, the charge and the credits are made under the setting's row lock with
 * the balance re-read: any number of concurrent triggers (settlements, debits, the scheduler's
 * sweep) make one top-up per crossing. The charge's idempotency key is the setting and its
 * attempt count, so a transaction retried after the processor answered charges once. Three
 * failures in a row stop the setting; each failure holds the next try back.
 */
export class AutoTopUps {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly credits: CreditService,
    private readonly payments: PaymentService,
    private readonly usage: UsageDebits | undefined,
    private readonly logger: Logger,
  ) {}

  private async customer(auth: AuthContext, ref: string) {
    const customer = await findCustomer(this.pool, auth, ref);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${ref}`);
    return customer;
  }

  async get(auth: AuthContext, ref: string) {
    const customer = await this.customer(auth, ref);
    const row = await findAutoTopUp(this.pool, customer.id);
    if (row === undefined)
      throw new NotFoundError('auto_top_up_not_found', `Customer ${ref} has no auto top-up`);
    return toSetting(row);
  }

  /** Sets (or replaces) the customer's auto top-up; it may fire at once if the balance is under it. */
  async set(auth: AuthContext, ref: string, input: Static<typeof AutoTopUpUpdate>) {
    const customer = await this.customer(auth, ref);
    const product = await findProduct(this.pool, auth, input.productRef);
    if (product === undefined) throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
    if (!Number.isSafeInteger(input.threshold))
      throw new ValidationError([
        { path: '/threshold', message: 'must be a safe integer', location: 'body' },
      ]);
    const row = await upsertAutoTopUp(this.pool, {
      id: newId(ID.autoTopUp),
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: customer.id,
      product_id: product.id,
      threshold: input.threshold,
      packs: input.packs ?? 1,
      at: this.clock.now(),
    });
    this.fireAndForget(auth, customer.id);
    return toSetting(row);
  }

  async remove(auth: AuthContext, ref: string) {
    const customer = await this.customer(auth, ref);
    if (!(await deleteAutoTopUp(this.pool, customer.id)))
      throw new NotFoundError('auto_top_up_not_found', `Customer ${ref} has no auto top-up`);
    return { customerRef: customer.id, deleted: true as const };
  }

  /** After a movement that lowered a balance: checks it without holding up the caller. */
  fireAndForget(tenant: AuthContext, customerId: string): void {
    void this.check(tenant, customerId).catch((error: unknown) =>
      this.logger.error({ err: error, customer: customerId }, 'auto top-up check failed; the sweep retries'),
    );
  }

  /**
   * Customer deletion (a `customers.onDelete` hook, in the deletion's transaction after the
   * customer's lock): the setting goes with the customer, so nothing tops a deleted customer up.
   */
  async endAllOf(tx: PoolClient, customerId: string): Promise<void> {
    await deleteAutoTopUp(tx, customerId);
  }

  /** Scheduler job: every customer whose balance is under an active setting's threshold. */
  async runDue(): Promise<number> {
    let fired = 0;
    for (const due of await dueAutoTopUps(this.pool, this.clock.now())) {
      try {
        const outcome = await this.check(
          { providerId: due.provider_id, environment: due.environment },
          due.customer_id,
        );
        if (outcome.kind === 'succeeded' || outcome.kind === 'failed') fired++;
      } catch (error) {
        this.logger.error({ err: error, customer: due.customer_id }, 'auto top-up failed to run');
      }
    }
    return fired;
  }

  /**
   * Decides and, when due, makes the customer's top-up: under the setting's lock, with the
   * calls recorded so far debited first and the balance locked, so concurrent checks see the
   * balance the first one left.
   */
  async check(tenant: AuthContext, customerId: string): Promise<TopUpOutcome> {
    const outcome = await inTransaction(this.pool, async (tx) => {
      const setting = await lockAutoTopUp(tx, customerId);
      const at = this.clock.now();
      if (setting === undefined || setting.status !== 'active') return { kind: 'none' } as const;
      if (setting.retry_at !== null && setting.retry_at > at) return { kind: 'none' } as const;
      // Locks in the order every credit movement takes them (the customer, then its balance),
      // so a check and a movement never wait on each other in a cycle.
      // A customer deleted since the setting was read is charged nothing (its setting goes with
      // the deletion; this sees one committed meanwhile).
      const status = await lockCustomerRow(tx, customerId);
      if (status === undefined || status === 'deleted') return { kind: 'none' } as const;
      await this.usage?.settleIn(tx, tenant, customerId);
      const balance = await lockBalance(tx, customerId, at);
      if (balance >= Number(setting.threshold)) return { kind: 'not_needed', balance } as const;
      return this.topUp(tx, tenant, setting, balance, at);
    });
    // The proxies admit calls on the new credits once told.
    if (outcome.kind === 'succeeded') await this.credits.announce(customerId);
    return outcome;
  }

  private async topUp(
    tx: PoolClient,
    tenant: AuthContext,
    setting: AutoTopUpRow,
    balance: number,
    at: Date,
  ): Promise<TopUpOutcome> {
    const attempt = setting.attempts + 1;
    const pack = await packOf(tx, tenant, setting.customer_id, setting.product_id);
    let failure: string | undefined;
    let paid: { credits: number; amount: number; paymentId: string } | undefined;
    /** What this attempt asked to be paid, once its pack is known (a failed attempt's event names it). */
    let asked: { credits: number; amount: number; currency: string } | undefined;
    if (typeof pack === 'string') failure = pack;
    else {
      const amount = pack.amount * setting.packs;
      const credits = pack.credits * setting.packs;
      asked = { credits, amount, currency: pack.currency };
      const charged = await this.payments.charge(tx, tenant, {
        customerId: setting.customer_id,
        // A top-up pays for credits, not the purchase's period: held apart from its invoices.
        purchaseId: null,
        productId: setting.product_id,
        planId: pack.planId,
        amount,
        currency: pack.currency,
        reason: 'topup',
        periodKey: `auto_topup:${setting.id}`,
        attempt,
        revenue: [{ amount, start: null, end: null, line: 'top_up' }],
      });
      if (charged.status === 'failed') failure = charged.failureReason ?? 'failed';
      else {
        await this.credits.moveIn(
          tx,
          tenant,
          setting.customer_id,
          { kind: 'top_up', amount: credits, reason: 'auto_top_up' },
          `auto_topup:${setting.id}:${attempt}`,
        );
        paid = { credits, amount, paymentId: charged.paymentId };
      }
    }
    const failures = failure === undefined ? 0 : setting.failures + 1;
    const stopped = failures >= MAX_FAILURES;
    const retryAt =
      failure === undefined || stopped
        ? null
        : new Date(at.getTime() + (RETRY_AFTER_MS[failures - 1] ?? RETRY_AFTER_MS[0] ?? 0));
    await recordAttempt(tx, setting.id, {
      attempts: attempt,
      failures,
      status: stopped ? 'stopped' : 'active',
      retryAt,
      lastFailure: failure ?? null,
      at,
    });
    const object = {
      id: setting.id,
      customer: setting.customer_id,
      product: setting.product_id,
      threshold: Number(setting.threshold),
      balance_before: balance,
      attempt,
      created: unixSeconds(at),
      ...(paid === undefined
        ? {
            ...asked,
            failure_reason: failure,
            failures,
            stopped,
            retry_at: retryAt === null ? null : unixSeconds(retryAt),
          }
        : { credits: paid.credits, amount: paid.amount, payment: paid.paymentId }),
    };
    await writeEvent(tx, {
      ...tenant,
      type: paid === undefined ? 'credits.auto_topup_failed' : 'credits.auto_topup_succeeded',
      object,
      at,
    });
    return paid === undefined
      ? { kind: 'failed', reason: failure ?? 'failed', stopped }
      : { kind: 'succeeded', ...paid };
  }
}
