import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { downloadCsv, SeriesChart } from '../chart';
import { Choices, Loaded, Page, RangeSelect, rangeEnd, Select, Table } from '../ui';

type Grain = 'hour' | 'day' | 'week' | 'month';
type Group = 'none' | 'tool' | 'customer' | 'product' | 'plan' | 'server' | 'outcome' | 'environment';
const DAY_MS = 86_400_000;
const RANGES = {
  '1': 'Last 24 hours',
  '7': 'Last 7 days',
  '30': 'Last 30 days',
  '90': 'Last 90 days',
  '365': 'Last year',
};
type Range = keyof typeof RANGES;

/** The browser's own time zone, the usual choice for a person reading a chart. */
const HOME_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const ZONES = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC')];
if (!ZONES.includes(HOME_ZONE)) ZONES.unshift(HOME_ZONE);

/**
 * Usage analytics: calls over time in a time zone, by tool, customer, product, plan, server,
 * outcome or environment (sandbox beside live), with each tool's error rate and origin latency; every table exports to CSV. Two API
 * calls.
 */
export function Usage() {
  const [range, setRange] = useState<Range>('30');
  const [grain, setGrain] = useState<Grain>('day');
  const [groupBy, setGroupBy] = useState<Group>('tool');
  const [timeZone, setTimeZone] = useState(HOME_ZONE);
  // One "now" per choice of range, so a re-render does not ask again.
  const [to] = useState(rangeEnd);
  const from = new Date(to.getTime() - Number(range) * DAY_MS).toISOString();
  const query = { from, to: to.toISOString() };
  const usage = useQuery({
    queryKey: ['analytics-usage', range, grain, groupBy, timeZone],
    queryFn: () =>
      unwrap(
        api.GET('/v1/ui/analytics/usage', {
          params: { query: { ...query, grain, groupBy, timeZone, limit: 8 } },
        }),
      ),
  });
  const tools = useQuery({
    queryKey: ['analytics-tools', range],
    queryFn: () => unwrap(api.GET('/v1/ui/analytics/tools', { params: { query } })),
  });
  return (
    <Page title="Usage">
      <Choices>
        <RangeSelect<Range> value={range} ranges={RANGES} onChange={setRange} />
        <Select<Grain>
          label="Per"
          name="grain"
          value={grain}
          onChange={setGrain}
          options={[
            { value: 'hour', label: 'Hour' },
            { value: 'day', label: 'Day' },
            { value: 'week', label: 'Week' },
            { value: 'month', label: 'Month' },
          ]}
        />
        <Select<Group>
          label="Group by"
          name="groupBy"
          value={groupBy}
          onChange={setGroupBy}
          options={[
            { value: 'none', label: 'Nothing' },
            { value: 'tool', label: 'Tool' },
            { value: 'customer', label: 'Customer' },
            { value: 'product', label: 'Product' },
            { value: 'plan', label: 'Plan' },
            { value: 'server', label: 'MCP server' },
            { value: 'outcome', label: 'Outcome' },
            { value: 'environment', label: 'Environment' },
          ]}
        />
        <Select
          label="Time zone"
          name="timeZone"
          value={timeZone}
          onChange={setTimeZone}
          options={ZONES.map((zone) => ({ value: zone, label: zone }))}
        />
      </Choices>
      <Loaded query={usage} what="usage">
        {(u) => {
          const lines = [
            ...u.series.map((s) => ({ name: s.name ?? (s.key || '(none)'), values: s.calls })),
            ...(u.other ? [{ name: `${u.other.groups} others`, values: u.other.calls }] : []),
          ];
          const header = ['Bucket start', ...lines.map((l) => l.name)];
          const rows = u.buckets.map((b, i) => [b.label, ...lines.map((l) => l.values[i] ?? 0)]);
          return (
            <>
              <p>
                <strong data-testid="usage-total">{u.totals.calls}</strong> calls, {u.totals.errors} errors,{' '}
                {u.totals.units} units ({u.timeZone})
              </p>
              <SeriesChart label="Calls" buckets={u.buckets} lines={lines} />
              <details>
                <summary>The numbers</summary>
                <Table<(string | number)[]>
                  caption="Calls per bucket and group"
                  rows={rows}
                  rowKey={(row) => String(row[0])}
                  columns={header.map((h, i) => ({ header: h, numeric: i > 0, cell: (row) => row[i] }))}
                />
              </details>
              <button
                type="button"
                onClick={() => downloadCsv(`usage-${grain}-${groupBy}.csv`, header, rows)}
              >
                Export calls as CSV
              </button>
            </>
          );
        }}
      </Loaded>
      <h2>Tools</h2>
      <Loaded
        query={tools}
        what="tools"
        isEmpty={(t) => t.data.length === 0}
        empty={<p>No tool calls in this range.</p>}
      >
        {(t) => {
          const ms = (v: number | undefined) => (v === undefined ? '—' : `${v} ms`);
          const header = ['Tool', 'Server', 'Calls', 'Errors', 'Error rate', 'p50 ms', 'p95 ms', 'p99 ms'];
          const rows = t.data.map((s) => [
            s.tool,
            s.server,
            s.calls,
            s.errors,
            `${(s.errorRate * 100).toFixed(1)}%`,
            s.latencyMs?.p50 ?? '',
            s.latencyMs?.p95 ?? '',
            s.latencyMs?.p99 ?? '',
          ]);
          return (
            <>
              <Table
                caption="Tools: calls, errors and origin latency"
                rows={t.data}
                rowKey={(s) => `${s.server}/${s.tool}`}
                columns={[
                  { header: 'Tool', cell: (s) => <code>{s.tool}</code> },
                  { header: 'Calls', numeric: true, cell: (s) => s.calls },
                  { header: 'Errors', numeric: true, cell: (s) => s.errors },
                  { header: 'Error rate', numeric: true, cell: (s) => `${(s.errorRate * 100).toFixed(1)}%` },
                  { header: 'p50', numeric: true, cell: (s) => ms(s.latencyMs?.p50) },
                  { header: 'p95', numeric: true, cell: (s) => ms(s.latencyMs?.p95) },
                  { header: 'p99', numeric: true, cell: (s) => ms(s.latencyMs?.p99) },
                ]}
              />
              <button type="button" onClick={() => downloadCsv('tools.csv', header, rows)}>
                Export tools as CSV
              </button>
            </>
          );
        }}
      </Loaded>
    </Page>
  );
}
