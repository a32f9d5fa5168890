import { useQuery } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import { api, money, unwrap } from '../api';
import { DailyChart } from '../chart';
import { Failed, Loaded, Loading, Page } from '../ui';

/**
 * The business at a glance: usage records over the last 30 days (today's among them), net
 * revenue this month against last month, and webhook endpoints that are failing. Three calls.
 */
export function Overview() {
  // A glance is read fresh each time the page opens (what was cached shows until it answers).
  const fresh = { staleTime: 0, refetchOnMount: 'always' } as const;
  const daily = useQuery({
    queryKey: ['daily'],
    queryFn: () => unwrap(api.GET('/ui/analytics/daily')),
    ...fresh,
  });
  const pnl = useQuery({
    queryKey: ['pnl', 'this-month'],
    queryFn: () => unwrap(api.GET('/v1/ui/financials/pnl', { params: { query: { period: 'this-month' } } })),
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
          <Loaded query={pnl} what="revenue">
            {(p) => (
              <>
                <p className="figure" data-testid="revenue-month">
                  {money(p.current.netRevenue, p.currency)}
                </p>
                <p className="muted">
                  {money(p.prior.netRevenue, p.currency)} {p.prior.periodLabel}
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
