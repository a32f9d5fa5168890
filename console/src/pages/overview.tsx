import { useQuery } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import { api, money, unwrap } from '../api';
import { DailyChart } from '../chart';
import { Failed, Loaded, Loading, Page } from '../ui';

/** Last month and this one, in UTC, as YYYY-MM. */
function lastTwoMonths() {
  const now = new Date();
  return {
    from: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1)).toISOString().slice(0, 7),
    to: now.toISOString().slice(0, 7),
  };
}

/**
 * The business at a glance: usage records over the last 30 days (today's among them), net
 * revenue this month against last month, MRR and paying customers, paywall conversion over 30
 * days, and webhook endpoints that are failing. Four calls, made at once.
 */
export function Overview() {
  // A glance is read fresh each time the page opens (what was cached shows until it answers).
  const fresh = { staleTime: 0, refetchOnMount: 'always' } as const;
  const daily = useQuery({
    queryKey: ['daily'],
    queryFn: () => unwrap(api.GET('/ui/analytics/daily')),
    ...fresh,
  });
  const revenue = useQuery({
    queryKey: ['analytics-revenue', 'glance'],
    queryFn: () => unwrap(api.GET('/v1/ui/analytics/revenue', { params: { query: lastTwoMonths() } })),
    ...fresh,
  });
  // The paywall over the last 30 days (the default range).
  const funnel = useQuery({
    queryKey: ['analytics-funnel', 'glance'],
    queryFn: () => unwrap(api.GET('/v1/ui/analytics/funnel')),
    ...fresh,
  });
  const endpoints = useQuery({
    queryKey: ['webhook-endpoints'],
    queryFn: () => unwrap(api.GET('/v1/webhook_endpoints')),
    ...fresh,
  });
  return (
    <Page title="Overview">
      <ul className="cards glance">
        <li className="card">
          <h2>Usage today</h2>
          <Loaded query={daily} what="usage">
            {(d) => (
              <p className="figure" data-testid="usage-today">
                {d.data.at(-1)?.records ?? 0}
              </p>
            )}
          </Loaded>
        </li>
        <li className="card">
          <h2>Net revenue this month</h2>
          <Loaded query={revenue} what="revenue">
            {(r) => (
              <>
                <p className="figure" data-testid="revenue-month">
                  {money(r.months[1]?.revenue.net ?? 0, r.currency)}
                </p>
                <p className="muted">
                  {money(r.months[0]?.revenue.net ?? 0, r.currency)} in {r.months[0]?.month}
                </p>
              </>
            )}
          </Loaded>
        </li>
        <li className="card">
          <h2>MRR</h2>
          <Loaded query={revenue} what="MRR">
            {(r) => (
              <>
                <p className="figure" data-testid="mrr-glance">
                  <Link to="/revenue">{money(r.months[1]?.mrr.end ?? 0, r.currency)}</Link>
                </p>
                <p className="muted" data-testid="paying-glance">
                  {r.months[1]?.customers.paying ?? 0} paying customers
                </p>
              </>
            )}
          </Loaded>
        </li>
        <li className="card">
          <h2>Paywall conversion</h2>
          <Loaded query={funnel} what="the paywall funnel">
            {(f) => (
              <>
                <p className="figure" data-testid="conversion-glance">
                  <Link to="/funnel">
                    {f.totals.conversionBasisPoints === null
                      ? '—'
                      : `${(f.totals.conversionBasisPoints / 100).toFixed(2)}%`}
                  </Link>
                </p>
                <p className="muted">
                  {f.totals.paid} paid of {f.totals.offered} checkouts in 30 days
                </p>
              </>
            )}
          </Loaded>
        </li>
        <li className="card">
          <h2>Webhook endpoints</h2>
          <Loaded query={endpoints} what="webhook endpoints">
            {(e) => {
              const failing = e.data.filter((x) => x.status === 'disabled' || x.consecutiveFailures > 0);
              return failing.length === 0 ? (
                <p data-testid="failing-endpoints">{e.data.length === 0 ? 'None yet.' : 'All delivering.'}</p>
              ) : (
                <p data-testid="failing-endpoints">
                  <Link to="/developers">
                    {failing.length} failing: {failing.map((x) => x.url).join(', ')}
                  </Link>
                </p>
              );
            }}
          </Loaded>
        </li>
      </ul>
      {daily.isPending ? (
        <Loading what="usage" />
      ) : daily.error ? (
        <Failed error={daily.error} retry={() => void daily.refetch()} />
      ) : daily.data.data.every((d) => d.records === 0) ? (
        <div className="empty">
          <p>
            No usage in the last 30 days. Put an MCP server behind the proxy and sell it with a plan from the{' '}
            <Link to="/catalog">catalog</Link>; its calls appear here.
          </p>
        </div>
      ) : (
        <DailyChart
          label="Usage records"
          days={daily.data.data.map((d) => ({ date: d.date, value: d.records }))}
        />
      )}
    </Page>
  );
}
