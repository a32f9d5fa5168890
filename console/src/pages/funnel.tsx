import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api';
import { ExportableTable } from '../chart';
import { Choices, Loaded, Page, RangeSelect, rangeEnd } from '../ui';

const DAY_MS = 86_400_000;
const RANGES = { '7': 'Last 7 days', '30': 'Last 30 days', '90': 'Last 90 days' };
type Range = keyof typeof RANGES;

const FORMS: Record<string, string> = {
  url_elicitation: 'URL elicitation',
  error_32042: '-32042 error',
  text_link: 'Text link',
  '': 'Not recorded',
};
const ERAS: Record<string, string> = { modern: '2026-07-28', legacy: '2025 and earlier', '': '—' };
const percent = (bps: number | null) => (bps === null ? '—' : `${(bps / 100).toFixed(2)}%`);
const seconds = (s: number | undefined) =>
  s === undefined ? '—' : s < 120 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`;

/** The four stages as horizontal bars, each as wide as its share of the first. */
function FunnelBars(props: { stages: readonly { label: string; value: number }[] }) {
  const top = Math.max(1, props.stages[0]?.value ?? 0);
  return (
    <figure className="chart">
      <svg
        viewBox="0 0 720 176"
        width="100%"
        role="img"
        data-testid="funnel-chart"
        aria-label={`Paywall funnel: ${props.stages.map((s) => `${s.label} ${s.value}`).join(', ')}`}
      >
        {props.stages.map((stage, i) => (
          <g key={stage.label}>
            <text x="0" y={i * 44 + 26} fontSize="14" fill="#333">
              {stage.label}
            </text>
            <rect
              x="170"
              y={i * 44 + 8}
              height="28"
              width={Math.max(2, (stage.value / top) * 480)}
              fill={['#1d4ed8', '#0e7490', '#7c3aed', '#047857'][i]}
            />
            <text x={Math.max(2, (stage.value / top) * 480) + 178} y={i * 44 + 27} fontSize="14" fill="#111">
              {stage.value}
            </text>
          </g>
        ))}
      </svg>
    </figure>
  );
}

/**
 * The paywall funnel: paywalls shown → checkouts offered → opened → paid, with conversion and
 * the time to pay; by the form the client saw and by plan, each table exported to CSV. One API
 * call.
 */
export function Funnel() {
  const [range, setRange] = useState<Range>('30');
  const [to] = useState(rangeEnd);
  const from = new Date(to.getTime() - Number(range) * DAY_MS).toISOString();
  const funnel = useQuery({
    queryKey: ['analytics-funnel', range],
    queryFn: () =>
      unwrap(api.GET('/v1/ui/analytics/funnel', { params: { query: { from, to: to.toISOString() } } })),
  });
  return (
    <Page title="Paywall funnel">
      <Choices>
        <RangeSelect<Range> value={range} ranges={RANGES} onChange={setRange} />
      </Choices>
      <Loaded
        query={funnel}
        what="the funnel"
        isEmpty={(f) => f.totals.shown === 0}
        empty={<p>No call met the paywall in this range.</p>}
      >
        {(f) => {
          const t = f.totals;
          const stageHeader = ['Shown', 'Offered', 'Opened', 'Paid', 'Opened of offered', 'Paid of offered'];
          const stageOf = (s: Omit<typeof t, 'timeToPay'>) => [
            s.shown,
            s.offered,
            s.opened,
            s.paid,
            percent(s.openRateBasisPoints),
            percent(s.conversionBasisPoints),
          ];
          const formHeader = ['Era', 'Form', ...stageHeader];
          const formRows = f.byForm.map((x) => [
            ERAS[x.era] ?? x.era,
            FORMS[x.form] ?? x.form,
            ...stageOf(x),
          ]);
          const planHeader = ['Product', 'Plan', ...stageHeader, 'Median time to pay (s)'];
          const planRows = f.byPlan.map((x) => [
            x.productName ?? x.productId,
            x.kind === 'topup' ? 'Credit pack' : (x.planName ?? x.planId ?? 'No offer'),
            ...stageOf(x),
            x.timeToPay?.medianSeconds ?? '',
          ]);
          return (
            <>
              <ul className="cards glance">
                <li className="card">
                  <h2>Paid of offered</h2>
                  <p className="figure" data-testid="funnel-conversion">
                    {percent(t.conversionBasisPoints)}
                  </p>
                  <p className="muted">
                    {t.paid} of {t.offered} checkouts
                  </p>
                </li>
                <li className="card">
                  <h2>Median time to pay</h2>
                  <p className="figure">{seconds(t.timeToPay?.medianSeconds)}</p>
                  <p className="muted">p90 {seconds(t.timeToPay?.p90Seconds)}</p>
                </li>
              </ul>
              <FunnelBars
                stages={[
                  { label: 'Paywalls shown', value: t.shown },
                  { label: 'Checkouts offered', value: t.offered },
                  { label: 'Opened', value: t.opened },
                  { label: 'Paid', value: t.paid },
                ]}
              />
              <h2>By what the client saw</h2>
              <ExportableTable
                caption="The funnel by era and form of the paywall"
                header={formHeader}
                rows={formRows}
                textColumns={2}
                file="funnel-forms.csv"
                exportLabel="Export forms as CSV"
              />
              <h2>By plan</h2>
              <ExportableTable
                caption="The funnel by product and plan sold"
                header={planHeader}
                rows={planRows}
                textColumns={2}
                file="funnel-plans.csv"
                exportLabel="Export plans as CSV"
              />
              <p className="muted">
                Shown counts calls the paywall answered; a customer's paywalls within minutes share one
                checkout, so conversion is of checkouts offered. Paying opens a checkout.
              </p>
            </>
          );
        }}
      </Loaded>
    </Page>
  );
}
