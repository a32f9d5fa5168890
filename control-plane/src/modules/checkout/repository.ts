import type { Queryable } from '../../db/pool';

export interface SessionRow {
  id: string;
  provider_id: string;
  environment: 'sandbox' | 'live';
  customer_id: string;
  kind: 'plan' | 'topup' | 'setup';
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
  /** Who offered it: the API (a provider's integration) or the paywall. */
  source: 'api' | 'paywall';
  /** When its page was first opened (or it was paid, whichever came first). */
  opened_at: Date | null;
  /** A coupon the session applies (checked when chosen), redeemed when the session is paid. */
  coupon_id: string | null;
  /** What is due before any coupon (`amount` is what is due now); null for a session made with a coupon before it was kept. */
  amount_subtotal: number | null;
  /** Whether the hosted page offers a promotion-code field (plan and top-up sessions). */
  allow_promotion_codes: boolean;
  /** Codes typed on the hosted page that matched no coupon. */
  promotion_code_failures: number;
  /** `required`: the page asks for a billing address, saved on the customer when paid. */
  billing_address_collection: 'auto' | 'required';
  /** The page lets the customer give a tax id (buying as a business), saved on the customer. */
  tax_id_collection: boolean;
  /** A customer who has no tax id must give one (Stripe's tax_id_collection[required]). */
  tax_id_required: boolean;
}

export async function insertSession(db: Queryable, row: SessionRow): Promise<void> {
  await db.query(
    `INSERT INTO checkout_sessions (id, provider_id, environment, customer_id, kind, plan_id, product_id, topup_credits, amount, currency,
                                    status, success_url, cancel_url, purchase_id, expires_at, completed_at, created_at, source, coupon_id,
                                    allow_promotion_codes, billing_address_collection, tax_id_collection, amount_subtotal,
                                    tax_id_required)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`,
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
      row.source,
      row.coupon_id,
      row.allow_promotion_codes,
      row.billing_address_collection,
      row.tax_id_collection,
      row.amount_subtotal,
      row.tax_id_required,
    ],
  );
}

/** Notes the first time a session's page was opened. */
export async function markOpened(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query('UPDATE checkout_sessions SET opened_at = $2 WHERE id = $1 AND opened_at IS NULL', [id, at]);
}

/** Checkout sessions by id, within one tenant. */
export async function sessionsByIds(
  db: Queryable,
  tenant: { providerId: string; environment: string },
  ids: string[],
): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    'SELECT * FROM checkout_sessions WHERE provider_id = $1 AND environment = $2 AND id = ANY($3::text[])',
    [tenant.providerId, tenant.environment, ids],
  );
  return rows;
}

export async function findSession(db: Queryable, id: string): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>('SELECT * FROM checkout_sessions WHERE id = $1', [id]);
  return rows[0];
}

/**
 * Takes an open, unexpired session for one payer until a two-minute lease runs out (so a payer
 * that crashed does not hold it); undefined when it is closed, expired or held by another.
 */
export async function claimSession(db: Queryable, id: string, at: Date): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE checkout_sessions SET paying_until = $2::timestamptz + interval '2 minutes'
      WHERE id = $1 AND status = 'active' AND expires_at > $2 AND (paying_until IS NULL OR paying_until <= $2)
      RETURNING *`,
    [id, at],
  );
  return rows[0];
}

/**
 * Sets the coupon (or none), the amount due and its subtotal of an open plan or top-up session
 * that offers promotion codes, unless a payer holds it: what the customer pays is what the page
 * showed. Undefined when it is closed, expired or being paid.
 */
export async function setSessionCoupon(
  db: Queryable,
  id: string,
  change: { couponId: string | null; amount: number; subtotal: number },
  at: Date,
): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE checkout_sessions SET coupon_id = $2, amount = $3, amount_subtotal = $5
      WHERE id = $1 AND status = 'active' AND expires_at > $4 AND (paying_until IS NULL OR paying_until <= $4)
        AND kind IN ('plan', 'topup') AND allow_promotion_codes
      RETURNING *`,
    [id, change.couponId, change.amount, at, change.subtotal],
  );
  return rows[0];
}

/** Counts a code typed on the hosted page that matched no coupon; answers the count so far. */
export async function countCodeFailure(db: Queryable, id: string): Promise<number> {
  const { rows } = await db.query<{ promotion_code_failures: number }>(
    `UPDATE checkout_sessions SET promotion_code_failures = promotion_code_failures + 1 WHERE id = $1
     RETURNING promotion_code_failures`,
    [id],
  );
  return rows[0]?.promotion_code_failures ?? 0;
}

export async function releaseSession(db: Queryable, id: string): Promise<void> {
  await db.query(`UPDATE checkout_sessions SET paying_until = NULL WHERE id = $1 AND status = 'active'`, [
    id,
  ]);
}

/**
 * Locks a session for its payment's transaction; false when it is no longer open. Held, it is
 * skipped by the expiry pass and waited for by a deletion, so nothing closes it under a charge.
 */
export async function lockOpenSession(db: Queryable, id: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT id FROM checkout_sessions WHERE id = $1 AND status = 'active' FOR UPDATE`,
    [id],
  );
  return rows.length > 0;
}

/** Closes a paid session; undefined when it was no longer open. */
export async function markSessionUsed(
  db: Queryable,
  id: string,
  at: Date,
  purchaseId: string | null,
): Promise<SessionRow | undefined> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE checkout_sessions SET status = 'used', completed_at = $2, purchase_id = $3, paying_until = NULL,
            opened_at = coalesce(opened_at, $2)
      WHERE id = $1 AND status = 'active' RETURNING *`,
    [id, at, purchaseId],
  );
  return rows[0];
}

/**
 * Expires up to 500 open sessions past their time, skipping any another scheduler holds and any
 * being paid: a payer that claimed one before its time ends it (used, or released and expired
 * by a later pass), so a charge under way never meets an expired session.
 */
export async function expireDueSessions(db: Queryable, at: Date): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE checkout_sessions SET status = 'expired' WHERE id IN (
       SELECT id FROM checkout_sessions
        WHERE status = 'active' AND expires_at <= $1 AND (paying_until IS NULL OR paying_until <= $1)
        ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [at],
  );
  return rows;
}

/**
 * Expires the open sessions of a customer being deleted. One being paid is left to its payer,
 * which finds the customer deleted under its lock, charges nothing and releases it (the expiry
 * pass ends it at its time; paying it meanwhile finds no customer), or had charged before the
 * deletion and marks it used.
 */
export async function expireOpenSessionsOf(
  db: Queryable,
  customerId: string,
  at: Date,
): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    `UPDATE checkout_sessions SET status = 'expired'
      WHERE customer_id = $1 AND status = 'active' AND (paying_until IS NULL OR paying_until <= $2)
      RETURNING *`,
    [customerId, at],
  );
  return rows;
}

/** Payment attempts made for a top-up session so far. */
export async function topupAttempts(db: Queryable, customerId: string, sessionId: string): Promise<number> {
  const { rows } = await db.query<{ attempts: number }>(
    'SELECT count(*)::int AS attempts FROM payments WHERE customer_id = $1 AND period_key = $2 AND purchase_id IS NULL',
    [customerId, sessionId],
  );
  return rows[0]?.attempts ?? 0;
}

/** The newest open plan session of the customer for the plan that stays open past `openUntil`. */
/** An open top-up session of the customer for this pack, still open at `openUntil`. */
export async function findOpenTopupSession(
  db: Queryable,
  customerId: string,
  pack: { credits: number; amount: number },
  openUntil: Date,
  promotionCodes: boolean,
): Promise<string | undefined> {
  // The pack's price, whatever code the customer applied on the session since.
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM checkout_sessions
      WHERE customer_id = $1 AND kind = 'topup' AND topup_credits = $2 AND amount_subtotal = $3
        AND status = 'active' AND expires_at > $4 AND allow_promotion_codes = $5
      ORDER BY created_at DESC LIMIT 1`,
    [customerId, pack.credits, pack.amount, openUntil, promotionCodes],
  );
  return rows[0]?.id;
}

export async function findOpenPlanSession(
  db: Queryable,
  customerId: string,
  planId: string,
  openUntil: Date,
  promotionCodes: boolean,
): Promise<string | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM checkout_sessions
      WHERE customer_id = $1 AND plan_id = $2 AND kind = 'plan' AND status = 'active' AND expires_at > $3
        AND allow_promotion_codes = $4
      ORDER BY created_at DESC LIMIT 1`,
    [customerId, planId, openUntil, promotionCodes],
  );
  return rows[0]?.id;
}
