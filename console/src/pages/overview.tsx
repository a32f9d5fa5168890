import { useQuery } from '@tanstack/react-query';
import { Link } from '@tanstack/react-router';
import { api, unwrap } from '../api';
import { DailyChart } from '../chart';
import { Failed, Loading, Page } from '../ui';

/** Calls over the last 30 days, across every customer and meter. */
export function Overview() {
  const daily = useQuery({ queryKey: ['daily'], queryFn: () => unwrap(api.GET('/ui/analytics/daily')) });
  return (
    <Page title="Overview">
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
