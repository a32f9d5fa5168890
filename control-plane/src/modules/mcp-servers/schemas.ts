import { Type } from '@sinclair/typebox';
import { stringEnum } from '../../http/schemas';

export const McpServerCreate = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 63,
      description: 'Domain slug; the subdomain is derived from it',
    }),
    url: Type.String({
      format: 'uri',
      maxLength: 2048,
      description: 'Origin URL of the MCP server (http or https)',
    }),
    productId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'Product id or reference' }),
    ),
  },
  { additionalProperties: false },
);

const Tool = Type.Object({
  name: Type.String(),
  planIds: Type.Array(Type.String()),
  noPlan: Type.Boolean(),
  description: Type.String(),
  isVirtual: Type.Boolean(),
});

/** Spec 2.3. */
export const McpServer = Type.Object({
  id: Type.String(),
  reference: Type.String(),
  name: Type.String(),
  subdomain: Type.String(),
  url: Type.String(),
  providerId: Type.String(),
  mcpProxyUrl: Type.String(),
  productId: Type.Union([Type.String(), Type.Null()]),
  status: stringEnum(['active', 'inactive', 'suspended'] as const),
  tools: Type.Array(Tool),
  hasAuthApiKey: Type.Boolean(),
});

export const McpServerParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
