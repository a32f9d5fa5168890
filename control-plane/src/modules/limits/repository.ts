import pg from 'pg';
import { type Pool, prepared, type Queryable } from '../../db/pool';
import type { PlanRow } from '../plans/repository';
import type { Tenant } from '../products/repository';
import { GRANTS_ACCESS } from '../purchases/state-machine';

/** The columns of a plan that decide whether and how it governs a check (of `PlanRow`). */
export type GoverningPlanRow = Pick<
  PlanRow,
  | 'id'
  | 'type'
  | 'billing_model'
  | 'price'
  | 'base_price'
  | 'setup_fee'
  | 'unit_amount'
  | 'tiers'
  | 'usage_limit'
  | 'credits_per_unit'
  | 'billing_cycle'
  | 'billing_interval_days'
>;

/**
 * What a limit check is about, found in one round trip: the customer (by id or externalRef, never
 * a deleted one) and the frozen time of its sandbox test clock, the product (by id or reference),
 * the customer's access-granting purchase of it (the latest, as `findAccessPurchase` picks) and,
 * without one, the product's active default plan, the governing plan's deciding columns (the
 * purchase's plan, else the default plan) and the customer's funded credits. A limit check used
 * to make up to four queries one after another.
 */
export interface LimitSubject {
  customerId: string | undefined;
  productId: string | undefined;
  purchase: { id: string; plan_id: string; period_start: Date; period_end: Date | null } | undefined;
  /** The purchase's plan, else the default plan (this tenant's only, whatever its status). */
  plan: GoverningPlanRow | undefined;
  /** The frozen time of the test clock the customer is on (sandbox). */
  testTime: Date | undefined;
  /**
   * Every credit made available to the customer (balance plus usage debited, as `fundedCredits`
   * reads it): the cap of its credit counter when the governing plan is paid from credits.
   */
  fundedCredits: number;
}

type SubjectRow = { [K in keyof GoverningPlanRow]: GoverningPlanRow[K] | null } & {
  subject_customer_id: string | null;
  subject_test_time: Date | null;
  subject_funded_credits: string | null;
  subject_product_id: string | null;
  subject_purchase_id: string | null;
  subject_plan_id: string | null;
  subject_period_start: Date | null;
  subject_period_end: Date | null;
  subject_default_plan_id: string | null;
};

export async function findLimitSubject(
  db: Queryable,
  tenant: Tenant,
  customerRef: string,
  productRef: string,
): Promise<LimitSubject> {
  const { rows } = await db.query<SubjectRow>(
    prepared(
      'limit_subject',
      `WITH c AS (
         SELECT id, test_clock_id FROM customers
          WHERE provider_id = $1 AND environment = $2 AND status <> 'deleted' AND (id = $3 OR external_ref = $3)
          ORDER BY (id = $3) DESC LIMIT 1
       ), pr AS (
         SELECT id FROM products
          WHERE provider_id = $1 AND environment = $2 AND (id = $4 OR reference = $4)
          LIMIT 1
       ), pu AS (
         SELECT p.id, p.plan_id, p.period_start, p.period_end FROM purchases p
          WHERE p.customer_id = (SELECT id FROM c) AND p.product_id = (SELECT id FROM pr) AND p.status = ANY($5)
          ORDER BY p.updated_at DESC LIMIT 1
       ), s AS (
         SELECT (SELECT id FROM c) AS subject_customer_id,
                (SELECT t.frozen_time FROM test_clocks t
                  WHERE $2 = 'sandbox' AND t.provider_id = $1 AND t.id = (SELECT test_clock_id FROM c)) AS subject_test_time,
                (SELECT (b.balance + b.usage_debited)::text FROM credit_balances b
                  WHERE b.customer_id = (SELECT id FROM c)) AS subject_funded_credits,
                (SELECT id FROM pr) AS subject_product_id,
                pu.id AS subject_purchase_id, pu.plan_id AS subject_plan_id,
                pu.period_start AS subject_period_start, pu.period_end AS subject_period_end,
                CASE WHEN pu.id IS NULL THEN
                  (SELECT id FROM plans WHERE product_id = (SELECT id FROM pr) AND is_default AND status = 'active' LIMIT 1)
                END AS subject_default_plan_id
           FROM (SELECT 1) one LEFT JOIN pu ON true
       )
       SELECT s.*, p.id, p.type, p.billing_model, p.price, p.base_price, p.setup_fee, p.unit_amount,
              p.tiers, p.usage_limit, p.credits_per_unit, p.billing_cycle, p.billing_interval_days
         FROM s
         LEFT JOIN plans p ON p.id = COALESCE(s.subject_plan_id, s.subject_default_plan_id)
                          AND p.provider_id = $1 AND p.environment = $2`,
      [tenant.providerId, tenant.environment, customerRef, productRef, [...GRANTS_ACCESS]],
    ),
  );
  const row = rows[0];
  if (row === undefined)
    return {
      customerId: undefined,
      productId: undefined,
      purchase: undefined,
      plan: undefined,
      testTime: undefined,
      fundedCredits: 0,
    };
  const {
    subject_customer_id,
    subject_test_time,
    subject_funded_credits,
    subject_product_id,
    subject_purchase_id,
    subject_plan_id,
    subject_period_start,
    subject_period_end,
    subject_default_plan_id,
    ...plan
  } = row;
  return {
    customerId: subject_customer_id ?? undefined,
    productId: subject_product_id ?? undefined,
    purchase:
      subject_purchase_id !== null && subject_plan_id !== null && subject_period_start !== null
        ? {
            id: subject_purchase_id,
            plan_id: subject_plan_id,
            period_start: subject_period_start,
            period_end: subject_period_end,
          }
        : undefined,
    plan: plan.id === null ? undefined : (plan as GoverningPlanRow),
    testTime: subject_test_time ?? undefined,
    fundedCredits: subject_funded_credits === null ? 0 : Number(subject_funded_credits),
  };
}

/** The channel migration 032's triggers announce subject changes on, with the tenant ('*': all). */
const SUBJECT_CHANNEL = 'limit_subjects';

/** A connection that hears every change to limit subjects (see `listenForSubjectChanges`). */
export interface SubjectChanges {
  /**
   * Resolves once every change committed before the call has been heard: a query on the
   * listening connection, whose answer PostgreSQL sends only after the notifications queued
   * for it before the query arrived.
   */
  barrier(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A connection of its own (outside `pool`, with its settings) listening on the subject channel:
 * `heard` gets each announced tenant, `lost` the error that ended the connection (once). A
 * connect, LISTEN or barrier that takes longer than `timeoutMs` fails, and a failed barrier gives
 * the connection up (it may have missed changes): a silent, half-dead connection must never hold
 * checks, which then read PostgreSQL until the caller listens again.
 */
export async function listenForSubjectChanges(
  pool: Pool,
  timeoutMs: number,
  heard: (tenant: string) => void,
  lost: (error: Error) => void,
): Promise<SubjectChanges> {
  const client = new pg.Client({
    ...pool.options,
    application_name: 'mcp-meter limit subjects',
    keepAlive: true,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  let ended = false;
  const end = (error: Error) => {
    if (ended) return;
    ended = true;
    lost(error);
  };
  client.on('error', end);
  client.on('end', () => end(new Error('the subject listener connection ended')));
  client.on('notification', (message) => {
    if (message.channel === SUBJECT_CHANNEL) heard(message.payload ?? '*');
  });
  try {
    await client.connect();
    await client.query(`LISTEN ${SUBJECT_CHANNEL}`);
  } catch (error) {
    ended = true;
    void client.end().catch(() => undefined);
    throw error;
  }
  return {
    barrier: async () => {
      try {
        await client.query('SELECT 1');
      } catch (error) {
        end(error instanceof Error ? error : new Error(String(error)));
        void client.end().catch(() => undefined);
        throw error;
      }
    },
    close: async () => {
      ended = true;
      await client.end().catch(() => undefined);
    },
  };
}
