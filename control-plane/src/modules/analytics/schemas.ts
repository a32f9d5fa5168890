import { ANALYTICS_GRAINS, ANALYTICS_GROUPS } from '@mcp-meter/contracts/usage';
import { Type } from '@sinclair/typebox';
import { Timestamp } from '../../http/schemas';

const range = {
  from: Type.Optional(
    Type.String({ format: 'date-time', description: 'Inclusive; default 30 days before to' }),
  ),
  to: Type.Optional(Type.String({ format: 'date-time', description: 'Exclusive; default now' })),
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
      Type.String({ maxLength: 20, description: `${ANALYTICS_GROUPS.join(', ')} (default none)` }),
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
            'Origin latency percentiles in ms over the calls that reached it (exact); null when none did',
        },
      ),
    }),
  ),
});
