import { ANALYTICS_GRAINS, USAGE_GROUPINGS } from '@mcp-meter/contracts/usage';
import { Type } from '@sinclair/typebox';
import { stringEnum, Timestamp } from '../../http/schemas';
import { CANCELLATION_FEEDBACK } from '../purchases/cancellation';

const range = {
  from: Type.Optional(
    Type.String({ format: 'date-time', description: 'Inclusive; default 30 days before to' }),
  ),
  to: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'Exclusive; default the end of the current quarter hour (whole 15-minute slots)',
    }),
  ),
  meterRef: Type.Optional(
    Type.String({ minLength: 1, maxLength: 100, description: 'The meter (default requests: tool calls)' }),
  ),
  customerRef: Type.Optional(
    Type.String({ minLength: 1, maxLength: 255, description: 'Only this customer (id or externalRef)' }),
  ),
};

export const UsageAnalyticsQuery = Type.Object(
  {
    ...range,
    grain: Type.Optional(
      Type.String({ maxLength: 20, description: `${ANALYTICS_GRAINS.join(', ')} (default day)` }),
    ),
    timeZone: Type.Optional(
      Type.String({ maxLength: 64, description: 'IANA time zone the buckets follow (default UTC)' }),
    ),
    groupBy: Type.Optional(
      Type.String({
        maxLength: 20,
        description: `${USAGE_GROUPINGS.join(', ')} (default none). By environment: each environment the caller may read (an API key its own, a console session every enabled one), side by side; not with customerRef`,
      }),
    ),
    limit: Type.Integer({
      minimum: 1,
      maximum: 100,
      default: 10,
      description: 'Groups shown, the most calls first; the rest are summed in `other`',
    }),
  },
  { additionalProperties: false },
);

const Figures = {
  calls: Type.Array(Type.Integer(), { description: 'Records (calls on the requests meter) per bucket' }),
  units: Type.Array(Type.String(), {
    description: "The meter's values summed per bucket, exactly (decimal)",
  }),
  errors: Type.Array(Type.Integer(), { description: 'Calls the tool, the origin or the proxy failed' }),
};

export const UsageAnalytics = Type.Object({
  from: Timestamp,
  to: Timestamp,
  grain: Type.String(),
  timeZone: Type.String(),
  groupBy: Type.String(),
  meterRef: Type.String(),
  buckets: Type.Array(
    Type.Object({
      start: Timestamp,
      label: Type.String({ description: 'The local start: YYYY-MM-DD, or YYYY-MM-DDTHH:MM for hours' }),
    }),
  ),
  series: Type.Array(
    Type.Object({
      key: Type.String({ description: "The group's value ('' when the call has none, and for none)" }),
      name: Type.Union([Type.String(), Type.Null()], {
        description:
          "By product or plan, its name (null when the key names none of this environment's); null for other groupings",
      }),
      totalCalls: Type.Integer(),
      ...Figures,
    }),
  ),
  other: Type.Union(
    [Type.Object({ groups: Type.Integer(), totalCalls: Type.Integer(), ...Figures }), Type.Null()],
    {
      description: 'The groups past `limit`, summed; null when none were left out',
    },
  ),
  totals: Type.Object({ calls: Type.Integer(), units: Type.String(), errors: Type.Integer() }),
});

export const ToolAnalyticsQuery = Type.Object(range, { additionalProperties: false });

export const ToolAnalytics = Type.Object({
  from: Timestamp,
  to: Timestamp,
  data: Type.Array(
    Type.Object({
      tool: Type.String(),
      server: Type.String({ description: 'The MCP server (mcp_…) the calls went to' }),
      calls: Type.Integer(),
      errors: Type.Integer(),
      errorRate: Type.Number({ description: 'errors / calls' }),
      latencyMs: Type.Union(
        [Type.Object({ p50: Type.Number(), p95: Type.Number(), p99: Type.Number() }), Type.Null()],
        {
          description:
            'Origin latency percentiles in ms over the calls that reached it (nearest rank, each within 1 % of the exact value); null when none did',
        },
      ),
    }),
  ),
});

const Month = Type.String({ pattern: '^\\d{4}-\\d{2}$', description: 'A month, YYYY-MM' });

export const RevenueAnalyticsQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({ maxLength: 7, description: 'First month, YYYY-MM (default eleven months before to)' }),
    ),
    to: Type.Optional(Type.String({ maxLength: 7, description: 'Last month, YYYY-MM (default this month)' })),
    timeZone: Type.Optional(
      Type.String({ maxLength: 64, description: 'IANA time zone the months follow (default UTC)' }),
    ),
    currency: Type.Optional(
      Type.String({
        pattern: '^[A-Za-z]{3}$',
        description: "ISO 4217 code (default the provider's most used)",
      }),
    ),
  },
  { additionalProperties: false },
);

const Amount = (description: string) => Type.Integer({ description: `${description}, in minor units` });
const Ratio = (description: string) =>
  Type.Union([Type.Integer(), Type.Null()], {
    description: `${description}, in basis points; null when undefined`,
  });

export const RevenueAnalytics = Type.Object({
  from: Month,
  to: Month,
  timeZone: Type.String(),
  currency: Type.String(),
  otherCurrencies: Type.Array(Type.String(), {
    description: 'Currencies the ledger also holds in these months (report each with currency=)',
  }),
  asOf: Timestamp,
  months: Type.Array(
    Type.Object({
      month: Month,
      start: Timestamp,
      end: Timestamp,
      mrr: Type.Object(
        {
          start: Amount('MRR when the month began'),
          end: Amount('MRR when it ended (now, for the running month)'),
          new: Amount('From customers who never paid a recurring fee before'),
          expansion: Amount('Increases of customers already paying'),
          contraction: Amount('Decreases of customers still paying'),
          churn: Amount('Lost with customers who stopped paying'),
          reactivation: Amount('From customers who had paid before and came back'),
          arpu: Type.Union([Type.Integer(), Type.Null()], {
            description: 'MRR per paying customer at the end, half to even; null with none',
          }),
        },
        {
          description:
            'Monthly recurring revenue: paid recurring fees in force, normalised to a month; end = start + new + expansion − contraction − churn + reactivation',
        },
      ),
      customers: Type.Object({
        active: Type.Integer({
          description: 'With a purchase in force at the end (free plans and trials included)',
        }),
        paying: Type.Integer({ description: 'With MRR at the end' }),
        new: Type.Integer(),
        reactivated: Type.Integer(),
        churned: Type.Integer(),
      }),
      churnRate: Type.Object({
        customersBasisPoints: Ratio('Churned ÷ paying customers at the start'),
        mrrBasisPoints: Ratio('Churned MRR ÷ MRR at the start'),
      }),
      revenue: Type.Object(
        {
          recurring: Amount('Recurring fees and plan-switch prorations received'),
          usage: Amount('Usage charges received'),
          oneTime: Amount('Setup fees and one-time plans received'),
          credits: Amount('Credit packs sold'),
          other: Amount('Payments no invoice line names'),
          gross: Amount('All payments received (the P&L gross revenue)'),
          refunds: Amount('Refunded'),
          disputes: Amount('Lost to disputes, net of reversals'),
          platformFees: Amount("The platform's fees"),
          net: Amount('gross − refunds − disputes − platform fees (the P&L net revenue)'),
          customersPaying: Type.Integer({ description: 'Customers who paid something this month' }),
          perPayingCustomer: Type.Union([Type.Integer(), Type.Null()], {
            description: 'Net revenue per customer who paid, half to even; null with none',
          }),
        },
        { description: 'Money that moved in the month, from the ledger' },
      ),
    }),
  ),
});

export const FunnelQuery = ToolAnalyticsQuery;

const Stage = {
  shown: Type.Integer({ description: 'Calls the paywall answered' }),
  offered: Type.Integer({
    description: 'Checkout sessions offered (concurrent paywalls of a customer share one)',
  }),
  opened: Type.Integer({ description: 'Of those, opened (or paid, which opens)' }),
  paid: Type.Integer({ description: 'Of those, paid' }),
  openRateBasisPoints: Type.Union([Type.Integer(), Type.Null()], {
    description: 'opened ÷ offered, half to even; null with none offered',
  }),
  conversionBasisPoints: Type.Union([Type.Integer(), Type.Null()], {
    description: 'paid ÷ offered, half to even; null with none offered',
  }),
};
const TimeToPay = Type.Union(
  [
    Type.Object({
      paid: Type.Integer(),
      medianSeconds: Type.Number(),
      p90Seconds: Type.Number(),
    }),
    Type.Null(),
  ],
  { description: 'From the paywall first shown to payment, nearest rank; null when none paid' },
);

export const PaywallFunnel = Type.Object({
  from: Timestamp,
  to: Timestamp,
  totals: Type.Object({ ...Stage, timeToPay: TimeToPay }),
  byForm: Type.Array(
    Type.Object({
      era: Type.String({
        description: "modern (MCP 2026-07-28) or legacy (up to 2025-11-25); '' before forms were recorded",
      }),
      form: Type.String({
        description:
          "url_elicitation, error_32042 (the -32042 error) or text_link; '' before forms were recorded",
      }),
      ...Stage,
    }),
  ),
  byPlan: Type.Array(
    Type.Object({
      productId: Type.String({ description: "The MCP server's product" }),
      productName: Type.Union([Type.String(), Type.Null()]),
      planId: Type.Union([Type.String(), Type.Null()], {
        description: 'The plan the checkout sold; null for a credit pack, or when none was offered',
      }),
      planName: Type.Union([Type.String(), Type.Null()]),
      kind: Type.Union([Type.String(), Type.Null()], {
        description: 'plan or topup; null when none was offered',
      }),
      ...Stage,
      timeToPay: TimeToPay,
    }),
  ),
});

export const CancellationAnalyticsQuery = Type.Object(
  {
    from: Type.Optional(
      Type.String({ format: 'date-time', description: 'Inclusive; default 30 days before to' }),
    ),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'Exclusive; default now' })),
    productRef: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: 'Only this product’s purchases (id or reference)',
      }),
    ),
  },
  { additionalProperties: false },
);

const Feedback = Type.Union([stringEnum(CANCELLATION_FEEDBACK), Type.Null()], {
  description: "The customer's reason, in Stripe's choices; null where they gave none",
});

export const CancellationAnalytics = Type.Object({
  from: Timestamp,
  to: Timestamp,
  productId: Type.Union([Type.String(), Type.Null()]),
  total: Type.Integer({ description: 'Cancellations asked for in the window, not reactivated since' }),
  requested: Type.Integer({ description: 'Asked for through the API or the portal' }),
  paymentFailed: Type.Integer({ description: 'Made by dunning giving up on the card' }),
  retentionSaves: Type.Integer({
    description:
      'Retention offers taken in the customer portal instead of cancelling, in the window (each taking once)',
  }),
  byFeedback: Type.Array(
    Type.Object({
      feedback: Feedback,
      count: Type.Integer(),
      shareBasisPoints: Type.Union([Type.Integer(), Type.Null()], {
        description: 'count ÷ requested in basis points, half to even; null with none requested',
      }),
    }),
    { description: 'The requested ones by feedback, most first (every choice, and null)' },
  ),
  comments: Type.Array(
    Type.Object({
      purchaseRef: Type.String(),
      customerRef: Type.String(),
      productId: Type.String(),
      feedback: Feedback,
      comment: Type.String(),
      requestedAt: Timestamp,
    }),
    { description: 'The newest 20 comments left when cancelling, newest first' },
  ),
});
