import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export interface MethodRow {
  id: string;
  customer_id: string;
  processor: string;
  processor_ref: string;
  /** The processor's customer object the card belongs to (Stripe's cus_…); null in sandbox. */
  processor_customer: string | null;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
  is_default: boolean;
  created_at: Date;
  fingerprint: string | null;
}

/** Stores a card as the customer's one default. */
export async function insertDefaultMethod(
  db: Queryable,
  method: Omit<MethodRow, 'is_default'> & {
    provider_id: string;
    environment: Environment;
  },
): Promise<MethodRow> {
  await db.query('UPDATE payment_methods SET is_default = false WHERE customer_id = $1 AND is_default', [
    method.customer_id,
  ]);
  const { rows } = await db.query<MethodRow>(
    `INSERT INTO payment_methods (id, provider_id, environment, customer_id, processor, processor_ref, brand, last4, exp_month, exp_year,
                                  is_default, created_at, processor_customer, fingerprint)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, true, $11, $12, $13) RETURNING *`,
    [
      method.id,
      method.provider_id,
      method.environment,
      method.customer_id,
      method.processor,
      method.processor_ref,
      method.brand,
      method.last4,
      method.exp_month,
      method.exp_year,
      method.created_at,
      method.processor_customer,
      method.fingerprint,
    ],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('payment method insert returned no row');
  return row;
}

export async function listMethods(db: Queryable, customerId: string): Promise<MethodRow[]> {
  const { rows } = await db.query<MethodRow>(
    'SELECT * FROM payment_methods WHERE customer_id = $1 AND detached_at IS NULL ORDER BY id',
    [customerId],
  );
  return rows;
}

export async function findDefaultMethod(db: Queryable, customerId: string): Promise<MethodRow | undefined> {
  const { rows } = await db.query<MethodRow>(
    'SELECT * FROM payment_methods WHERE customer_id = $1 AND is_default AND detached_at IS NULL',
    [customerId],
  );
  return rows[0];
}

/**
 * The customer's stored copy of a card stored again (the same processor and fingerprint) takes
 * the new reference and expiry and becomes the default: one card, not two. Answers it with the
 * reference it had, or undefined when the card is new here.
 */
export async function restoreCard(
  db: Queryable,
  customerId: string,
  card: {
    processor: string;
    fingerprint: string;
    processor_ref: string;
    exp_month: number;
    exp_year: number;
  },
): Promise<{ row: MethodRow; previousRef: string } | undefined> {
  const { rows: found } = await db.query<MethodRow>(
    `SELECT * FROM payment_methods
      WHERE customer_id = $1 AND processor = $2 AND fingerprint = $3 AND detached_at IS NULL
      ORDER BY created_at DESC, id DESC LIMIT 1`,
    [customerId, card.processor, card.fingerprint],
  );
  const existing = found[0];
  if (existing === undefined) return undefined;
  await db.query('UPDATE payment_methods SET is_default = false WHERE customer_id = $1 AND is_default', [
    customerId,
  ]);
  const { rows } = await db.query<MethodRow>(
    `UPDATE payment_methods SET processor_ref = $2, exp_month = $3, exp_year = $4, is_default = true
      WHERE id = $1 RETURNING *`,
    [existing.id, card.processor_ref, card.exp_month, card.exp_year],
  );
  const row = rows[0];
  return row === undefined ? undefined : { row, previousRef: existing.processor_ref };
}

/** Makes one of the customer's cards the default (the other loses it); undefined: no such card. */
export async function setDefaultMethod(
  db: Queryable,
  customerId: string,
  id: string,
): Promise<MethodRow | undefined> {
  const { rows: found } = await db.query<MethodRow>(
    'SELECT * FROM payment_methods WHERE customer_id = $1 AND id = $2 AND detached_at IS NULL',
    [customerId, id],
  );
  if (found[0] === undefined) return undefined;
  await db.query('UPDATE payment_methods SET is_default = false WHERE customer_id = $1 AND is_default', [
    customerId,
  ]);
  const { rows } = await db.query<MethodRow>(
    'UPDATE payment_methods SET is_default = true WHERE id = $1 RETURNING *',
    [id],
  );
  return rows[0];
}

/** Marks a card removed: never listed, charged or default again; undefined: no such card. */
export async function detachMethod(
  db: Queryable,
  customerId: string,
  id: string,
  at: Date,
): Promise<MethodRow | undefined> {
  const { rows } = await db.query<MethodRow>(
    `UPDATE payment_methods SET detached_at = $3, is_default = false
      WHERE customer_id = $1 AND id = $2 AND detached_at IS NULL RETURNING *`,
    [customerId, id, at],
  );
  return rows[0];
}

/** The customer's customer object at a processor, from a card stored there before. */
export async function findProcessorCustomer(
  db: Queryable,
  customerId: string,
  processor: string,
): Promise<string | null> {
  const { rows } = await db.query<{ processor_customer: string }>(
    `SELECT processor_customer FROM payment_methods
      WHERE customer_id = $1 AND processor = $2 AND processor_customer IS NOT NULL
      ORDER BY created_at DESC LIMIT 1`,
    [customerId, processor],
  );
  return rows[0]?.processor_customer ?? null;
}

/** Our customer whose cards a processor's customer object holds (the newest card's), in a tenant. */
export async function findCustomerOfProcessor(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  processor: string,
  processorCustomer: string,
): Promise<string | undefined> {
  const { rows } = await db.query<{ customer_id: string }>(
    `SELECT customer_id FROM payment_methods
      WHERE provider_id = $1 AND environment = $2 AND processor = $3 AND processor_customer = $4
      ORDER BY created_at DESC LIMIT 1`,
    [tenant.providerId, tenant.environment, processor, processorCustomer],
  );
  return rows[0]?.customer_id;
}

export interface PaymentInsert {
  id: string;
  provider_id: string;
  environment: Environment;
  customer_id: string;
  purchase_id: string | null;
  product_id: string | null;
  plan_id: string | null;
  amount: number;
  currency: string;
  status: 'succeeded' | 'failed';
  reason: string;
  period_key: string;
  attempt: number;
  processor: string;
  processor_payment_intent: string;
  transaction_reference: string;
  failure_reason: string | null;
  created_at: Date;
  invoice_id: string | null;
}

/** Records a charge attempt; false when this attempt already has a row (any unique index). */
export async function insertPayment(db: Queryable, p: PaymentInsert): Promise<boolean> {
  const inserted = await db.query(
    `INSERT INTO payments (id, provider_id, environment, customer_id, purchase_id, product_id, plan_id, amount, currency, status, reason,
                           period_key, attempt, processor, processor_payment_intent, transaction_reference, failure_reason, created_at,
                           invoice_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
     ON CONFLICT DO NOTHING`,
    [
      p.id,
      p.provider_id,
      p.environment,
      p.customer_id,
      p.purchase_id,
      p.product_id,
      p.plan_id,
      p.amount,
      p.currency,
      p.status,
      p.reason,
      p.period_key,
      p.attempt,
      p.processor,
      p.processor_payment_intent,
      p.transaction_reference,
      p.failure_reason,
      p.created_at,
      p.invoice_id,
    ],
  );
  return (inserted.rowCount ?? 0) > 0;
}

export interface PaymentRow {
  id: string;
  processor: string;
  customer_id: string;
  purchase_id: string | null;
  amount: number;
  currency: string;
  status: string;
  processor_payment_intent: string;
  transaction_reference: string;
}

/** A payment by its id or transaction reference, locked for the caller's transaction. */
export async function lockPayment(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  ref: string,
): Promise<PaymentRow | undefined> {
  const { rows } = await db.query<PaymentRow>(
    'SELECT * FROM payments WHERE provider_id = $1 AND environment = $2 AND (id = $3 OR transaction_reference = $3) FOR NO KEY UPDATE',
    [tenant.providerId, tenant.environment, ref],
  );
  return rows[0];
}

/** What a customer's mail about a payment names of it: the amount, when, for which plan and invoice. */
export interface PaymentSummary {
  amount: number;
  currency: string;
  created_at: Date;
  plan_id: string | null;
  invoice_id: string | null;
}

export async function findPaymentSummary(
  db: Queryable,
  paymentId: string,
): Promise<PaymentSummary | undefined> {
  const { rows } = await db.query<PaymentSummary>(
    'SELECT amount, currency, created_at, plan_id, invoice_id FROM payments WHERE id = $1',
    [paymentId],
  );
  return rows[0];
}

/** What was refunded of a payment so far (failed refunds aside). */
export async function refundedAmount(db: Queryable, paymentId: string): Promise<number> {
  const { rows } = await db.query<{ total: string | null }>(
    `SELECT sum(amount) AS total FROM refunds WHERE payment_id = $1 AND status <> 'failed'`,
    [paymentId],
  );
  return Number(rows[0]?.total ?? 0);
}

export interface RefundRow {
  id: string;
  provider_id: string;
  environment: Environment;
  payment_id: string;
  amount: number;
  currency: string;
  reason: string | null;
  metadata: Record<string, string>;
  status: 'pending' | 'succeeded' | 'failed';
  processor_refund: string;
  failure_reason: string | null;
  created_at: Date;
  settled_at: Date | null;
  /** request: the provider asked; proration: unused time returned at a plan switch. */
  source: 'request' | 'proration';
  /** The key a retried refund was asked with (migration 054); null for one of its own. */
  processor_key: string | null;
}

export async function insertRefund(db: Queryable, r: RefundRow): Promise<void> {
  await db.query(
    `INSERT INTO refunds (id, provider_id, environment, payment_id, amount, currency, reason, metadata, status, processor_refund,
                          failure_reason, created_at, settled_at, source, processor_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
    [
      r.id,
      r.provider_id,
      r.environment,
      r.payment_id,
      r.amount,
      r.currency,
      r.reason,
      r.metadata,
      r.status,
      r.processor_refund,
      r.failure_reason,
      r.created_at,
      r.settled_at,
      r.source,
      r.processor_key,
    ],
  );
}

/** The refund asked of the processor under `processorKey`, if one is on the books. */
export async function findRefundByProcessorKey(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  processorKey: string,
): Promise<RefundRow | undefined> {
  const { rows } = await db.query<RefundRow>(
    'SELECT * FROM refunds WHERE provider_id = $1 AND environment = $2 AND processor_key = $3 LIMIT 1',
    [tenant.providerId, tenant.environment, processorKey],
  );
  return rows[0];
}

/**
 * The oldest pending refund after `after` (its id; '' from the start), locked (SKIP LOCKED:
 * scheduler replicas share the work). A refund the processor has not decided yet stays pending,
 * so a pass walks past it.
 */
export async function lockNextPendingRefund(db: Queryable, after: string): Promise<RefundRow | undefined> {
  const { rows } = await db.query<RefundRow>(
    `SELECT * FROM refunds WHERE status = 'pending' AND id > $1 ORDER BY id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
    [after],
  );
  return rows[0];
}

/** A refund by the processor's id for it, locked, within one provider's environment. */
export async function lockRefundByProcessorId(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  processorRefund: string,
): Promise<RefundRow | undefined> {
  const { rows } = await db.query<RefundRow>(
    'SELECT * FROM refunds WHERE provider_id = $1 AND environment = $2 AND processor_refund = $3 FOR NO KEY UPDATE',
    [tenant.providerId, tenant.environment, processorRefund],
  );
  return rows[0];
}

/** A payment by the processor's id for it (Stripe's pi_…), locked, within one provider's environment. */
export async function lockPaymentByIntent(
  db: Queryable,
  tenant: { providerId: string; environment: Environment },
  processorPaymentIntent: string,
): Promise<PaymentRow | undefined> {
  const { rows } = await db.query<PaymentRow>(
    `SELECT * FROM payments WHERE provider_id = $1 AND environment = $2 AND processor_payment_intent = $3
      ORDER BY created_at LIMIT 1 FOR NO KEY UPDATE`,
    [tenant.providerId, tenant.environment, processorPaymentIntent],
  );
  return rows[0];
}

/** A pending refund's outcome; only a pending refund moves. */
export async function settleRefund(
  db: Queryable,
  id: string,
  change: { status: 'succeeded' | 'failed'; failureReason: string | null; at: Date },
): Promise<RefundRow> {
  const { rows } = await db.query<RefundRow>(
    `UPDATE refunds SET status = $2, failure_reason = $3, settled_at = $4 WHERE id = $1 AND status = 'pending' RETURNING *`,
    [id, change.status, change.failureReason, change.at],
  );
  const row = rows[0];
  if (row === undefined) throw new Error(`refund ${id} is not pending`);
  return row;
}

/** What refunds of a payment returned for good. */
export async function succeededRefunds(db: Queryable, paymentId: string): Promise<number> {
  const { rows } = await db.query<{ total: string | null }>(
    `SELECT sum(amount) AS total FROM refunds WHERE payment_id = $1 AND status = 'succeeded'`,
    [paymentId],
  );
  return Number(rows[0]?.total ?? 0);
}
