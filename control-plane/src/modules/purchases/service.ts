import type { Logger } from '@mcp-meter/contracts/kit';
import { ID, newId } from '@mcp-meter/contracts/kit';
import type { SnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type PoolClient } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import { decodeCursor, toPage } from '../../http/schemas';
import type { AuthContext } from '../../tenancy';
import type { Discount } from '../billing/discounts';
import type { Invoicing } from '../billing/invoicing';
import { type CouponService, redemptionTarget } from '../coupons/service';
import { findBalance } from '../credits/repository';
import { findCustomer, lockCustomerRow } from '../customers/repository';
import { writeEvent } from '../events/outbox';
import type { Refunder } from '../payments/refunder';
import type { PaymentService } from '../payments/service';
import { type PlanRow, settingsOf } from '../plans/repository';
import { billsUsage, isCreditPaid, recurringAmount } from '../plans/rules';
import { type CancelOptions, requested } from './cancellation';
import {
  type ActivationStatus,
  firstCharges,
  PlanChanges,
  type Proration,
  prorationDateOf,
  resolveActivation,
  type StartMove,
  startMoveOf,
  switchTerms,
} from './changes';
import { PurchaseDiscounts } from './discounts';
import { EntitlementPublisher } from './entitlements';
import { endsMidPeriod, firstPeriod } from './periods';
import { finishesHeldEnd, heldEarlyEnd, refundUnusedTime, unusedTimeOf } from './proration';
import {
  findPurchase,
  insertPurchase,
  listPurchases,
  lockLivePurchase,
  lockLivePurchasesOf,
  type PurchaseRow,
  updatePurchase,
} from './repository';
import { type MoveName, TransitionError, transition } from './state-machine';
import { eventObject, toPurchase } from './views';

export type { PurchaseRow };
export { recurringAmount };

class FirstPaymentFailed extends Error {}

export class PurchaseService {
  private readonly entitlements: EntitlementPublisher;
  /** Previews of switches and cancellations, before the customer confirms them. */
  readonly changes: PlanChanges;
  /** Coupons redeemed on purchases (docs/coupons.md). */
  readonly discounts: PurchaseDiscounts;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    snapshots: SnapshotStore,
    logger: Logger,
    private readonly payments: PaymentService,
    private readonly invoicing: Invoicing,
    /** Returns the unused time of a switched-away plan to the card that paid it. */
    private readonly refunder: Refunder,
    /** Creates the hosted checkout session a paid activation answers with. */
    private readonly checkoutSessions: {
      create(
        auth: AuthContext,
        input: { customerRef: string; planRef: string; coupon?: string | undefined },
      ): Promise<{ id: string; url: string }>;
    },
    coupons: CouponService,
  ) {
    this.entitlements = new EntitlementPublisher(pool, snapshots, logger);
    this.discounts = new PurchaseDiscounts(pool, clock, coupons);
    this.changes = new PlanChanges(pool, clock, refunder, payments, this.discounts);
  }

  private async find(
    db: Pool | PoolClient,
    auth: AuthContext,
    ref: string,
    forUpdate = false,
  ): Promise<PurchaseRow> {
    const row = await findPurchase(db, auth, ref, forUpdate);
    if (row === undefined) throw new NotFoundError('purchase_not_found', `No purchase ${ref}`);
    return row;
  }

  async get(auth: AuthContext, ref: string) {
    return toPurchase(await this.find(this.pool, auth, ref));
  }

  async list(
    auth: AuthContext,
    query: {
      limit: number;
      cursor?: string | undefined;
      customerRef?: string | undefined;
      status?: string | undefined;
    },
  ) {
    let customerId: string | null = null;
    if (query.customerRef !== undefined) {
      const customer = await findCustomer(this.pool, auth, query.customerRef);
      if (customer === undefined) return { data: [], nextCursor: null };
      customerId = customer.id;
    }
    const rows = await listPurchases(this.pool, auth, {
      after: decodeCursor(query.cursor) ?? null,
      customerId,
      status: query.status ?? null,
      limit: query.limit + 1,
    });
    return toPage(rows, query.limit, toPurchase);
  }

  /** Applies one move of the state machine and writes its events, inside the caller's transaction. */
  async apply(
    tx: PoolClient,
    auth: AuthContext,
    row: PurchaseRow,
    move: MoveName,
    changes: Partial<PurchaseRow> = {},
    previousAttributes: Record<string, unknown> | null = null,
  ): Promise<PurchaseRow> {
    let next: ReturnType<typeof transition>;
    try {
      next = transition({ status: row.status, cancelAtPeriodEnd: row.cancel_at_period_end }, move);
    } catch (error) {
      if (error instanceof TransitionError)
        throw new ConflictError('invalid_transition', `Purchase ${row.id}: ${error.message}`);
      throw error;
    }
    const at = this.clock.now();
    const updated: PurchaseRow = { ...row, ...changes, status: next.status, updated_at: at };
    await updatePurchase(tx, updated);
    const previous = previousAttributes ?? (row.status === updated.status ? null : { status: row.status });
    for (const type of next.events)
      await writeEvent(tx, { ...auth, type, object: eventObject(updated), previousAttributes: previous, at });
    return updated;
  }

  private async start(
    tx: PoolClient,
    auth: AuthContext,
    customerId: string,
    plan: PlanRow,
    move: MoveName,
    discount: Discount | null,
  ): Promise<PurchaseRow> {
    const id = newId(ID.purchase);
    const at = this.clock.now();
    const settings = settingsOf(plan);
    const { trialEnd, end } = firstPeriod(settings, move === 'start_trial', at);
    const row: PurchaseRow = {
      id,
      provider_id: auth.providerId,
      environment: auth.environment,
      customer_id: customerId,
      product_id: plan.product_id,
      plan_id: plan.id,
      status: transition(null, move).status,
      // The recurring charge: usage is billed by the end-of-period billing job, not here.
      amount: recurringAmount(settings),
      currency: settings.currency,
      billing_cycle: settings.billingCycle,
      is_recurring: settings.billingCycle !== null,
      auto_renew: settings.autoRenew,
      cancel_at_period_end: false,
      period_start: at,
      period_end: end,
      // Billing starts when the trial ends, so that day anchors every later period.
      anchor_day: (trialEnd ?? at).getUTCDate(),
      trial_end: trialEnd,
      ended_at: null,
      created_at: at,
      updated_at: at,
      retry_count: 0,
      next_retry_at: null,
      trial_reminder_sent: false,
      renewal_reminder_for: null,
      // A trial defers the setup fee to the first charge, at conversion.
      setup_fee_due: move === 'start_trial' ? settings.setupFee : 0,
      bills_usage: billsUsage(settings),
      pays_from_credits: isCreditPaid(settings),
      rollover_units: 0,
      final_usage_due: false,
      discount,
    };
    await insertPurchase(tx, row);
    for (const type of transition(null, move).events)
      await writeEvent(tx, { ...auth, type, object: eventObject(row), at });
    return row;
  }

  /**
   * POST /v1/sdk/activate. Free plans (and plans with a trial) activate at once; credit-funded
   * plans need a balance; other paid plans answer payment_required (checkout sessions come with
   * the checkout part). Activating another plan of the same product switches plans: the old
   * purchase expires, the new one is created, and purchase.plan_changed names the old plan.
   */
  async activate(
    auth: AuthContext,
    input: {
      customerRef: string;
      planRef: string;
      productRef?: string | undefined;
      /** A preview's proration date: the switch credits unused time from it (changes.ts). */
      prorationDate?: string | undefined;
      /** A coupon to redeem on the new purchase (id or code). */
      coupon?: string | undefined;
    },
  ) {
    const prorationAt = prorationDateOf(input.prorationDate, this.clock.now());
    const { customer, plan, product } = await resolveActivation(this.pool, auth, input);
    const settings = settingsOf(plan);
    const creditBalance = (await findBalance(this.pool, customer.id))?.balance ?? 0;
    const result = (status: ActivationStatus, message: string, purchaseRef?: string) => ({
      status,
      message,
      ...(purchaseRef === undefined ? {} : { purchaseRef }),
      creditBalance,
      creditsPerUnit: settings.creditsPerUnit,
      currency: settings.currency,
    });
    if (plan.status !== 'active' || product.status !== 'active') {
      return result(
        'invalid',
        `Plan ${plan.id} is not on sale (${plan.status === 'active' ? `product ${product.status}` : plan.status})`,
      );
    }
    const creditFunded = isCreditPaid(settings);
    const move = await startMoveOf(settings, () => this.payments.hasDefaultMethod(this.pool, customer.id));
    if (move === 'checkout') {
      // The session checks the coupon now; the activation it runs when paid redeems it.
      const session = await this.checkoutSessions.create(auth, {
        customerRef: customer.id,
        planRef: plan.id,
        coupon: input.coupon,
      });
      return {
        ...result(
          'payment_required',
          `Plan ${plan.id} needs a payment; send the customer to the checkout URL`,
        ),
        checkoutSessionId: session.id,
        checkoutUrl: session.url,
      };
    }
    if (creditFunded && creditBalance < settings.creditsPerUnit) {
      return result(
        'topup_required',
        `Plan ${plan.id} is paid from credits; the balance (${creditBalance}) is below one unit (${settings.creditsPerUnit})`,
      );
    }

    let outcome: Awaited<ReturnType<PurchaseService['activateInTransaction']>>;
    try {
      const terms = { prorationAt, coupon: input.coupon };
      outcome = await this.activateInTransaction(auth, customer.id, product.id, plan, move, terms);
    } catch (error) {
      // Nothing is kept of a refused first payment: no purchase, no plan switch.
      if (error instanceof FirstPaymentFailed) {
        return result(
          'payment_required',
          `The card was refused (${error.message}); update it or pay at checkout`,
        );
      }
      throw error;
    }
    await this.publish(outcome.rows, plan);
    const purchase = outcome.rows.at(-1);
    return outcome.status === 'already_active'
      ? result('already_active', `Customer already has plan ${plan.id}`, purchase?.id)
      : {
          ...result(
            'activated',
            move === 'start_trial'
              ? `Trial of ${settings.trialDays} days started`
              : `Plan ${plan.id} is active`,
            purchase?.id,
          ),
          ...(outcome.proration === undefined ? {} : { proration: outcome.proration }),
        };
  }

  private activateInTransaction(
    auth: AuthContext,
    customerId: string,
    productId: string,
    plan: PlanRow,
    move: Exclude<StartMove, 'checkout'>,
    { prorationAt, coupon }: { prorationAt: Date; coupon: string | undefined },
  ) {
    const settings = settingsOf(plan);
    const customer = { id: customerId };
    const product = { id: productId };
    return inTransaction(this.pool, async (tx) => {
      // Serialises activations of one customer: two concurrent calls cannot both switch plans.
      // The customer was found before the lock: one deleted since gets no purchase and no charge.
      const status = await lockCustomerRow(tx, customer.id);
      if (status === undefined || status === 'deleted')
        throw new NotFoundError('customer_not_found', `No customer ${customer.id}`);
      const current = await lockLivePurchase(tx, customer.id, product.id);
      if (current !== undefined && current.plan_id === plan.id)
        return { status: 'already_active' as const, rows: [current] };
      const changed: PurchaseRow[] = [];
      const now = this.clock.now();
      // A switch away from a paid period credits its unused time (read before it ends), from the
      // moment of a failed attempt that refunded some of it, if one did.
      const held = await heldEarlyEnd(tx, auth, current, now);
      const unused =
        current === undefined
          ? undefined
          : await unusedTimeOf(tx, auth, this.refunder, current, held?.prorated_at ?? prorationAt);
      if (current !== undefined)
        changed.push(
          await this.apply(tx, auth, current, 'superseded', {
            ended_at: now,
            final_usage_due: endsMidPeriod(current, now),
          }),
        );
      const target = redemptionTarget(customer.id, plan.product_id, settings);
      const discount = await this.discounts.forActivation(tx, auth, target, current, coupon);
      let created = await this.start(tx, auth, customer.id, plan, move, discount);
      let invoiceId: string | null = null;
      // The first invoice's charges less the discount, before the old plan's credit is set off.
      const charges = this.discounts.firstCharges(discount, firstCharges(settings, created.period_start));
      const terms = switchTerms(move, charges, unused);
      const refund = terms.refund;
      finishesHeldEnd(held, refund);
      if (move === 'start_pending') {
        // The first invoice: the period's price plus the setup fee, less any unused time of the
        // old plan, on the customer's card.
        const charged = await this.invoicing.issue(tx, auth, {
          purchase: created,
          periodKey: 'first',
          billingReason: 'first_payment',
          chargeReason: 'first_payment',
          lines: terms.lines,
        });
        if (charged.status === 'failed') throw new FirstPaymentFailed(charged.failureReason ?? 'failed');
        created = await this.apply(tx, auth, created, 'first_payment_succeeded');
        invoiceId = charged.invoice.id;
      }
      // Made after the new charge, which may still fail and undo the switch.
      const refunded =
        unused === undefined
          ? undefined
          : await refundUnusedTime(tx, auth, this.refunder, unused, refund, {
              from: current?.id ?? '',
              at: now,
              to: created.id,
              toPlan: settings.name,
              held,
            });
      const proration: Proration | undefined =
        unused === undefined
          ? undefined
          : {
              credit: unused.amount,
              appliedToInvoice: unused.amount - refund,
              refunded: refund,
              invoiceId,
              refundId: refunded?.id ?? null,
            };
      changed.push(created);
      if (current !== undefined) {
        await writeEvent(tx, {
          ...auth,
          type: 'purchase.plan_changed',
          object: eventObject(created),
          previousAttributes: { plan: current.plan_id },
          at: this.clock.now(),
        });
      }
      return { status: 'activated' as const, rows: changed, proration };
    });
  }

  /**
   * Cancels at period end, or now; now with `prorate`, the unused time of a paid period goes back
   * to the card that paid it (from the preview's `prorationDate` when given), in the same
   * transaction as the cancellation.
   */
  async cancel(auth: AuthContext, ref: string, options: CancelOptions) {
    const prorationAt = prorationDateOf(options.prorationDate, this.clock.now());
    if (options.atPeriodEnd === true && options.prorate === true)
      throw new ValidationError([
        { path: '/prorate', message: 'refunds only a cancellation now, not at period end', location: 'body' },
      ]);
    const { row, refund } = await inTransaction(this.pool, async (tx) => {
      const current = await this.find(tx, auth, ref, true);
      if (options.atPeriodEnd === true) {
        if (!current.is_recurring)
          throw new ConflictError(
            'invalid_transition',
            'Only recurring purchases can be cancelled at period end',
          );
        const scheduled = await this.apply(
          tx,
          auth,
          current,
          'schedule_cancellation',
          { cancel_at_period_end: true, cancellation_details: requested(options, this.clock.now()) },
          { cancelAtPeriodEnd: false },
        );
        return { row: scheduled, refund: undefined };
      }
      // Read before the period ends: an ended purchase has no unused time.
      const held = await heldEarlyEnd(tx, auth, current, this.clock.now());
      const unused =
        options.prorate === true
          ? await unusedTimeOf(tx, auth, this.refunder, current, held?.prorated_at ?? prorationAt)
          : undefined;
      finishesHeldEnd(held, unused?.amount ?? 0);
      const ended = await this.apply(tx, auth, current, 'cancel_now', {
        ended_at: this.clock.now(),
        final_usage_due: endsMidPeriod(current, this.clock.now()),
        cancellation_details: requested(options, this.clock.now()),
      });
      const refunded =
        unused === undefined
          ? undefined
          : await refundUnusedTime(tx, auth, this.refunder, unused, unused.amount, {
              from: current.id,
              at: this.clock.now(),
              cancelled: true,
              held,
            });
      return { row: ended, refund: refunded };
    });
    await this.publish([row]);
    return {
      ...toPurchase(row),
      ...(refund === undefined ? {} : { refund: { id: refund.id, amount: refund.amount } }),
    };
  }

  async reactivate(auth: AuthContext, ref: string) {
    const row = await inTransaction(this.pool, async (tx) => {
      const current = await this.find(tx, auth, ref, true);
      return this.apply(
        tx,
        auth,
        current,
        'reactivate',
        { cancel_at_period_end: false, cancellation_details: null },
        { cancelAtPeriodEnd: true, cancellationDetails: current.cancellation_details ?? null },
      );
    });
    await this.publish([row]);
    return toPurchase(row);
  }

  /**
   * Ends every purchase of a customer being deleted, in the deletion's transaction (the
   * customer's row already locked): cancelled now, as a cancellation now without `prorate` is, so
   * no renewal charges the card again; usage up to now is still billed when its period closes.
   * Returns what publishes the ended purchases once the deletion has committed.
   */
  async endAllOf(tx: PoolClient, auth: AuthContext, customerId: string): Promise<() => Promise<void>> {
    const now = this.clock.now();
    const ended: PurchaseRow[] = [];
    for (const live of await lockLivePurchasesOf(tx, customerId))
      ended.push(
        await this.apply(tx, auth, live, 'cancel_now', {
          ended_at: now,
          final_usage_due: endsMidPeriod(live, now),
        }),
      );
    return () => (ended.length === 0 ? Promise.resolve() : this.publish(ended));
  }

  /** Republishes one customer's entitlements: the credits available to it changed. */
  publishCustomer(customerId: string): Promise<void> {
    return this.entitlements.publishCustomer(customerId);
  }

  /** Rebuilds every customer's entitlement per product from PostgreSQL. */
  publishAll(): Promise<number> {
    return this.entitlements.publishAll();
  }

  /** Mirrors purchases into the snapshot store for the proxy, after the commit (entitlements.ts). */
  publish(rows: PurchaseRow[], knownPlan?: PlanRow): Promise<void> {
    return this.entitlements.publish(rows, knownPlan);
  }
}
