import type { Clock } from '../../clock';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import { ConflictError, NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { baseLine, setupFeeLine } from '../billing/invoicing';
import type { StoredLine } from '../billing/repository';
import { redemptionTarget } from '../coupons/service';
import { findCustomer } from '../customers/repository';
import type { Refunder } from '../payments/refunder';
import { findPlan, settingsOf } from '../plans/repository';
import { isCreditPaid, type PlanSettings, recurringAmount, requiresPayment } from '../plans/rules';
import { findProduct } from '../products/repository';
import type { PurchaseDiscounts } from './discounts';
import { firstPeriod } from './periods';
import { finishesHeldEnd, heldEarlyEnd, prorationLines, type UnusedTime, unusedTimeOf } from './proration';
import { findPurchase, lockLivePurchase } from './repository';

/**
 * How an activation starts the new purchase: free and credit-paid plans at once, a trial, a
 * first charge to the default card, or (no card yet) a hosted checkout that takes one first.
 */
export type StartMove = 'start_active' | 'start_trial' | 'start_pending' | 'checkout';

export async function startMoveOf(
  settings: PlanSettings,
  hasCard: () => Promise<boolean>,
): Promise<StartMove> {
  if (!requiresPayment(settings) || isCreditPaid(settings)) return 'start_active';
  if (settings.trialDays > 0) return 'start_trial';
  return (await hasCard()) ? 'start_pending' : 'checkout';
}

/** What a plan switch credited for the old plan's unused time, in the activation's answer. */
export interface Proration {
  credit: number;
  appliedToInvoice: number;
  refunded: number;
  invoiceId: string | null;
  refundId: string | null;
}

export type ActivationStatus =
  | 'activated'
  | 'already_active'
  | 'payment_required'
  | 'topup_required'
  | 'invalid';

/** A first invoice's charges: the first period's price and the setup fee, for a purchase made at `at`. */
export function firstCharges(settings: PlanSettings, at: Date): StoredLine[] {
  const amount = recurringAmount(settings);
  const { end } = firstPeriod(settings, false, at);
  return [
    ...(amount > 0 ? [baseLine(settings.name, amount, at, end)] : []),
    ...(settings.setupFee > 0 ? [setupFeeLine(settings.setupFee)] : []),
  ];
}

/**
 * What a switch does with money. Paid at once (or at checkout), the first invoice holds the
 * charges less the old plan's unused time, never below zero, and the excess of the credit is
 * refunded; otherwise (a trial, a free or credit-paid plan) the whole credit is refunded.
 */
export function switchTerms(move: StartMove, charges: StoredLine[], unused: UnusedTime | undefined) {
  if (move !== 'start_pending' && move !== 'checkout')
    return { lines: [] as StoredLine[], refund: unused?.amount ?? 0, dueNow: 0 };
  const credit =
    unused === undefined
      ? undefined
      : prorationLines(
          unused,
          charges.reduce((sum, line) => sum + line.amount, 0),
        );
  const lines = [...charges, ...(credit?.lines ?? [])];
  return { lines, refund: credit?.refund ?? 0, dueNow: lines.reduce((sum, line) => sum + line.amount, 0) };
}

/**
 * How old a preview's proration date may be when the change is confirmed with it. A confirmation
 * within this window charges and refunds exactly what the preview showed; the window bounds what
 * an older date could add to the credit (the time since the preview).
 */
export const PRORATION_DATE_WINDOW_MS = 15 * 60_000;

/** The moment a change prorates from: the preview's `prorationDate` when given, else now. */
export function prorationDateOf(given: string | undefined, now: Date): Date {
  if (given === undefined) return now;
  const at = new Date(given);
  const age = now.getTime() - at.getTime();
  if (Number.isNaN(age) || age < 0 || age > PRORATION_DATE_WINDOW_MS)
    throw new ValidationError([
      {
        path: '/prorationDate',
        message: 'must be a preview’s prorationDate from the last 15 minutes, not in the future',
        location: 'body',
      },
    ]);
  return at;
}

/** The customer, plan and product an activation names; 404 for unknown ones, 400 for a mismatch. */
export async function resolveActivation(
  db: Queryable,
  auth: AuthContext,
  input: { customerRef: string; planRef: string; productRef?: string | undefined },
) {
  const customer = await findCustomer(db, auth, input.customerRef);
  if (customer === undefined)
    throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
  const plan = await findPlan(db, auth, input.planRef);
  if (plan === undefined) throw new NotFoundError('plan_not_found', `No plan ${input.planRef}`);
  const product = await findProduct(db, auth, plan.product_id);
  if (product === undefined) throw new NotFoundError('product_not_found', `No product ${plan.product_id}`);
  if (
    input.productRef !== undefined &&
    input.productRef !== product.id &&
    input.productRef !== product.reference
  )
    throw new ValidationError([
      {
        path: '/productRef',
        message: `plan ${plan.id} belongs to product ${product.reference}`,
        location: 'body',
      },
    ]);
  return { customer, plan, product };
}

/** A line of a preview, as the invoice it becomes will hold it. */
const previewLine = (line: StoredLine) => ({
  kind: line.kind,
  description: line.description,
  amount: line.amount,
});

/**
 * Previews of plan changes, shown before the customer confirms one (as Stripe's upcoming invoice
 * with a proration date): the same arithmetic the change runs, read without changing anything.
 * Confirming with the preview's `prorationDate` charges and refunds exactly what it showed.
 */
export class PlanChanges {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly refunder: Pick<Refunder, 'refundable'>,
    private readonly payments: { hasDefaultMethod(db: Pool, customerId: string): Promise<boolean> },
    private readonly discounts: Pick<PurchaseDiscounts, 'preview'>,
  ) {}

  /** What activating `planRef` now would charge and refund: POST /v1/sdk/activate/preview. */
  async previewActivation(
    auth: AuthContext,
    input: {
      customerRef: string;
      planRef: string;
      productRef?: string | undefined;
      coupon?: string | undefined;
    },
  ) {
    const { customer, plan, product } = await resolveActivation(this.pool, auth, input);
    if (plan.status !== 'active' || product.status !== 'active')
      throw new ValidationError([{ path: '/planRef', message: 'the plan is not on sale', location: 'body' }]);
    const settings = settingsOf(plan);
    const move = await startMoveOf(settings, () => this.payments.hasDefaultMethod(this.pool, customer.id));
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const current = await lockLivePurchase(tx, customer.id, product.id);
      if (current?.plan_id === plan.id)
        throw new ConflictError('invalid_transition', `Customer already has plan ${plan.id}`);
      // As the change will count it: from a failed attempt's moment when one refunded.
      const held = await heldEarlyEnd(tx, auth, current, at);
      const unused =
        current === undefined
          ? undefined
          : await unusedTimeOf(tx, auth, this.refunder, current, held?.prorated_at ?? at);
      const target = redemptionTarget(customer.id, product.id, settings);
      const charges = await this.discounts.preview(
        tx,
        auth,
        target,
        current,
        input.coupon,
        firstCharges(settings, at),
      );
      const terms = switchTerms(move, charges, unused);
      finishesHeldEnd(held, terms.refund);
      return {
        currency: settings.currency,
        prorationDate: at.toISOString(),
        fromPlan: current?.plan_id ?? null,
        toPlan: plan.id,
        credit: unused?.amount ?? 0,
        lines: terms.lines.map(previewLine),
        dueNow: terms.dueNow,
        refund: terms.refund,
        checkoutRequired: move === 'checkout',
      };
    });
  }

  /** What cancelling the purchase now with `prorate` would refund: POST …/cancel/preview. */
  async previewCancellation(auth: AuthContext, ref: string) {
    const at = this.clock.now();
    return inTransaction(this.pool, async (tx) => {
      const purchase = await findPurchase(tx, auth, ref, true);
      if (purchase === undefined) throw new NotFoundError('purchase_not_found', `No purchase ${ref}`);
      if (!['active', 'trialing', 'past_due', 'pending'].includes(purchase.status))
        throw new ConflictError('invalid_transition', `Purchase ${purchase.id} is ${purchase.status}`);
      const held = await heldEarlyEnd(tx, auth, purchase, at);
      const unused = await unusedTimeOf(tx, auth, this.refunder, purchase, held?.prorated_at ?? at);
      finishesHeldEnd(held, unused?.amount ?? 0);
      return {
        currency: purchase.currency,
        prorationDate: at.toISOString(),
        fromPlan: purchase.plan_id,
        toPlan: null,
        credit: unused?.amount ?? 0,
        lines: unused === undefined ? [] : [previewLine(refundLine(unused))],
        dueNow: 0,
        refund: unused?.amount ?? 0,
        checkoutRequired: false,
      };
    });
  }
}

/** The refund of a cancelled period's unused time, as a preview names it. */
function refundLine(unused: UnusedTime): StoredLine {
  const day = (d: Date) => d.toISOString().slice(0, 10);
  return {
    kind: 'proration_refund',
    description: `Refunded: unused time on ${unused.planName} (${day(unused.from)} – ${day(unused.to)})`,
    quantity: 1,
    unitAmount: unused.amount.toString(),
    amount: unused.amount,
    period: null,
  };
}
