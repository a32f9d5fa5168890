import type { Queryable } from '../../db/pool';
import type { AuthContext } from '../../tenancy';
import type { CancellationFeedback } from '../purchases/cancellation';

/** Cancellations asked for (or made by dunning) in a window, as counted by reason and feedback. */
export interface CancellationCount {
  reason: 'cancellation_requested' | 'payment_failed';
  feedback: string | null;
  count: number;
}

export interface CancellationComment {
  purchase_id: string;
  customer_id: string;
  product_id: string;
  feedback: CancellationFeedback | null;
  comment: string;
  requested_at: string;
}

/** Purchases whose cancellation was asked for in [from, to): reactivated ones hold none. */
const WINDOW = `provider_id = $1 AND environment = $2 AND cancellation_details IS NOT NULL
  AND (cancellation_details->>'requestedAt')::timestamptz >= $3
  AND (cancellation_details->>'requestedAt')::timestamptz < $4
  AND ($5::text IS NULL OR product_id = $5)`;

export async function countCancellations(
  db: Queryable,
  auth: AuthContext,
  window: { from: Date; to: Date; productId: string | null },
): Promise<CancellationCount[]> {
  const { rows } = await db.query<CancellationCount>(
    `SELECT cancellation_details->>'reason' AS reason, cancellation_details->>'feedback' AS feedback,
            count(*)::int AS count
       FROM purchases WHERE ${WINDOW}
      GROUP BY 1, 2`,
    [auth.providerId, auth.environment, window.from, window.to, window.productId],
  );
  return rows;
}

/** The newest comments customers left when cancelling in the window, at most `limit`. */
export async function latestComments(
  db: Queryable,
  auth: AuthContext,
  window: { from: Date; to: Date; productId: string | null },
  limit: number,
): Promise<CancellationComment[]> {
  const { rows } = await db.query<CancellationComment>(
    `SELECT id AS purchase_id, customer_id, product_id, cancellation_details->>'feedback' AS feedback,
            cancellation_details->>'comment' AS comment, cancellation_details->>'requestedAt' AS requested_at
       FROM purchases WHERE ${WINDOW} AND cancellation_details->>'comment' IS NOT NULL
      ORDER BY (cancellation_details->>'requestedAt')::timestamptz DESC, id
      LIMIT $6`,
    [auth.providerId, auth.environment, window.from, window.to, window.productId, limit],
  );
  return rows;
}

/** Retention offers taken in the portal instead of cancelling in [from, to). */
export async function countRetentionSaves(
  db: Queryable,
  auth: AuthContext,
  window: { from: Date; to: Date; productId: string | null },
): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM retention_saves
      WHERE provider_id = $1 AND environment = $2 AND saved_at >= $3 AND saved_at < $4
        AND ($5::text IS NULL OR product_id = $5)`,
    [auth.providerId, auth.environment, window.from, window.to, window.productId],
  );
  return rows[0]?.count ?? 0;
}
