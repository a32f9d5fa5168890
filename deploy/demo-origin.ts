import { createServer, type IncomingMessage, type Server } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

/**
 * The example MCP server `npm run demo` puts behind the proxy: a made-up weather service with two
 * tools, on the official MCP SDK, stateless (each request its own server), listening on loopback.
 */
function weatherServer(): McpServer {
  const server = new McpServer({ name: 'demo-weather', version: '1.0.0' });
  server.registerTool(
    'forecast',
    {
      description: "Tomorrow's weather for a city (made up, always the same for a city)",
      inputSchema: { city: z.string().min(1).max(100) },
    },
    async ({ city }) => {
      const seed = [...city].reduce((sum, c) => sum + (c.codePointAt(0) ?? 0), 0);
      const sky = ['sunny', 'cloudy', 'rainy', 'windy'][seed % 4];
      return { content: [{ type: 'text', text: `${city}: ${sky}, ${10 + (seed % 20)} °C` }] };
    },
  );
  server.registerTool(
    'add',
    { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }),
  );
  return server;
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

/** Starts the example origin on 127.0.0.1 (a free port): its MCP URL, and a close. */
export async function startDemoOrigin(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(async (request, response) => {
    try {
      const body = request.method === 'POST' ? await readJson(request) : undefined;
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      response.on('close', () => void transport.close());
      await weatherServer().connect(transport);
      await transport.handleRequest(request, response, body);
    } catch {
      if (!response.headersSent) response.writeHead(400, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }),
      );
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
