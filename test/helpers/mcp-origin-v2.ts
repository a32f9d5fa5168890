import { createServer, type Server } from 'node:http';
import { acceptedContent, createMcpHandler, inputRequired, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

export interface ModernOrigin {
  url: string;
  /** Tool calls the origin ran, by tool. */
  calls: Map<string, number>;
  close(): Promise<void>;
}

/**
 * An MCP origin on the TypeScript SDK v2 (`createMcpHandler`): it speaks MCP 2026-07-28
 * (stateless, `server/discover`, `_meta` per request) and serves 2025 clients statelessly.
 * Mounted on node:http through the handler's web-standard `fetch` face.
 */
export async function startModernOrigin(): Promise<ModernOrigin> {
  const calls = new Map<string, number>();
  const count = (tool: string) => calls.set(tool, (calls.get(tool) ?? 0) + 1);
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'modern-origin', version: '1.0.0' });
    server.registerTool(
      'add',
      { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } },
      async ({ a, b }) => {
        count('add');
        return { content: [{ type: 'text', text: String(a + b) }] };
      },
    );
    // A multi-round tool (MCP 2026-07-28): the first round asks the user to confirm, with a
    // requestState the retry must bring back; the retry with the answer completes the call.
    const confirmation = z.object({ confirm: z.boolean() });
    server.registerTool(
      'deploy',
      { description: 'Deploys after a confirmation', inputSchema: { env: z.string() } },
      async ({ env }, ctx) => {
        count('deploy');
        const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmation);
        if (answer === undefined) {
          return inputRequired({
            inputRequests: {
              confirm: inputRequired.elicit({ message: `Deploy to ${env}?`, requestedSchema: confirmation }),
            },
            requestState: `deploy:${env}`,
          });
        }
        return { content: [{ type: 'text', text: answer.confirm ? `deployed to ${env}` : 'not deployed' }] };
      },
    );
    return server;
  });
  const http: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
    }
    const response = await handler.fetch(
      new Request(`http://127.0.0.1${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers,
        ...(body.length > 0 && req.method !== 'GET' && req.method !== 'HEAD' ? { body } : {}),
      }),
    );
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body !== null) for await (const chunk of response.body) res.write(chunk);
    res.end();
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const address = http.address();
  if (address === null || typeof address === 'string') throw new Error('origin did not listen');
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    calls,
    async close() {
      await handler.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
