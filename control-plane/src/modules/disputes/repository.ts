import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

export type DisputeStatus = 'needs_response' | 'under_review' | 'won' | 'lost';

export interface DisputeRow {
  id: string;
  provider_id: string;
  environment: Environment;
  payment_id: string;
  customer_id: string;
  amount: number;
  currency: string;
  reason: string;
  status: DisputeStatus;
  evidence: string | null;
  processor_dispute: string;
  created_at: Date;
  updated_at: Date;
  closed_at: Date | null;
}

type Tenant = { providerId: string; environment: Environment };

/** Opens a dispute; undefined when the payment already has an open one. */
export async function insertDispute(db: Queryable, row: DisputeRow): Promise<DisputeRow | undefined> {
  const { rows } = await db.query<DisputeRow>(
    `INSERT INTO disputes (id, provider_id, environment, payment_id, customer_id, amount, currency, reason, status, evidence,
                           processor_dispute, created_at, updated_at, closed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
     ON CONFLICT (payment_id) WHERE status IN ('needs_response', 'under_review') DO NOTHING RETURNING *`,
    [
      row.id,
      row.provider_id,
      row.environment,
      row.payment_id,
      row.customer_id,
      row.amount,
      row.currency,
      row.reason,
      row.status,
      row.evidence,
      row.processor_dispute,
      row.created_at,
      row.updated_at,
      row.closed_at,
    ],
  );
  return rows[0];
}

/** Moves a dispute only from one of `from`; undefined when it was no longer there (a race lost). */
export async function moveDispute(
  db: Queryable,
  tenant: Tenant,
  id: string,
  from: DisputeStatus[],
  change: { status: DisputeStatus; evidence?: string; at: Date },
): Promise<DisputeRow | undefined> {
  const closed = change.status === 'won' || change.status === 'lost';
  const { rows } = await db.query<DisputeRow>(
    `UPDATE disputes SET status = $5, evidence = COALESCE($6, evidence), updated_at = $7,
            closed_at = CASE WHEN $8 THEN $7 ELSE closed_at END
      WHERE provider_id = $1 AND environment = $2 AND id = $3 AND status = ANY($4) RETURNING *`,
    [
      tenant.providerId,
      tenant.environment,
      id,
      from,
      change.status,
      change.evidence ?? null,
      change.at,
      closed,
    ],
  );
  return rows[0];
}

/** A dispute by the processor's id for it (Stripe's dp_… / du_…), within one provider's environment. */
export async function findDisputeByProcessorId(
  db: Queryable,
  tenant: Tenant,
  processorDispute: string,
): Promise<DisputeRow | undefined> {
  const { rows } = await db.query<DisputeRow>(
    'SELECT * FROM disputes WHERE provider_id = $1 AND environment = $2 AND processor_dispute = $3',
    [tenant.providerId, tenant.environment, processorDispute],
  );
  return rows[0];
}

export async function findDispute(
  db: Queryable,
  tenant: Tenant,
  id: string,
): Promise<DisputeRow | undefined> {
  const { rows } = await db.query<DisputeRow>(
    'SELECT * FROM disputes WHERE provider_id = $1 AND environment = $2 AND id = $3',
    [tenant.providerId, tenant.environment, id],
  );
  return rows[0];
}

/** What open and lost disputes hold of a payment (won ones gave it back). */
export async function disputedAmount(db: Queryable, paymentId: string): Promise<number> {
  const { rows } = await db.query<{ total: number | null }>(
    `SELECT sum(amount)::bigint AS total FROM disputes WHERE payment_id = $1 AND status <> 'won'`,
    [paymentId],
  );
  return rows[0]?.total ?? 0;
}

export async function listDisputes(
  db: Queryable,
  tenant: Tenant,
  page: { after: string | null; status: string | null; limit: number },
): Promise<DisputeRow[]> {
  const { rows } = await db.query<DisputeRow>(
    `SELECT * FROM disputes WHERE provider_id = $1 AND environment = $2 AND ($3::text IS NULL OR id > $3)
       AND ($4::text IS NULL OR status = $4) ORDER BY id LIMIT $5`,
    [tenant.providerId, tenant.environment, page.after, page.status, page.limit],
  );
  return rows;
}
