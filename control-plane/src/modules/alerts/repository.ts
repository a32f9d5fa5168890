import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';
import { GRANTS_ACCESS } from '../purchases/state-machine';

export const ALERT_KINDS = ['allowance_percent', 'credit_balance', 'spend_amount'] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

export interface AlertRow {
  id: string;
  provider_id: string;
  environment: Environment;
  plan_id: string | null;
  customer_id: string | null;
  kind: AlertKind;
  threshold: string;
  created_at: Date;
}

type Tenant = { providerId: string; environment: Environment };

/** Creates the alert; answers undefined when the same one exists already. */
export async function insertAlert(
  db: Queryable,
  row: Omit<AlertRow, 'threshold'> & { threshold: number },
): Promise<AlertRow | undefined> {
  const { rows } = await db.query<AlertRow>(
    `INSERT INTO usage_alerts (id, provider_id, environment, plan_id, customer_id, kind, threshold, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.plan_id,
      row.customer_id,
      row.kind,
      row.threshold,
      row.created_at,
    ],
  );
  return rows[0];
}

export async function listAlerts(
  db: Queryable,
  tenant: Tenant,
  filter: { planId?: string | undefined; customerId?: string | undefined },
): Promise<AlertRow[]> {
  const { rows } = await db.query<AlertRow>(
    `SELECT * FROM usage_alerts WHERE provider_id = $1 AND environment = $2
        AND ($3::text IS NULL OR plan_id = $3) AND ($4::text IS NULL OR customer_id = $4)
      ORDER BY id LIMIT 500`,
    [tenant.providerId, tenant.environment, filter.planId ?? null, filter.customerId ?? null],
  );
  return rows;
}

export async function deleteAlert(db: Queryable, tenant: Tenant, id: string): Promise<AlertRow | undefined> {
  const { rows } = await db.query<AlertRow>(
    'DELETE FROM usage_alerts WHERE provider_id = $1 AND environment = $2 AND id = $3 RETURNING *',
    [tenant.providerId, tenant.environment, id],
  );
  return rows[0];
}

/**
 * Each alert with every purchase in force it watches (a plan's: every purchase of the plan; a
 * customer's: each of theirs) and the purchase's plan (`$1`: the statuses that grant access).
 */
const ALERTED_PURCHASES = `FROM usage_alerts a
       JOIN purchases p ON p.provider_id = a.provider_id AND p.environment = a.environment
                       AND (p.plan_id = a.plan_id OR p.customer_id = a.customer_id)
                       AND p.status = ANY($1)
       JOIN plans pl ON pl.id = p.plan_id`;

/** Not fired yet in the purchase's period (its key: the purchase and the period's start). */
const NOT_FIRED_THIS_PERIOD = `NOT EXISTS (SELECT 1 FROM usage_alert_firings f
                         WHERE f.alert_id = a.id AND f.customer_id = p.customer_id
                           AND f.period_key = p.id || ':' || to_char(p.period_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;

/** An allowance alert with a purchase it watches: the purchase's period and its plan's limit. */
export interface WatchedAllowance {
  alert_id: string;
  provider_id: string;
  environment: Environment;
  threshold: string;
  customer_id: string;
  purchase_id: string;
  product_id: string;
  period_start: Date;
  usage_limit: number;
}

/**
 * Every allowance alert with each purchase in force it watches (a plan's: every purchase of the
 * plan; a customer's: each of theirs), whose plan has a limit, not yet fired in this period.
 */
export async function watchedAllowances(db: Queryable): Promise<WatchedAllowance[]> {
  const { rows } = await db.query<WatchedAllowance>(
    `SELECT a.id AS alert_id, a.provider_id, a.environment, a.threshold, p.customer_id, p.id AS purchase_id,
            p.product_id, p.period_start, pl.usage_limit
       ${ALERTED_PURCHASES}
      WHERE a.kind = 'allowance_percent' AND pl.usage_limit IS NOT NULL AND pl.usage_limit > 0
        AND ${NOT_FIRED_THIS_PERIOD}`,
    [[...GRANTS_ACCESS]],
  );
  return rows;
}

/** A spend alert with a purchase it watches: the purchase's period, status, price and currency. */
export interface WatchedSpend {
  alert_id: string;
  provider_id: string;
  environment: Environment;
  threshold: string;
  customer_id: string;
  purchase_id: string;
  status: string;
  amount: number;
  currency: string;
  period_start: Date;
}

/**
 * Every spend alert with each purchase in force it watches whose plan prices usage (what makes
 * a period's spend grow), not yet fired in this period.
 */
export async function watchedSpends(db: Queryable): Promise<WatchedSpend[]> {
  const { rows } = await db.query<WatchedSpend>(
    `SELECT a.id AS alert_id, a.provider_id, a.environment, a.threshold, p.customer_id, p.id AS purchase_id,
            p.status, p.amount::int AS amount, p.currency, p.period_start
       ${ALERTED_PURCHASES}
      WHERE a.kind = 'spend_amount' AND pl.type IN ('usage-based', 'hybrid') AND NOT p.pays_from_credits
        AND ${NOT_FIRED_THIS_PERIOD}`,
    [[...GRANTS_ACCESS]],
  );
  return rows;
}

/** A balance alert with a customer it watches, their balance, and the funding it fell from. */
export interface WatchedBalance {
  alert_id: string;
  provider_id: string;
  environment: Environment;
  threshold: string;
  customer_id: string;
  balance: string;
  funding: string;
}

/**
 * Every balance alert with each customer it watches (a plan's: every customer holding the plan)
 * whose balance is below its threshold, with the latest movement that added credits (the period
 * the alert fires once in), not yet fired for it.
 */
export async function lowBalances(db: Queryable): Promise<WatchedBalance[]> {
  const { rows } = await db.query<WatchedBalance>(
    `SELECT w.*, COALESCE((SELECT max(l.id) FROM credit_ledger l WHERE l.customer_id = w.customer_id AND l.amount > 0), 'none') AS funding
       FROM (SELECT DISTINCT a.id AS alert_id, a.provider_id, a.environment, a.threshold, c.id AS customer_id,
                    COALESCE(b.balance, 0)::text AS balance
               FROM usage_alerts a
               JOIN customers c ON c.provider_id = a.provider_id AND c.environment = a.environment
                               AND (c.id = a.customer_id
                                    OR EXISTS (SELECT 1 FROM purchases p WHERE p.customer_id = c.id
                                                 AND p.plan_id = a.plan_id AND p.status = ANY($1)))
               LEFT JOIN credit_balances b ON b.customer_id = c.id
              WHERE a.kind = 'credit_balance' AND COALESCE(b.balance, 0) < a.threshold) w
      WHERE NOT EXISTS (SELECT 1 FROM usage_alert_firings f
                         WHERE f.alert_id = w.alert_id AND f.customer_id = w.customer_id
                           AND f.period_key = 'funding:' || COALESCE((SELECT max(l.id) FROM credit_ledger l
                                                WHERE l.customer_id = w.customer_id AND l.amount > 0), 'none'))`,
    [[...GRANTS_ACCESS]],
  );
  return rows;
}

/** An alert's mail, kept with its firing until it is sent. */
export interface AlertMail {
  to: string;
  subject: string;
  text: string;
}

/**
 * Records a crossing with the mail to send about it (its sending leased to the caller from `at`);
 * false when it was recorded already (another evaluation fired it).
 */
export async function recordFiring(
  db: Queryable,
  firing: { alertId: string; customerId: string; periodKey: string; value: number; at: Date },
  mail: AlertMail | null,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO usage_alert_firings (alert_id, customer_id, period_key, value, fired_at, mail_to, mail_subject, mail_text, mail_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $5) ON CONFLICT DO NOTHING`,
    [
      firing.alertId,
      firing.customerId,
      firing.periodKey,
      firing.value,
      firing.at,
      mail?.to ?? null,
      mail?.subject ?? null,
      mail?.text ?? null,
    ],
  );
  return (rowCount ?? 0) > 0;
}

/** A firing's key, as its mail is marked sent. */
export interface FiringKey {
  alert_id: string;
  customer_id: string;
  period_key: string;
}

/**
 * Takes over the sending of mails not sent in time: firings of the last day whose mail lease
 * (`staleBefore`) ran out, leased again from `at`. Each is answered to one caller only.
 */
export async function leaseUnsentMails(
  db: Queryable,
  at: Date,
  staleBefore: Date,
  since: Date,
): Promise<Array<FiringKey & AlertMail>> {
  const { rows } = await db.query<FiringKey & { mail_to: string; mail_subject: string; mail_text: string }>(
    `UPDATE usage_alert_firings SET mail_attempt_at = $1
      WHERE mail_to IS NOT NULL AND mailed_at IS NULL AND fired_at > $3
        AND (mail_attempt_at IS NULL OR mail_attempt_at < $2)
      RETURNING alert_id, customer_id, period_key, mail_to, mail_subject, mail_text`,
    [at, staleBefore, since],
  );
  return rows.map((r) => ({ ...r, to: r.mail_to, subject: r.mail_subject, text: r.mail_text }));
}

export async function markMailed(db: Queryable, key: FiringKey, at: Date): Promise<void> {
  await db.query(
    'UPDATE usage_alert_firings SET mailed_at = $4 WHERE alert_id = $1 AND customer_id = $2 AND period_key = $3',
    [key.alert_id, key.customer_id, key.period_key, at],
  );
}
