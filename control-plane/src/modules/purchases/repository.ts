import { prepared, type Queryable } from '../../db/pool';
import type { Discount } from '../billing/discounts';
import type { CancellationDetails } from './cancellation';
import type { PurchaseStatus } from './state-machine';
import { GRANTS_ACCESS } from './state-machine';

export interface AccessPurchase {
  id: string;
  plan_id: string;
  period_start: Date;
  period_end: Date | null;
}

/** The customer's purchase of the product that grants access right now (trialing, active, past due), if any. */
export async function findAccessPurchase(
  db: Queryable,
  customerId: string,
  productId: string,
): Promise<AccessPurchase | undefined> {
  const { rows } = await db.query<AccessPurchase>(
    prepared(
      'access_purchase',
      `SELECT id, plan_id, period_start, period_end FROM purchases
      WHERE customer_id = $1 AND product_id = $2 AND status = ANY($3)
      ORDER BY updated_at DESC LIMIT 1`,
      [customerId, productId, [...GRANTS_ACCESS]],
    ),
  );
  return rows[0];
}

/** Products the customer holds an access-granting purchase of. */
export async function accessProductIds(db: Queryable, customerId: string): Promise<string[]> {
  const { rows } = await db.query<{ product_id: string }>(
    'SELECT DISTINCT product_id FROM purchases WHERE customer_id = $1 AND status = ANY($2)',
    [customerId, [...GRANTS_ACCESS]],
  );
  return rows.map((r) => r.product_id);
}

/** A purchase by id, locked for the caller's transaction. */
export async function lockPurchase(db: Queryable, id: string): Promise<PurchaseRow | undefined> {
  const { rows } = await db.query<PurchaseRow>('SELECT * FROM purchases WHERE id = $1 FOR NO KEY UPDATE', [
    id,
  ]);
  return rows[0];
}

/** One purchase as stored. */
export interface PurchaseRow {
  id: string;
  provider_id: string;
  environment: 'sandbox' | 'live';
  customer_id: string;
  product_id: string;
  plan_id: string;
  status: PurchaseStatus;
  amount: number;
  currency: string;
  billing_cycle: string | null;
  is_recurring: boolean;
  auto_renew: boolean;
  cancel_at_period_end: boolean;
  period_start: Date;
  period_end: Date | null;
  anchor_day: number;
  trial_end: Date | null;
  ended_at: Date | null;
  created_at: Date;
  updated_at: Date;
  retry_count: number;
  next_retry_at: Date | null;
  trial_reminder_sent: boolean;
  renewal_reminder_for: Date | null;
  setup_fee_due: number;
  /** The period closes with a usage charge (post-paid usage-based and hybrid plans). */
  bills_usage: boolean;
  /** Its calls are paid from credits: each period closes with a statement of what they spent. */
  pays_from_credits: boolean;
  /** Unused free units carried into the current period (plans with rolloverUnusedUnits). */
  rollover_units: number;
  /** Ended before its period did, with that part period's usage still to bill. */
  final_usage_due: boolean;
  /** The coupon it redeemed and until when it applies (docs/coupons.md); null without one. */
  discount: Discount | null;
  /** Why it was cancelled (cancellation.ts): null, or absent on a row made here, until then. */
  cancellation_details?: CancellationDetails | null;
}

/** Statuses in which a purchase is the customer's current one for its product. */
const LIVE_STATUSES = "('pending', 'trialing', 'active', 'past_due', 'suspended')";

type Tenant = { providerId: string; environment: 'sandbox' | 'live' };

export async function findPurchase(
  db: Queryable,
  tenant: Tenant,
  id: string,
  forUpdate: boolean,
): Promise<PurchaseRow | undefined> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT * FROM purchases WHERE provider_id = $1 AND environment = $2 AND id = $3 ${forUpdate ? 'FOR NO KEY UPDATE' : ''}`,
    [tenant.providerId, tenant.environment, id],
  );
  return rows[0];
}

export async function listPurchases(
  db: Queryable,
  tenant: Tenant,
  page: { after: string | null; customerId: string | null; status: string | null; limit: number },
): Promise<PurchaseRow[]> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT * FROM purchases WHERE provider_id = $1 AND environment = $2 AND ($3::text IS NULL OR id > $3)
       AND ($4::text IS NULL OR customer_id = $4) AND ($5::text IS NULL OR status = $5) ORDER BY id LIMIT $6`,
    [tenant.providerId, tenant.environment, page.after, page.customerId, page.status, page.limit],
  );
  return rows;
}

export async function updatePurchase(db: Queryable, row: PurchaseRow): Promise<void> {
  await db.query(
    `UPDATE purchases SET status = $2, cancel_at_period_end = $3, period_start = $4, period_end = $5, trial_end = $6,
            ended_at = $7, updated_at = $8, retry_count = $9, next_retry_at = $10, trial_reminder_sent = $11,
            renewal_reminder_for = $12, setup_fee_due = $13, rollover_units = $14, final_usage_due = $15,
            cancellation_details = $16
      WHERE id = $1`,
    [
      row.id,
      row.status,
      row.cancel_at_period_end,
      row.period_start,
      row.period_end,
      row.trial_end,
      row.ended_at,
      row.updated_at,
      row.retry_count,
      row.next_retry_at,
      row.trial_reminder_sent,
      row.renewal_reminder_for,
      row.setup_fee_due,
      row.rollover_units,
      row.final_usage_due,
      row.cancellation_details ?? null,
    ],
  );
}

export async function insertPurchase(db: Queryable, row: PurchaseRow): Promise<void> {
  await db.query(
    `INSERT INTO purchases (id, provider_id, environment, customer_id, product_id, plan_id, status, amount, currency, billing_cycle,
                            is_recurring, auto_renew, cancel_at_period_end, period_start, period_end, anchor_day, trial_end,
                            ended_at, created_at, updated_at, setup_fee_due, bills_usage, pays_from_credits, discount)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.customer_id,
      row.product_id,
      row.plan_id,
      row.status,
      row.amount,
      row.currency,
      row.billing_cycle,
      row.is_recurring,
      row.auto_renew,
      row.cancel_at_period_end,
      row.period_start,
      row.period_end,
      row.anchor_day,
      row.trial_end,
      row.ended_at,
      row.created_at,
      row.updated_at,
      row.setup_fee_due,
      row.bills_usage,
      row.pays_from_credits,
      row.discount,
    ],
  );
}

/** Sets (or, with null, removes) the discount of a purchase. */
export async function setDiscount(db: Queryable, id: string, discount: Discount | null): Promise<void> {
  await db.query('UPDATE purchases SET discount = $2 WHERE id = $1', [id, discount]);
}

/**
 * Ends a `once` discount at `at`, the issue of the first invoice it took money off: later
 * invoices are issued after it and pay in full. A discount already ended stays as it was.
 */
export async function endOnceDiscount(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query(
    `UPDATE purchases SET discount = jsonb_set(discount, '{end}', to_jsonb($2::text))
      WHERE id = $1 AND discount ->> 'duration' = 'once' AND discount ->> 'end' IS NULL`,
    [id, at.toISOString()],
  );
}

/** The customer's current purchase of the product, locked. */
export async function lockLivePurchase(
  db: Queryable,
  customerId: string,
  productId: string,
): Promise<PurchaseRow | undefined> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT * FROM purchases WHERE customer_id = $1 AND product_id = $2 AND status IN ${LIVE_STATUSES} FOR NO KEY UPDATE`,
    [customerId, productId],
  );
  return rows[0];
}

/** Every purchase of the customer still in force or waiting to be (any product), locked, by id. */
export async function lockLivePurchasesOf(db: Queryable, customerId: string): Promise<PurchaseRow[]> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT * FROM purchases WHERE customer_id = $1 AND status IN ${LIVE_STATUSES} ORDER BY id FOR NO KEY UPDATE`,
    [customerId],
  );
  return rows;
}

/** Each customer's purchase per product that decides access (the live one, else the latest); one customer's with `customerId`. */
export async function latestPurchasePerProduct(db: Queryable, customerId?: string): Promise<PurchaseRow[]> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT DISTINCT ON (customer_id, product_id) * FROM purchases
      WHERE $1::text IS NULL OR customer_id = $1
      ORDER BY customer_id, product_id, (status IN ${LIVE_STATUSES}) DESC, updated_at DESC`,
    [customerId ?? null],
  );
  return rows;
}

/**
 * Locks one purchase the billing scheduler has work for (a trial ending or due a reminder, a
 * period ended, a dunning retry due, a renewal due a reminder), skipping those another scheduler
 * holds: each is handled by one process at a time.
 */
/**
 * Purchases of customers on the test clock `$n` (a sandbox clock being advanced), or, with null,
 * of customers on no test clock: the ordinary passes never touch a clock's purchases.
 */
const onClock = (n: number) =>
  `(CASE WHEN $${n}::text IS NULL
         THEN NOT EXISTS (SELECT 1 FROM customers c WHERE c.id = purchases.customer_id AND c.test_clock_id IS NOT NULL)
         ELSE EXISTS (SELECT 1 FROM customers c WHERE c.id = purchases.customer_id AND c.test_clock_id = $${n}) END)`;

export async function lockNextDuePurchase(
  db: Queryable,
  due: {
    now: Date;
    trialReminderBy: Date;
    renewalReminderBy: Date;
    usageClosedBy: Date;
    clockId: string | null;
    /** Purchases this pass could not handle: left for the next pass. */
    skipped?: readonly string[];
  },
): Promise<PurchaseRow | undefined> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT * FROM purchases
      WHERE ((status = 'trialing' AND (trial_end <= $1 OR (NOT trial_reminder_sent AND trial_end <= $2)))
         OR (status = 'active' AND period_end <= $1 AND (NOT (bills_usage OR pays_from_credits) OR period_end <= $4))
         OR (status = 'past_due' AND next_retry_at <= $1)
         OR (status = 'active' AND is_recurring AND auto_renew AND NOT cancel_at_period_end AND period_end > $1
             AND period_end <= $3 AND renewal_reminder_for IS DISTINCT FROM period_end)
         OR (final_usage_due AND ended_at <= $4))
        AND ${onClock(5)} AND NOT (id = ANY($6::text[]))
      ORDER BY id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
    [due.now, due.trialReminderBy, due.renewalReminderBy, due.usageClosedBy, due.clockId, due.skipped ?? []],
  );
  return rows[0];
}

/**
 * Locks the next purchase (by id, after `after`) whose usage-billed period has ended by `now`
 * but may not close yet (it ended after `closedBy`): the ones whose invoice is a draft. Skips
 * purchases another process holds.
 */
export async function lockNextDraftable(
  db: Queryable,
  due: { now: Date; closedBy: Date; clockId: string | null; after: string },
): Promise<PurchaseRow | undefined> {
  const { rows } = await db.query<PurchaseRow>(
    `SELECT * FROM purchases
      WHERE (bills_usage OR pays_from_credits) AND id > $4
        AND ((status = 'active' AND period_end <= $1 AND period_end > $2)
          OR (final_usage_due AND ended_at <= $1 AND ended_at > $2))
        AND ${onClock(3)}
      ORDER BY id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
    [due.now, due.closedBy, due.clockId, due.after],
  );
  return rows[0];
}

/** Whether any usage-billed period ended by `closedBy` waits to be billed (before asking the usage bus). */
export async function usagePeriodsDue(
  db: Queryable,
  closedBy: Date,
  clockId: string | null,
): Promise<boolean> {
  const { rows } = await db.query<{ due: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM purchases
                     WHERE ((status = 'active' AND (bills_usage OR pays_from_credits) AND period_end <= $1)
                        OR (final_usage_due AND ended_at <= $1)) AND ${onClock(2)}) AS due`,
    [closedBy, clockId],
  );
  return rows[0]?.due === true;
}

/** The final usage of an ended purchase is billed. */
export async function clearFinalUsageDue(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE purchases SET final_usage_due = false WHERE id = $1', [id]);
}

/**
 * A purchase of the customer that its default card pays for as it goes: a recurring one with a
 * price, or one billing usage, while in force and not paid from credits. Undefined: none.
 */
export async function findCardPaidPurchase(
  db: Queryable,
  customerId: string,
): Promise<{ id: string; plan_id: string } | undefined> {
  const { rows } = await db.query<{ id: string; plan_id: string }>(
    `SELECT id, plan_id FROM purchases
      WHERE customer_id = $1 AND status IN ('active', 'trialing', 'past_due', 'pending')
        AND NOT pays_from_credits AND ((is_recurring AND amount > 0) OR bills_usage)
      ORDER BY created_at LIMIT 1`,
    [customerId],
  );
  return rows[0];
}

/** A refund the processor made for a purchase's period ended early (migration 052). */
export interface EarlyEndRefundRow {
  provider_id: string;
  environment: string;
  purchase_id: string;
  prorated_at: Date;
  amount: number;
  currency: string;
  processor_refund: string;
  ending: string;
  /** The refund's reason as the processor was asked it (null in rows kept before migration 055). */
  reason: string | null;
  created_at: Date;
}

/** Keeps the first refund made for ending a purchase early; a later one for it keeps the first. */
export async function holdEarlyEndRefund(db: Queryable, row: EarlyEndRefundRow): Promise<void> {
  await db.query(
    `INSERT INTO early_end_refunds (provider_id, environment, purchase_id, prorated_at, amount, currency,
                                    processor_refund, ending, reason, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT DO NOTHING`,
    [
      row.provider_id,
      row.environment,
      row.purchase_id,
      row.prorated_at,
      row.amount,
      row.currency,
      row.processor_refund,
      row.ending,
      row.reason,
      row.created_at,
    ],
  );
}

/** The refund made for ending the purchase early, when it was made since `since`. */
export async function heldEarlyEndRefund(
  db: Queryable,
  scope: { providerId: string; environment: string },
  purchaseId: string,
  since: Date,
): Promise<EarlyEndRefundRow | undefined> {
  const { rows } = await db.query<EarlyEndRefundRow>(
    `SELECT provider_id, environment, purchase_id, prorated_at, amount, currency,
            processor_refund, ending, reason, created_at
       FROM early_end_refunds
      WHERE provider_id = $1 AND environment = $2 AND purchase_id = $3 AND created_at >= $4`,
    [scope.providerId, scope.environment, purchaseId, since],
  );
  return rows[0];
}
