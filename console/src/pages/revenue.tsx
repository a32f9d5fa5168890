import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api, decimal, money, unwrap } from '../api';
import { ExportableTable } from '../chart';
import { MovementChart } from '../movement-chart';
import { Choices, Loaded, Page, RangeSelect, Select } from '../ui';
import { ChurnReasons } from './churn-reasons';

const RANGES = { '6': 'Last 6 months', '12': 'Last 12 months', '24': 'Last 24 months' };
type Range = keyof typeof RANGES;

/** This month in UTC and `back` months before it, as YYYY-MM. */
function monthsBack(back: number): { from: string; to: string } {
  const now = new Date();
  const key = (d: Date) => d.toISOString().slice(0, 7);
  return {
    from: key(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 1))),
    to: key(now),
  };
}

const rate = (bps: number | null) => (bps === null ? '—' : `${(bps / 100).toFixed(2)}%`);

/**
 * Revenue analytics: MRR now, its movements month by month (chart and table), paying customers
 * and churn, and the money of each month by what it paid for, equal to the P&L's. Each table
 * exports to CSV; below, why customers cancelled over the same months. Two API calls.
 */
export function Revenue() {
  const [range, setRange] = useState<Range>('6');
  const [currency, setCurrency] = useState<string | undefined>(undefined);
  const report = useQuery({
    queryKey: ['analytics-revenue', range, currency],
    queryFn: () =>
      unwrap(
        api.GET('/v1/ui/analytics/revenue', {
          params: { query: { ...monthsBack(Number(range) - 1), ...(currency ? { currency } : {}) } },
        }),
      ),
  });
  return (
    <Page title="Revenue">
      <Choices>
        <RangeSelect<Range> value={range} ranges={RANGES} onChange={setRange} />
        {report.data && report.data.otherCurrencies.length > 0 ? (
          <Select
            label="Currency"
            name="currency"
            value={report.data.currency}
            onChange={setCurrency}
            options={[report.data.currency, ...report.data.otherCurrencies].map((c) => ({
              value: c,
              label: c.toUpperCase(),
            }))}
          />
        ) : null}
      </Choices>
      <Loaded query={report} what="revenue">
        {(r) => {
          const last = r.months.at(-1);
          const cash = (n: number) => money(n, r.currency);
          const mrrHeader = [
            'Month',
            'MRR at start',
            'New',
            'Expansion',
            'Reactivation',
            'Contraction',
            'Churn',
            'MRR at end',
          ];
          const customerHeader = [
            'Month',
            'Paying',
            'Active',
            'New',
            'Reactivated',
            'Churned',
            'Customer churn',
            'MRR churn',
          ];
          const customerRows = r.months.map((m) => [
            m.month,
            m.customers.paying,
            m.customers.active,
            m.customers.new,
            m.customers.reactivated,
            m.customers.churned,
            rate(m.churnRate.customersBasisPoints),
            rate(m.churnRate.mrrBasisPoints),
          ]);
          // Each row as the table shows it and as the CSV holds it (plain decimals, no symbol).
          const mrrOf = (m: (typeof r.months)[number], amount: (n: number) => string) => [
            m.month,
            amount(m.mrr.start),
            amount(m.mrr.new),
            amount(m.mrr.expansion),
            amount(m.mrr.reactivation),
            amount(m.mrr.contraction),
            amount(m.mrr.churn),
            amount(m.mrr.end),
          ];
          const moneyHeader = [
            'Month',
            'Recurring',
            'Usage',
            'One-time',
            'Credits',
            'Other',
            'Gross',
            'Refunds',
            'Disputes',
            'Fees',
            'Net',
            'Payers',
            'Net per payer',
          ];
          const moneyOf = (m: (typeof r.months)[number], amount: (n: number) => string) => [
            m.month,
            amount(m.revenue.recurring),
            amount(m.revenue.usage),
            amount(m.revenue.oneTime),
            amount(m.revenue.credits),
            amount(m.revenue.other),
            amount(m.revenue.gross),
            amount(m.revenue.refunds),
            amount(m.revenue.disputes),
            amount(m.revenue.platformFees),
            amount(m.revenue.net),
            m.revenue.customersPaying,
            m.revenue.perPayingCustomer === null ? '' : amount(m.revenue.perPayingCustomer),
          ];
          const plain = (n: number) => decimal(n, r.currency);
          const mrrRows = r.months.map((m) => mrrOf(m, cash));
          const moneyRows = r.months.map((m) => moneyOf(m, cash));
          const code = r.currency.toUpperCase();
          const inCurrency = (header: string[], amounts: number) =>
            header.map((h, i) => (i > 0 && i <= amounts ? `${h} (${code})` : h));
          return (
            <>
              <ul className="cards glance">
                <li className="card">
                  <h2>MRR</h2>
                  <p className="figure" data-testid="mrr-now">
                    {cash(last?.mrr.end ?? 0)}
                  </p>
                  <p className="muted">{cash(last?.mrr.start ?? 0)} when the month began</p>
                </li>
                <li className="card">
                  <h2>Paying customers</h2>
                  <p className="figure" data-testid="paying-now">
                    {last?.customers.paying ?? 0}
                  </p>
                  <p className="muted">{last?.customers.active ?? 0} with a plan in force</p>
                </li>
                <li className="card">
                  <h2>MRR per paying customer</h2>
                  <p className="figure">{last?.mrr.arpu == null ? '—' : cash(last.mrr.arpu)}</p>
                </li>
                <li className="card">
                  <h2>Customer churn this month</h2>
                  <p className="figure">{rate(last?.churnRate.customersBasisPoints ?? null)}</p>
                </li>
              </ul>
              <h2>MRR movements</h2>
              <MovementChart
                currency={r.currency}
                months={r.months.map((m) => ({ month: m.month, ...m.mrr }))}
              />
              <ExportableTable
                caption="MRR and its movements per month"
                header={mrrHeader}
                rows={mrrRows}
                textColumns={1}
                file={`mrr-${r.currency}.csv`}
                exportLabel="Export MRR as CSV"
                csv={{ header: inCurrency(mrrHeader, 7), rows: r.months.map((m) => mrrOf(m, plain)) }}
              />
              <h2>Customers</h2>
              <ExportableTable
                caption="Paying and active customers and churn per month"
                header={customerHeader}
                rows={customerRows}
                textColumns={1}
                file="customers.csv"
                exportLabel="Export customers as CSV"
              />
              <h2>Money received</h2>
              <ExportableTable
                caption="Revenue per month by what it paid for"
                header={moneyHeader}
                rows={moneyRows}
                textColumns={1}
                file={`revenue-${r.currency}.csv`}
                exportLabel="Export revenue as CSV"
                csv={{
                  header: inCurrency(moneyHeader, 10).map((h, i) => (i === 12 ? `${h} (${code})` : h)),
                  rows: r.months.map((m) => moneyOf(m, plain)),
                }}
              />
              <p className="muted">
                Months in UTC, in {r.currency.toUpperCase()}. Gross, refunds, disputes, fees and net are the
                P&amp;L's figures for each month.
              </p>
            </>
          );
        }}
      </Loaded>
      <ChurnReasons from={`${monthsBack(Number(range) - 1).from}-01T00:00:00.000Z`} />
    </Page>
  );
}
