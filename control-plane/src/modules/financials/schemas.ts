import { Type } from '@sinclair/typebox';
import { Nullable, Timestamp } from '../../http/schemas';
import { PERIOD_FORMS } from './periods';

const Minor = (description: string) => Type.Integer({ description: `${description}; minor units` });

export const RevenueSummary = Type.Object({
  grossRevenue: Minor('Payments received in the period'),
  refunds: Minor('Refunded in the period (subtracted)'),
  disputes: Minor('Withdrawn by disputes, net of disputes won back (subtracted)'),
  platformFees: Minor("The platform's fees on the period's payments (subtracted)"),
  netRevenue: Minor('grossRevenue − refunds − disputes − platformFees'),
  costOfRevenue: Minor('Costs recorded in the period'),
  recognisedRevenue: Minor(
    'Earned in the period: payments spread evenly over the service periods they pay for',
  ),
  deferredRevenue: Minor('Received but not yet earned at the end of the period (or now)'),
  hasCostTransactions: Type.Boolean(),
  grossProfit: Type.Object({ amount: Minor('netRevenue − costOfRevenue') }),
  grossMargin: Type.Object({
    basisPoints: Nullable(
      Type.Integer({ description: 'grossProfit ÷ netRevenue in basis points; null without revenue' }),
    ),
    percent: Nullable(Type.Number({ description: 'The same in percent, two decimals' })),
  }),
});

export const BalanceSummary = Type.Object({
  openingBalance: Minor("The provider's processor balance when the period began"),
  paymentsReceived: Minor('Added by payments'),
  refundsIssued: Minor('Taken by refunds'),
  disputes: Minor('Taken by disputes, net of disputes won'),
  platformFees: Minor("Taken by the platform's fees"),
  costsPaid: Minor('Taken by costs'),
  payouts: Minor('Paid out to the bank'),
  closingBalance: Minor('openingBalance + netChange'),
  netChange: Minor('paymentsReceived − refundsIssued − disputes − platformFees − costsPaid − payouts'),
});

const Monthly = Type.Array(
  Type.Object({
    month: Type.String({ description: 'YYYY-MM' }),
    revenue: RevenueSummary,
    balance: BalanceSummary,
  }),
);

const Common = {
  periodLabel: Type.String(),
  period: Type.Object({ start: Timestamp, end: Timestamp }),
  currency: Type.String({ description: 'The one currency the report is in' }),
  otherCurrencies: Type.Array(Type.String(), {
    description: 'Currencies that also moved in the period, left out of this report (ask with ?currency=)',
  }),
};

export const PnlReport = Type.Object({
  ...Common,
  current: RevenueSummary,
  prior: Type.Intersect([RevenueSummary, Type.Object({ periodLabel: Type.String() })]),
  monthly: Monthly,
});

export const CashflowReport = Type.Object({ ...Common, current: BalanceSummary, monthly: Monthly });

export const ReportQuery = Type.Object(
  {
    period: Type.Optional(
      Type.String({ maxLength: 40, description: `Default this-month. One of ${PERIOD_FORMS}` }),
    ),
    currency: Type.Optional(
      Type.String({ pattern: '^[A-Za-z]{3}$', description: "Default: the provider's most used currency" }),
    ),
  },
  { additionalProperties: false },
);
