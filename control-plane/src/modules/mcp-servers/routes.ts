import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { McpServer, McpServerCreate, McpServerHealth, McpServerParams, McpServerUpdate } from './schemas';
import type { McpServerService } from './service';

export function mcpServerRoutes(servers: McpServerService) {
  return async (app: App) => {
    const tags = ['mcp-servers'];
    app.post(
      '/v1/ui/mcp-servers',
      {
        schema: {
          tags,
          summary: 'Register an MCP server behind the proxy',
          body: McpServerCreate,
          response: { 201: McpServer, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(201).send(await servers.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/ui/mcp-servers',
      {
        schema: {
          tags,
          summary: 'List MCP servers',
          response: { 200: Type.Array(McpServer), ...errorResponses },
        },
      },
      async (request) => servers.list(authOf(request)),
    );
    app.get(
      '/v1/ui/mcp-servers/:id',
      {
        schema: {
          tags,
          summary: 'Get an MCP server by id or subdomain',
          params: McpServerParams,
          response: { 200: McpServer, ...errorResponses },
        },
      },
      async (request) => servers.get(authOf(request), request.params.id),
    );
    app.patch(
      '/v1/ui/mcp-servers/:id',
      {
        schema: {
          tags,
          summary: 'Change an MCP server (origin, product, default plan, tools, status)',
          params: McpServerParams,
          body: McpServerUpdate,
          response: { 200: McpServer, ...errorResponses },
        },
      },
      async (request) => servers.update(authOf(request), request.params.id, request.body),
    );
    app.delete(
      '/v1/ui/mcp-servers/:id',
      {
        schema: {
          tags,
          summary: 'Remove an MCP server from the proxy',
          params: McpServerParams,
          response: {
            200: Type.Object({ id: Type.String(), deleted: Type.Literal(true) }),
            ...errorResponses,
          },
        },
      },
      async (request) => servers.delete(authOf(request), request.params.id),
    );
    app.post(
      '/v1/ui/mcp-servers/:id/tools/import',
      {
        schema: {
          tags,
          summary: "Import the tool list from the origin's tools/list, keeping each tool's plan settings",
          params: McpServerParams,
          response: { 200: McpServer, 502: Problem, ...errorResponses },
        },
      },
      async (request) => servers.importTools(authOf(request), request.params.id),
    );
    app.get(
      '/v1/ui/mcp-servers/:id/health',
      {
        schema: {
          tags,
          summary: 'Check the origin now: initialize and tools/list, timed, through the SSRF guard',
          params: McpServerParams,
          response: { 200: McpServerHealth, ...errorResponses },
        },
      },
      async (request) => servers.health(authOf(request), request.params.id),
    );
  };
}
