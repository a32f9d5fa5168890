import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Queryable } from '../../db/pool';

/** A default card expiring this month, with its customer: see card-expiry.ts. */
export interface ExpiringCardRow {
  id: string;
  customer_id: string;
  provider_id: string;
  environment: Environment;
  brand: string;
  last4: string;
  exp_month: number;
  exp_year: number;
}

/**
 * The next default card (in id order, after `after`) that expires in the month `monthIndex`
 * (year × 12 + month − 1), not announced yet, of a customer on `clockId` (none: customers on no
 * test clock) who will be charged again: a purchase that renews (trialing, active or past due,
 * set to renew, no cancellation scheduled) or an auto top-up turned on. Locked, skipping cards
 * another replica holds.
 */
export async function lockNextExpiringCard(
  db: Queryable,
  due: { monthIndex: number; clockId: string | null; after: string },
): Promise<ExpiringCardRow | undefined> {
  const { rows } = await db.query<ExpiringCardRow>(
    `SELECT m.id, m.customer_id, c.provider_id, c.environment, m.brand, m.last4, m.exp_month, m.exp_year
       FROM payment_methods m JOIN customers c ON c.id = m.customer_id
      WHERE m.is_default AND m.detached_at IS NULL AND c.status <> 'deleted'
        AND m.exp_year * 12 + m.exp_month - 1 = $1
        AND c.test_clock_id IS NOT DISTINCT FROM $2 AND m.id > $3
        AND NOT EXISTS (SELECT 1 FROM card_expiry_notices n WHERE n.payment_method_id = m.id)
        AND (EXISTS (SELECT 1 FROM purchases p
                      WHERE p.customer_id = c.id AND p.status IN ('trialing', 'active', 'past_due')
                        AND p.is_recurring AND p.auto_renew AND NOT p.cancel_at_period_end)
             OR EXISTS (SELECT 1 FROM credit_auto_topups a WHERE a.customer_id = c.id AND a.status = 'active'))
      ORDER BY m.id LIMIT 1 FOR NO KEY UPDATE OF m SKIP LOCKED`,
    [due.monthIndex, due.clockId, due.after],
  );
  return rows[0];
}

/** Records the announcement; false when another pass made it first. */
export async function insertExpiryNotice(
  db: Queryable,
  notice: { paymentMethodId: string; eventId: string; at: Date },
): Promise<boolean> {
  const inserted = await db.query(
    `INSERT INTO card_expiry_notices (payment_method_id, event_id, created_at) VALUES ($1, $2, $3)
     ON CONFLICT (payment_method_id) DO NOTHING`,
    [notice.paymentMethodId, notice.eventId, notice.at],
  );
  return inserted.rowCount === 1;
}
