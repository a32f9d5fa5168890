import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Address, TaxId } from '../../billing-details';
import type { Queryable } from '../../db/pool';

export type InvoiceStatus = 'draft' | 'open' | 'paid' | 'uncollectible' | 'void';

/** What an invoice line bills for. */
export const LINE_KINDS = [
  'base',
  'setup_fee',
  'usage',
  'late_usage',
  'proration',
  'proration_refund',
  'credits_applied',
  'discount',
] as const;
export type LineKind = (typeof LINE_KINDS)[number];

/** A line as an invoice keeps it: the priced line plus what it bills for. */
export interface StoredLine {
  kind: LineKind;
  description: string;
  quantity: number;
  unitAmount: string;
  amount: number;
  period: { start: string; end: string } | null;
  /** Credits the line's calls spent from the customer's balance (`credits_applied` only). */
  credits?: number;
  /** The kind of the line a `discount` line takes its amount off (the line just before it). */
  discounts?: LineKind;
}

/**
 * Who an invoice is to and from, copied onto it by the database (migration 059's trigger) on
 * every write while it is a draft, so as they stood when it was finalized.
 */
export interface InvoiceParties {
  billed_to: { name: string | null; email: string | null; address: Address | null; taxIds: TaxId[] };
  issuer: {
    legalName: string;
    companyNumber: string | null;
    address: Address | null;
    taxId: string | null;
    vatNumber: string | null;
  };
}

/** One invoice as stored. */
export interface InvoiceRow {
  id: string;
  provider_id: string;
  environment: Environment;
  customer_id: string;
  purchase_id: string;
  product_id: string;
  plan_id: string;
  period_key: string;
  status: InvoiceStatus;
  billing_reason: string;
  currency: string;
  usage_period_start: Date | null;
  usage_period_end: Date | null;
  usage_units: number | null;
  free_units: number | null;
  lines: StoredLine[];
  total: number;
  amount_paid: number;
  attempt_count: number;
  payment_id: string | null;
  created_at: Date;
  finalized_at: Date | null;
  paid_at: Date | null;
  closed_at: Date | null;
  /** When an unpaid final-usage invoice is charged again (null: no retry due). */
  next_retry_at: Date | null;
  /** The hosted page's and PDF's capability. */
  access_token: string;
  billed_to: InvoiceParties['billed_to'];
  issuer: InvoiceParties['issuer'];
}

type Tenant = { providerId: string; environment: Environment };

type NewInvoice = Omit<
  InvoiceRow,
  | 'amount_paid'
  | 'attempt_count'
  | 'payment_id'
  | 'paid_at'
  | 'closed_at'
  | 'next_retry_at'
  | keyof InvoiceParties
>;

type Contents = Pick<
  InvoiceRow,
  'lines' | 'total' | 'usage_period_start' | 'usage_period_end' | 'usage_units' | 'free_units'
>;

/** One INSERT of a new invoice, with what to do when the purchase's period already has one. */
async function insertRow(
  db: Queryable,
  row: NewInvoice,
  onConflict: string,
): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `INSERT INTO invoices (id, provider_id, environment, customer_id, purchase_id, product_id, plan_id, period_key, status,
                           billing_reason, currency, usage_period_start, usage_period_end, usage_units, free_units, lines,
                           total, created_at, finalized_at, access_token)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
     ON CONFLICT (purchase_id, period_key) ${onConflict} RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.customer_id,
      row.purchase_id,
      row.product_id,
      row.plan_id,
      row.period_key,
      row.status,
      row.billing_reason,
      row.currency,
      row.usage_period_start,
      row.usage_period_end,
      row.usage_units,
      row.free_units,
      JSON.stringify(row.lines),
      row.total,
      row.created_at,
      row.finalized_at,
      row.access_token,
    ],
  );
  return rows[0];
}

/**
 * Stores a new invoice; undefined when the purchase already has one for this period key (the
 * unique index), which is how a second replica or a rerun learns the period is already billed.
 */
export function insertInvoice(db: Queryable, row: NewInvoice): Promise<InvoiceRow | undefined> {
  return insertRow(db, row, 'DO NOTHING');
}

/**
 * Stores or refreshes the draft of a period's invoice; a period whose invoice is already
 * finalized is left alone (undefined).
 */
export function saveDraft(
  db: Queryable,
  row: Omit<NewInvoice, 'status' | 'finalized_at'>,
): Promise<InvoiceRow | undefined> {
  return insertRow(
    db,
    { ...row, status: 'draft', finalized_at: null },
    `DO UPDATE SET lines = EXCLUDED.lines, total = EXCLUDED.total, usage_period_start = EXCLUDED.usage_period_start,
                   usage_period_end = EXCLUDED.usage_period_end, usage_units = EXCLUDED.usage_units,
                   free_units = EXCLUDED.free_units, billing_reason = EXCLUDED.billing_reason
      WHERE invoices.status = 'draft'`,
  );
}

/** Finalizes a draft with its closing contents: `open`, to be collected. Undefined when it was not a draft. */
export async function finalizeDraft(
  db: Queryable,
  id: string,
  contents: Contents & Pick<InvoiceRow, 'billing_reason'>,
  at: Date,
): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `UPDATE invoices SET status = 'open', finalized_at = $2, lines = $3, total = $4, usage_period_start = $5,
            usage_period_end = $6, usage_units = $7, free_units = $8, billing_reason = $9
      WHERE id = $1 AND status = 'draft' RETURNING *`,
    [
      id,
      at,
      JSON.stringify(contents.lines),
      contents.total,
      contents.usage_period_start,
      contents.usage_period_end,
      contents.usage_units,
      contents.free_units,
      contents.billing_reason,
    ],
  );
  return rows[0];
}

/**
 * A finalized invoice by the token of its hosted page (no tenant: the token is the capability);
 * a draft has no customer copy yet.
 */
export async function findInvoiceByToken(db: Queryable, token: string): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `SELECT * FROM invoices WHERE access_token = $1 AND status <> 'draft'`,
    [token],
  );
  return rows[0];
}

/** The invoice of a purchase's period, locked for the caller's transaction. */
export async function lockInvoiceOfPeriod(
  db: Queryable,
  purchaseId: string,
  periodKey: string,
): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    'SELECT * FROM invoices WHERE purchase_id = $1 AND period_key = $2 FOR NO KEY UPDATE',
    [purchaseId, periodKey],
  );
  return rows[0];
}

/** The newest invoice of the purchase that closed a usage period (what late records are checked against). */
export async function lastUsageInvoice(db: Queryable, purchaseId: string): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `SELECT * FROM invoices WHERE purchase_id = $1 AND usage_units IS NOT NULL AND status NOT IN ('void', 'draft')
      ORDER BY usage_period_end DESC LIMIT 1`,
    [purchaseId],
  );
  return rows[0];
}

/**
 * The paid invoice whose base line paid for the service period [start, end) of a purchase (its
 * first payment, trial conversion or renewal), or undefined when that period was not paid.
 */
export async function paidBaseInvoice(
  db: Queryable,
  purchaseId: string,
  start: Date,
  end: Date,
): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `SELECT * FROM invoices WHERE purchase_id = $1 AND status = 'paid' AND payment_id IS NOT NULL AND lines @> $2::jsonb
      ORDER BY created_at DESC LIMIT 1`,
    [
      purchaseId,
      JSON.stringify([{ kind: 'base', period: { start: start.toISOString(), end: end.toISOString() } }]),
    ],
  );
  return rows[0];
}

/** Records a charge attempt's outcome on the invoice; only an open invoice moves. */
export async function recordAttempt(
  db: Queryable,
  change: {
    id: string;
    paymentId: string | null;
    status: 'open' | 'paid' | 'uncollectible';
    amountPaid: number;
    at: Date;
  },
): Promise<InvoiceRow> {
  const { rows } = await db.query<InvoiceRow>(
    `UPDATE invoices SET status = $2, payment_id = COALESCE($3, payment_id), amount_paid = $4,
            attempt_count = attempt_count + CASE WHEN $3::text IS NULL THEN 0 ELSE 1 END,
            paid_at = CASE WHEN $2 = 'paid' THEN $5 ELSE paid_at END,
            closed_at = CASE WHEN $2 IN ('paid', 'uncollectible') THEN $5 ELSE closed_at END,
            next_retry_at = CASE WHEN $2 = 'open' THEN next_retry_at END
      WHERE id = $1 AND status = 'open' RETURNING *`,
    [change.id, change.status, change.paymentId, change.amountPaid, change.at],
  );
  const row = rows[0];
  if (row === undefined) throw new Error(`invoice ${change.id} is not open`);
  return row;
}

/**
 * Charges of an invoice made on request (`POST /v1/sdk/invoices/{id}/pay`): attempts numbered
 * below zero, apart from the dunning schedule's.
 */
export async function requestedAttempts(db: Queryable, invoiceId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM payments WHERE invoice_id = $1 AND attempt < 0',
    [invoiceId],
  );
  return rows[0]?.n ?? 0;
}

/** When an open invoice is charged again (null: never). */
export async function scheduleInvoiceRetry(db: Queryable, id: string, at: Date | null): Promise<void> {
  await db.query(`UPDATE invoices SET next_retry_at = $2 WHERE id = $1 AND status = 'open'`, [id, at]);
}

/**
 * Locks one open invoice whose retry is due, skipping those another scheduler holds; on a test
 * clock's pass only its customers' invoices, on an ordinary pass none of theirs.
 */
export async function lockNextInvoiceRetry(
  db: Queryable,
  now: Date,
  clockId: string | null,
  /** Invoices this pass could not charge again: left for the next pass. */
  skipped: readonly string[] = [],
): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `SELECT * FROM invoices i WHERE status = 'open' AND next_retry_at <= $1
        AND (SELECT c.test_clock_id FROM customers c WHERE c.id = i.customer_id) IS NOT DISTINCT FROM $2::text
        AND NOT (id = ANY($3::text[]))
      ORDER BY next_retry_at, id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
    [now, clockId, skipped],
  );
  return rows[0];
}

/** Voids an open invoice (guarded: only `open` moves); undefined when it was not open. */
export async function voidOpenInvoice(db: Queryable, id: string, at: Date): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    `UPDATE invoices SET status = 'void', closed_at = $2, next_retry_at = NULL WHERE id = $1 AND status = 'open' RETURNING *`,
    [id, at],
  );
  return rows[0];
}

export async function findInvoice(
  db: Queryable,
  tenant: Tenant,
  id: string,
): Promise<InvoiceRow | undefined> {
  const { rows } = await db.query<InvoiceRow>(
    'SELECT * FROM invoices WHERE provider_id = $1 AND environment = $2 AND id = $3',
    [tenant.providerId, tenant.environment, id],
  );
  return rows[0];
}

export async function listInvoices(
  db: Queryable,
  tenant: Tenant,
  page: {
    after: string | null;
    customerId: string | null;
    purchaseId: string | null;
    status: string | null;
    limit: number;
  },
): Promise<InvoiceRow[]> {
  const { rows } = await db.query<InvoiceRow>(
    `SELECT * FROM invoices WHERE provider_id = $1 AND environment = $2 AND ($3::text IS NULL OR id > $3)
       AND ($4::text IS NULL OR customer_id = $4) AND ($5::text IS NULL OR purchase_id = $5)
       AND ($6::text IS NULL OR status = $6)
     ORDER BY id LIMIT $7`,
    [
      tenant.providerId,
      tenant.environment,
      page.after,
      page.customerId,
      page.purchaseId,
      page.status,
      page.limit,
    ],
  );
  return rows;
}
