import { ID, newId } from '@mcp-meter/contracts/kit';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import type { KeysetPosition } from '../../http/keyset';

/**
 * The kinds of mail a provider may send its customers, and the event that calls for each: a
 * recurring payment that failed (dunning started or went on) or a trial that ended unpaid; a
 * trial about to end; a renewal coming up; a payment taken; a refund made; an automatic credit
 * top-up whose payment failed; a card about to expire.
 */
export const MAIL_KINDS = [
  'payment_failed',
  'trial_ending',
  'upcoming_renewal',
  'receipt',
  'refund',
  'auto_topup_failed',
  'card_expiring',
  'cancellation',
] as const;
export type MailKind = (typeof MAIL_KINDS)[number];

const KIND_OF_EVENT: Readonly<Record<string, MailKind>> = {
  'purchase.past_due': 'payment_failed',
  'purchase.suspended': 'payment_failed',
  'purchase.trial_ending': 'trial_ending',
  'purchase.renewal_reminder': 'upcoming_renewal',
  'payment.succeeded': 'receipt',
  'payment.refunded': 'refund',
  'credits.auto_topup_failed': 'auto_topup_failed',
  'customer.card_expiring': 'card_expiring',
  'purchase.cancellation_scheduled': 'cancellation',
  'purchase.cancelled': 'cancellation',
};

type Tenant = { providerId: string; environment: Environment };

export type MailStatus = 'pending' | 'sent' | 'logged' | 'skipped' | 'failed';

export interface MailRow {
  id: string;
  event_id: string;
  provider_id: string;
  environment: Environment;
  customer_id: string;
  kind: MailKind;
  status: MailStatus;
  attempts: number;
  next_attempt_at: Date;
  to_address: string | null;
  subject: string | null;
  last_error: string | null;
  created_at: Date;
  sent_at: Date | null;
}

/** A mail taken for sending, with the envelope of the event it is about. */
export type LeasedMail = MailRow & {
  event: { type: string; created: number; data: { object: Record<string, unknown> } } | null;
};

/**
 * The mail an event calls for, when its provider sends that kind in its environment and the
 * event names a customer; written in the event's transaction (events/outbox.ts), so the mail
 * exists exactly when the change does. An event of a sandbox test clock carries the clock's
 * time, yet its mail goes at once, as its webhooks do.
 */
export async function queueCustomerMail(
  db: Queryable,
  event: Tenant & { eventId: string; type: string; customerId: string | null; at: Date },
): Promise<void> {
  const kind = KIND_OF_EVENT[event.type];
  if (kind === undefined || event.customerId === null) return;
  await db.query(
    `INSERT INTO customer_mails (id, event_id, provider_id, environment, customer_id, kind, status, next_attempt_at, created_at)
     SELECT $1, $2, s.provider_id, s.environment, $5, $6, 'pending', LEAST($7, now()), $7
       FROM customer_email_settings s
      WHERE s.provider_id = $3 AND s.environment = $4 AND $6 = ANY(s.kinds)
     ON CONFLICT (event_id) DO NOTHING`,
    [
      newId(ID.customerMail),
      event.eventId,
      event.providerId,
      event.environment,
      event.customerId,
      kind,
      event.at,
    ],
  );
}

export async function mailKinds(db: Queryable, tenant: Tenant): Promise<MailKind[]> {
  const { rows } = await db.query<{ kinds: MailKind[] }>(
    'SELECT kinds FROM customer_email_settings WHERE provider_id = $1 AND environment = $2',
    [tenant.providerId, tenant.environment],
  );
  return rows[0]?.kinds ?? [];
}

/**
 * Turns kinds on and off in one statement, the rest left as they are: changes made at once each
 * keep theirs (no read, then write, of the whole list).
 */
export async function changeMailKinds(
  db: Queryable,
  tenant: Tenant,
  change: { on: MailKind[]; off: MailKind[] },
  at: Date,
): Promise<MailKind[]> {
  const { rows } = await db.query<{ kinds: MailKind[] }>(
    `INSERT INTO customer_email_settings AS s (provider_id, environment, kinds, updated_at)
     VALUES ($1, $2, $3, $5)
     ON CONFLICT (provider_id, environment) DO UPDATE
       SET kinds = ARRAY(SELECT DISTINCT k FROM unnest(s.kinds || $3::text[]) AS k WHERE NOT (k = ANY($4::text[])) ORDER BY k),
           updated_at = EXCLUDED.updated_at
     RETURNING kinds`,
    [tenant.providerId, tenant.environment, change.on, change.off, at],
  );
  return rows[0]?.kinds ?? [];
}

/**
 * Takes up to `limit` due mails for sending: each is counted an attempt and leased until
 * `leaseUntil` (FOR UPDATE SKIP LOCKED), so passes racing in one or many processes never take
 * the same mail; one whose sender died is taken again when its lease runs out.
 */
export async function leaseDueMails(
  db: Queryable,
  at: Date,
  leaseUntil: Date,
  limit: number,
): Promise<LeasedMail[]> {
  const { rows } = await db.query<LeasedMail>(
    `WITH due AS (
       SELECT id FROM customer_mails WHERE status = 'pending' AND next_attempt_at <= $1
        ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED)
     UPDATE customer_mails m SET attempts = m.attempts + 1, next_attempt_at = $2
       FROM due WHERE m.id = due.id
     RETURNING m.*, (SELECT e.payload FROM outbox_events e WHERE e.id = m.event_id) AS event`,
    [at, leaseUntil, limit],
  );
  return rows;
}

/** The outcome of one attempt; a no-op when the lease was lost (another pass took the mail). */
export async function settleMail(
  db: Queryable,
  mail: Pick<MailRow, 'id' | 'attempts'>,
  outcome:
    | { status: 'sent' | 'logged'; to: string; subject: string; at: Date }
    | { status: 'skipped'; why: string }
    | { status: 'failed'; why: string }
    | { status: 'pending'; why: string; retryAt: Date },
): Promise<void> {
  await db.query(
    `UPDATE customer_mails SET status = $3, to_address = COALESCE($4, to_address), subject = COALESCE($5, subject),
            sent_at = $6, last_error = $7, next_attempt_at = COALESCE($8, next_attempt_at)
      WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
    [
      mail.id,
      mail.attempts,
      outcome.status,
      'to' in outcome ? outcome.to : null,
      'to' in outcome ? outcome.subject : null,
      'to' in outcome ? outcome.at : null,
      'why' in outcome ? outcome.why.slice(0, 500) : null,
      outcome.status === 'pending' ? outcome.retryAt : null,
    ],
  );
}

/** A tenant's mails, or one customer's, newest first; one more than `limit` tells of a next page. */
export async function listMails(
  db: Queryable,
  tenant: Tenant,
  options: { customerId?: string | undefined; after?: KeysetPosition; limit: number },
): Promise<MailRow[]> {
  const { rows } = await db.query<MailRow>(
    `SELECT * FROM customer_mails
      WHERE provider_id = $1 AND environment = $2
        AND ($3::text IS NULL OR customer_id = $3)
        AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5))
      ORDER BY created_at DESC, id DESC LIMIT $6`,
    [
      tenant.providerId,
      tenant.environment,
      options.customerId ?? null,
      options.after?.createdAt ?? null,
      options.after?.id ?? null,
      options.limit + 1,
    ],
  );
  return rows;
}

/** A credit top-up bought at checkout, as its receipt tells it; none for another payment. */
export interface TopUpBought {
  credits: number;
  /** Its price before the coupon, and the coupon's name; null without one. */
  subtotal: number | null;
  coupon: string | null;
}

/** The top-up a payment paid for on a checkout page (its period key is the session), if it was one. */
export async function topUpOfPayment(db: Queryable, paymentId: string): Promise<TopUpBought | undefined> {
  const { rows } = await db.query<{ credits: number; subtotal: number | null; coupon: string | null }>(
    `SELECT cs.topup_credits AS credits, cs.amount_subtotal AS subtotal, c.name AS coupon
       FROM payments p
       JOIN checkout_sessions cs ON cs.id = p.period_key AND cs.kind = 'topup'
       LEFT JOIN coupons c ON c.id = cs.coupon_id
      WHERE p.id = $1 AND p.reason = 'topup'`,
    [paymentId],
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  return {
    credits: Number(row.credits),
    subtotal: row.coupon === null ? null : row.subtotal,
    coupon: row.coupon,
  };
}
