import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve(text === '' ? undefined : JSON.parse(text));
      } catch (error) {
        reject(error);
      }
    });
  });
}

function buildServer(calls: Map<string, number>, withEcho: boolean, standaloneRequests = false): McpServer {
  const server = new McpServer(
    { name: 'test-origin', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  const count = (tool: string) => calls.set(tool, (calls.get(tool) ?? 0) + 1);
  server.registerTool(
    'add',
    { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => {
      count('add');
      return { content: [{ type: 'text', text: String(a + b) }] };
    },
  );
  server.registerTool(
    'countdown',
    { description: 'Counts down with progress notifications', inputSchema: { from: z.number() } },
    async ({ from }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= from; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        if (token !== undefined)
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i, total: from },
          });
      }
      return { content: [{ type: 'text', text: 'liftoff' }] };
    },
  );
  server.registerTool(
    'announce',
    { description: 'Announces a tool list change', inputSchema: {} },
    async () => {
      // Not tied to the request: travels on the session's standalone GET stream.
      server.sendToolListChanged();
      return { content: [{ type: 'text', text: 'announced' }] };
    },
  );
  if (withEcho) {
    // A typed tool: clients check its structuredContent against this outputSchema.
    server.registerTool(
      'report',
      { description: 'A typed report', inputSchema: {}, outputSchema: { total: z.number() } },
      async () => {
        count('report');
        return { content: [{ type: 'text', text: '{"total":3}' }], structuredContent: { total: 3 } };
      },
    );
    server.registerTool(
      'echo',
      { description: 'Says it back', inputSchema: { text: z.string() } },
      async ({ text }) => {
        count('echo');
        return { content: [{ type: 'text', text }] };
      },
    );
  }
  if (standaloneRequests) {
    // As the SDK v1 reference server (the conformance repo's everything-server) does: elicitation
    // and sampling sent from inside a tool with no related request id, so they travel on the
    // session's standalone GET stream; without that stream the server drops them.
    server.registerTool('ask', { description: 'Asks the user and the model', inputSchema: {} }, async () => {
      const elicited = await server.server.elicitInput({
        message: 'What is your name?',
        requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      });
      const sampled = await server.server.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }],
        maxTokens: 10,
      });
      count('ask');
      const said = sampled.content.type === 'text' ? sampled.content.text : '';
      return { content: [{ type: 'text', text: `${String(elicited.content?.name)} / ${said}` }] };
    });
  }
  server.registerTool('fail', { description: 'Always fails', inputSchema: {} }, async () => ({
    content: [{ type: 'text', text: 'nope' }],
    isError: true,
  }));
  return server;
}

export interface McpOrigin {
  url: string;
  /** Tool executions by tool name: what the origin really did. */
  calls: Map<string, number>;
  /** The value of `requireHeader` seen on each request, or undefined when absent. */
  seenAuth: Array<string | undefined>;
  close(): Promise<void>;
}

/**
 * A real MCP server built with the official SDK, stateful (Mcp-Session-Id), on a free loopback
 * port. With `requireHeader`, requests without that header and value get 401 (an origin API key).
 */
export async function startMcpOrigin(
  options: {
    requireHeader?: [string, string];
    echo?: boolean;
    json?: boolean;
    stateless?: boolean;
    /** A tool `ask` that elicits and samples on the standalone GET stream. */
    standaloneRequests?: boolean;
    /** Listen on this port (default: a free one). */
    port?: number;
    /**
     * Close every idle kept-alive connection this often, without saying so (no Keep-Alive
     * timeout in the answers), as servers with a silent idle timeout and load balancers do.
     */
    closeIdleEveryMs?: number;
  } = {},
): Promise<McpOrigin> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const calls = new Map<string, number>();
  const seenAuth: Array<string | undefined> = [];
  const http: Server = createServer(async (req, res) => {
    try {
      if (options.requireHeader !== undefined) {
        const [name, value] = options.requireHeader;
        const given = req.headers[name.toLowerCase()];
        seenAuth.push(typeof given === 'string' ? given : undefined);
        if (given !== value) {
          res.writeHead(401, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: 'origin API key required' }));
          return;
        }
      }
      const sessionId = req.headers['mcp-session-id'];
      const body = req.method === 'POST' ? await readJson(req) : undefined;
      if (options.stateless === true) {
        // No sessions: every request gets its own server and transport (the SDK's stateless mode).
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        res.on('close', () => void transport.close());
        await buildServer(calls, options.echo === true).connect(transport);
        await transport.handleRequest(req, res, body);
        return;
      }
      let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
      if (transport === undefined && req.method === 'POST' && isInitializeRequest(body)) {
        const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: options.json === true,
          onsessioninitialized: (id: string): void => {
            transports.set(id, created);
          },
        });
        created.onclose = () => created.sessionId !== undefined && transports.delete(created.sessionId);
        await buildServer(calls, options.echo === true, options.standaloneRequests === true).connect(created);
        transport = created;
      }
      if (transport === undefined) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'No valid session' } }),
        );
        return;
      }
      await transport.handleRequest(req, res, body);
    } catch (error) {
      res.writeHead(500);
      res.end(String(error));
    }
  });
  let closer: NodeJS.Timeout | undefined;
  if (options.closeIdleEveryMs !== undefined) {
    http.keepAliveTimeout = 0;
    closer = setInterval(() => http.closeIdleConnections(), options.closeIdleEveryMs);
  }
  await new Promise<void>((resolve) => http.listen(options.port ?? 0, '127.0.0.1', resolve));
  const address = http.address();
  const port = address !== null && typeof address === 'object' ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    seenAuth,
    close: async () => {
      clearInterval(closer);
      for (const transport of transports.values()) await transport.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
