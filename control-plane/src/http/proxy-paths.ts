/**
 * The MCP proxy's endpoints in the API's OpenAPI document: they are served by the proxy (its own
 * process and port, `PROXY_PUBLIC_URL`), not by this Fastify app, so they are written here and
 * added to the document as it is built. What they do is docs/proxy.md.
 */

/** Their operation ids, stable like the API's (operation-ids.ts). */
export const PROXY_OPERATION_IDS = [
  'callMcpServer',
  'openMcpStream',
  'endMcpSession',
  'getProtectedResourceMetadata',
];

const subdomain = {
  name: 'subdomain',
  in: 'path',
  required: true,
  description: "The MCP server's subdomain (its mcpProxyUrl ends with it)",
  schema: { type: 'string', pattern: '^[a-z0-9-]{1,63}$' },
};

const jsonRpc = {
  description: 'A JSON-RPC 2.0 message of the Model Context Protocol (streamable HTTP transport)',
  content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
};

const refused = (description: string) => ({
  description,
  content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
});

const mcpResponses = {
  '200': {
    description:
      'The origin’s answer, as it sent it: a JSON-RPC response (application/json) or an event stream (text/event-stream). A refused tool call (over the plan’s limit, no plan) is a JSON-RPC result or error carrying the checkout link.',
    content: {
      'application/json': { schema: { type: 'object', additionalProperties: true } },
      'text/event-stream': { schema: { type: 'string' } },
    },
  },
  '400': refused('A message the proxy cannot read, or headers that contradict the body (-32020)'),
  '401': refused('No valid customer access token: WWW-Authenticate names the resource metadata URL'),
  '403': refused('A browser Origin the MCP server does not allow'),
  '404': refused('No active MCP server at this subdomain in the token’s environment'),
  '503': refused('The proxy is stopping (Retry-After: 1), or cannot reach what it needs'),
};

/** The path items, with the proxy as their server. */
export function proxyPaths(proxyUrl: string): Record<string, unknown> {
  const servers = [{ url: proxyUrl, description: 'The MCP proxy (PROXY_PUBLIC_URL)' }];
  const security = [{ customerToken: [] }];
  return {
    '/mcp/{subdomain}': {
      servers,
      parameters: [subdomain],
      post: {
        operationId: 'callMcpServer',
        tags: ['mcp proxy'],
        summary: 'Send an MCP message to the MCP server behind the proxy (tool calls are gated and metered)',
        description:
          'Streamable HTTP as MCP clients speak it, in both protocol eras (2025-03-26 to 2025-11-25 with sessions, and 2026-07-28). Each tools/call is checked against the customer’s plan for the server’s product and recorded once; everything else passes through, byte for byte. See docs/proxy.md.',
        security,
        requestBody: { required: true, ...jsonRpc },
        responses: mcpResponses,
      },
      get: {
        operationId: 'openMcpStream',
        tags: ['mcp proxy'],
        summary: 'Open the server-to-client event stream of an MCP session',
        description:
          'The standalone GET stream of the streamable HTTP transport (Accept: text/event-stream), relayed from the origin; ended at once when the proxy stops, so the client reconnects elsewhere.',
        security,
        responses: mcpResponses,
      },
      delete: {
        operationId: 'endMcpSession',
        tags: ['mcp proxy'],
        summary: 'End an MCP session (Mcp-Session-Id)',
        description: 'Passed to the origin, which ends the session; nothing is metered.',
        security,
        responses: mcpResponses,
      },
    },
    '/.well-known/oauth-protected-resource/mcp/{subdomain}': {
      servers,
      parameters: [subdomain],
      get: {
        operationId: 'getProtectedResourceMetadata',
        tags: ['mcp proxy'],
        summary: 'The MCP server’s protected resource metadata (RFC 9728): where customers sign in',
        description:
          'What an MCP client reads after the proxy’s 401: the resource (the mcpProxyUrl) and its authorization server (this API). Open to anyone.',
        security: [],
        responses: {
          '200': {
            description: 'The metadata document',
            content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
          },
          '404': refused('No MCP server at this subdomain'),
        },
      },
    },
  };
}
