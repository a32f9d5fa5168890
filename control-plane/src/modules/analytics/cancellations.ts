import { divideHalfEven } from '@mcp-meter/contracts/pricing';
import type { Static } from '@sinclair/typebox';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findProduct } from '../products/repository';
import { CANCELLATION_FEEDBACK } from '../purchases/cancellation';
import {
  type CancellationCount,
  countCancellations,
  countRetentionSaves,
  latestComments,
} from './cancellation-repository';
import type { CancellationAnalyticsQuery } from './schemas';

const DAY_MS = 86_400_000;
/** Comments answered with the report, newest first. */
const COMMENTS = 20;

const share = (count: number, of: number) =>
  of === 0 ? null : Number(divideHalfEven(BigInt(count) * 10_000n, BigInt(of)));

/**
 * Why customers cancelled over a window (docs/analytics.md): purchases whose cancellation was
 * asked for (through the API or the portal) or made by dunning in it, not reactivated since; the
 * requests by the customer's feedback (Stripe's choices, or none given), with each one's share
 * in basis points; the retention offers taken in the portal instead; and the newest comments.
 * Counted in PostgreSQL, exactly.
 */
export class CancellationAnalytics {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
  ) {}

  async report(auth: AuthContext, query: Static<typeof CancellationAnalyticsQuery>) {
    const to = query.to === undefined ? this.clock.now() : new Date(query.to);
    const from = query.from === undefined ? new Date(to.getTime() - 30 * DAY_MS) : new Date(query.from);
    if (from.getTime() >= to.getTime())
      throw new ValidationError([{ path: '/from', message: 'must be before to', location: 'querystring' }]);
    let productId: string | null = null;
    if (query.productRef !== undefined) {
      const product = await findProduct(this.pool, auth, query.productRef);
      if (product === undefined)
        throw new NotFoundError('product_not_found', `No product ${query.productRef}`);
      productId = product.id;
    }
    const window = { from, to, productId };
    const [counts, comments, retentionSaves] = await Promise.all([
      countCancellations(this.pool, auth, window),
      latestComments(this.pool, auth, window, COMMENTS),
      countRetentionSaves(this.pool, auth, window),
    ]);
    const of = (reason: CancellationCount['reason']) =>
      counts.filter((c) => c.reason === reason).reduce((sum, c) => sum + c.count, 0);
    const requested = of('cancellation_requested');
    const asked = (feedback: string | null) =>
      counts.find((c) => c.reason === 'cancellation_requested' && c.feedback === feedback)?.count ?? 0;
    const byFeedback = [...CANCELLATION_FEEDBACK, null]
      .map((feedback) => ({
        feedback,
        count: asked(feedback),
        shareBasisPoints: share(asked(feedback), requested),
      }))
      .sort((a, b) => b.count - a.count);
    return {
      from: from.toISOString(),
      to: to.toISOString(),
      productId,
      total: requested + of('payment_failed'),
      requested,
      paymentFailed: of('payment_failed'),
      retentionSaves,
      byFeedback,
      comments: comments.map((c) => ({
        purchaseRef: c.purchase_id,
        customerRef: c.customer_id,
        productId: c.product_id,
        feedback: c.feedback,
        comment: c.comment,
        requestedAt: new Date(c.requested_at).toISOString(),
      })),
    };
  }
}
