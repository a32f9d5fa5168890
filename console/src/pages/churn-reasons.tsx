import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api';
import { ExportableTable } from '../chart';
import { dateTime, Loaded } from '../ui';

/** The customer's reasons, as the portal offers them (Stripe's choices). */
const FEEDBACK: Record<string, string> = {
  too_expensive: 'Too expensive',
  missing_features: 'Missing features',
  switched_service: 'Switched to another service',
  unused: 'Not used enough',
  customer_service: 'Customer service',
  too_complex: 'Too complex',
  low_quality: 'Low quality',
  other: 'Other',
};
const feedbackText = (feedback: string | null) =>
  feedback === null ? 'No reason given' : (FEEDBACK[feedback] ?? feedback);
const share = (bps: number | null) => (bps === null ? '—' : `${(bps / 100).toFixed(1)}%`);

/**
 * Why customers cancelled since `from` (docs/analytics.md): cancellations asked for and made by
 * dunning, the requests by the reason the customer chose, and their newest comments. One API call.
 */
export function ChurnReasons(props: { from: string }) {
  const report = useQuery({
    queryKey: ['analytics-cancellations', props.from],
    queryFn: () =>
      unwrap(api.GET('/v1/ui/analytics/cancellations', { params: { query: { from: props.from } } })),
  });
  return (
    <section aria-labelledby="churn-reasons">
      <h2 id="churn-reasons">Why customers cancelled</h2>
      <Loaded query={report} what="cancellations">
        {(r) => (
          <>
            {r.retentionSaves > 0 && (
              <p>
                {r.retentionSaves} {r.retentionSaves === 1 ? 'customer' : 'customers'} took the retention
                offer in the portal instead of cancelling.
              </p>
            )}
            {r.total === 0 ? (
              <p>No cancellations since {dateTime(r.from)}.</p>
            ) : (
              <>
                <p>
                  {r.total} cancellations since {dateTime(r.from)}: {r.requested} asked for, {r.paymentFailed}{' '}
                  when the card kept failing.
                </p>
                <ExportableTable
                  caption="Cancellations asked for, by the reason the customer gave"
                  header={['Reason', 'Cancellations', 'Share']}
                  rows={r.byFeedback
                    .filter((f) => f.count > 0)
                    .map((f) => [feedbackText(f.feedback), f.count, share(f.shareBasisPoints)])}
                  textColumns={1}
                  file="cancellation-reasons.csv"
                  exportLabel="Export cancellation reasons as CSV"
                />
                {r.comments.length > 0 && (
                  <>
                    <h3>What they said</h3>
                    <ul className="comments">
                      {r.comments.map((c) => (
                        <li key={c.purchaseRef}>
                          <q>{c.comment}</q>{' '}
                          <span className="muted">
                            ({feedbackText(c.feedback)}, {dateTime(c.requestedAt)})
                          </span>
                        </li>
                      ))}
                    </ul>
                  </>
                )}
              </>
            )}
          </>
        )}
      </Loaded>
    </section>
  );
}
