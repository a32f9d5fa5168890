import { Type } from '@sinclair/typebox';
import { nullable, stringEnum } from '../../http/schemas';

const WebUrl = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2048 });

const ToolInput = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 128 }),
    planIds: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, uniqueItems: true }),
    ),
    noPlan: Type.Optional(Type.Boolean({ description: 'Free for everyone' })),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    isVirtual: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const mutable = {
  url: Type.String({
    format: 'uri',
    pattern: '^https?://',
    maxLength: 2048,
    description: 'Origin URL of the MCP server (http or https)',
  }),
  productId: Type.String({ minLength: 1, maxLength: 100, description: 'Product id or reference' }),
  defaultPlanId: Type.String({
    minLength: 1,
    maxLength: 100,
    description: 'A free plan of the linked product',
  }),
  avatarUrl: WebUrl,
  status: stringEnum(['active', 'inactive', 'suspended'] as const),
  tools: Type.Array(ToolInput, { maxItems: 500 }),
  authHeaderName: Type.String({
    minLength: 1,
    maxLength: 100,
    pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$",
    description: 'Header that carries the origin API key (default Authorization)',
  }),
  allowedOrigins: Type.Array(Type.String({ minLength: 1, maxLength: 300 }), {
    maxItems: 50,
    uniqueItems: true,
    description:
      'Web origins (scheme://host[:port], e.g. https://app.example) whose pages may call the server through the proxy; others get 403. Requests without an Origin header are not affected. Default: none',
  }),
  authApiKey: Type.String({
    minLength: 1,
    maxLength: 4096,
    pattern: '^[\\x20-\\x7e]+$',
    description:
      'Origin API key, stored encrypted and never returned. With Authorization, a key without a space is sent as "Bearer <key>"',
  }),
};

export const McpServerCreate = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 63,
      description: 'Domain slug; the subdomain is derived from it',
    }),
    url: mutable.url,
    productId: Type.Optional(mutable.productId),
    defaultPlanId: Type.Optional(mutable.defaultPlanId),
    avatarUrl: Type.Optional(mutable.avatarUrl),
    status: Type.Optional(mutable.status),
    tools: Type.Optional(mutable.tools),
    authHeaderName: Type.Optional(mutable.authHeaderName),
    authApiKey: Type.Optional(mutable.authApiKey),
    allowedOrigins: Type.Optional(mutable.allowedOrigins),
  },
  { additionalProperties: false },
);

export const McpServerUpdate = Type.Object(
  {
    url: Type.Optional(mutable.url),
    productId: nullable(mutable.productId),
    defaultPlanId: nullable(mutable.defaultPlanId),
    avatarUrl: nullable(mutable.avatarUrl),
    status: Type.Optional(mutable.status),
    tools: Type.Optional(mutable.tools),
    authHeaderName: nullable(mutable.authHeaderName),
    authApiKey: nullable(mutable.authApiKey),
    allowedOrigins: Type.Optional(mutable.allowedOrigins),
  },
  { additionalProperties: false, minProperties: 1 },
);

const Tool = Type.Object({
  name: Type.String(),
  planIds: Type.Array(Type.String()),
  noPlan: Type.Boolean(),
  description: Type.String(),
  isVirtual: Type.Boolean(),
});
export type Tool = import('@sinclair/typebox').Static<typeof Tool>;

/** An MCP server as the API shows it: its origin, the product that gates it, and where clients reach it. */
export const McpServer = Type.Object({
  id: Type.String(),
  reference: Type.String(),
  name: Type.String(),
  subdomain: Type.String(),
  url: Type.String(),
  providerId: Type.String(),
  mcpProxyUrl: Type.String(),
  avatarUrl: Type.Union([Type.String(), Type.Null()]),
  productId: Type.Union([Type.String(), Type.Null()]),
  defaultPlanId: Type.Union([Type.String(), Type.Null()]),
  status: stringEnum(['active', 'inactive', 'suspended'] as const),
  tools: Type.Array(Tool),
  authHeaderName: Type.Union([Type.String(), Type.Null()]),
  hasAuthApiKey: Type.Boolean(),
  allowedOrigins: Type.Array(Type.String(), {
    description: 'Web origins whose pages may call through the proxy (CORS); others get 403',
  }),
  totalTransactions: Type.Optional(
    Type.Integer({ description: 'Tool calls through the proxy (absent while usage storage is unreachable)' }),
  ),
  balance: Type.Integer({
    description: "Net collected on the product's purchases (payments less refunds), minor units",
  }),
  currency: Type.String(),
});

export const McpServerParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });

/** One look at the origin, as a client would take it: `initialize`, then `tools/list`. */
export const McpServerHealth = Type.Object({
  healthy: Type.Boolean({ description: 'The origin answered initialize and tools/list' }),
  checkedAt: Type.String({ format: 'date-time' }),
  latencyMs: Type.Integer({ minimum: 0, description: 'From the first connection to the tool list, in ms' }),
  protocolVersion: Type.Union([Type.String(), Type.Null()], {
    description: 'The MCP protocol version the origin agreed to',
  }),
  serverName: Type.Union([Type.String(), Type.Null()]),
  serverVersion: Type.Union([Type.String(), Type.Null()]),
  toolCount: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  problem: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the origin is unhealthy, without quoting its answer',
  }),
});
