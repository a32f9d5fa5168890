import type { OutboundGuard } from '@mcp-meter/contracts/kit';
// The MCP client is loaded on the first tool import, not at start (a fifth of a second of it).
import { Agent, fetch as undiciFetch } from 'undici';
import { DomainError } from '../../errors';

export interface OriginTool {
  name: string;
  description?: string | undefined;
}

/**
 * Why reading the origin failed, in words that never quote the origin's answer: an import is a
 * request the provider makes us send, and echoing the body would make it a way to read any URL.
 */
function failureOf(error: unknown): string {
  // The SDK's HTTP errors carry the status as `code` and the origin's body in the message.
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'number' && code >= 300 && code <= 599) return `the origin answered HTTP ${code}`;
  const text = error instanceof Error ? `${error.message} ${String(error.cause ?? '')}` : String(error);
  if (/internal address|port \d+ is not allowed/.test(text))
    return 'the origin URL is not allowed (internal address)';
  if (/redirect/i.test(text)) return 'the origin answered with a redirect, which is not followed';
  if (/timed? ?out|timeout/i.test(text)) return 'the origin did not answer in time';
  if (/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET|fetch failed|other side closed/i.test(text))
    return 'the origin could not be reached';
  return 'the origin did not answer as an MCP server';
}

/** What one look at the origin found: whether it answers MCP, how fast, and as what. */
export interface OriginHealth {
  healthy: boolean;
  latencyMs: number;
  protocolVersion: string | null;
  serverName: string | null;
  serverVersion: string | null;
  toolCount: number | null;
  problem: string | null;
}

type McpClient = import('@modelcontextprotocol/sdk/client/index.js').Client;

/**
 * Opens an MCP client on the origin (streamable HTTP, with the origin's API key when one is set),
 * runs `use` and closes it. Connections go through the SSRF guard (the address dialled is the one
 * checked) and redirects are refused; a failure is an `origin_unreachable` error.
 */
async function withOrigin<T>(
  url: string,
  auth: { header: string; value: string } | null,
  guard: OutboundGuard,
  timeoutMs: number,
  use: (client: McpClient) => Promise<T>,
): Promise<T> {
  const refused = guard.literalProblem(new URL(url));
  if (refused !== undefined) throw new DomainError('origin_unreachable', refused);
  const dispatcher = new Agent({ connect: { timeout: timeoutMs, lookup: guard.lookup } as never });
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]);
  const client = new Client({ name: 'mcp-meter-origin', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: auth === null ? {} : { [auth.header]: auth.value } },
    fetch: ((input: string | URL, init?: RequestInit) =>
      undiciFetch(input, { ...(init as object), dispatcher, redirect: 'error' })) as never,
  });
  try {
    await client.connect(transport, { timeout: timeoutMs });
    return await use(client);
  } catch (error) {
    throw new DomainError('origin_unreachable', failureOf(error));
  } finally {
    await client.close().catch(() => undefined);
    await dispatcher.close().catch(() => undefined);
  }
}

async function allTools(client: McpClient, timeoutMs: number): Promise<OriginTool[]> {
  const tools: OriginTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
    tools.push(...result.tools.map((t) => ({ name: t.name, description: t.description })));
    cursor = result.nextCursor;
    if (cursor === undefined) break;
  }
  return tools;
}

/** Every tool the origin lists (every page of `tools/list`). */
export async function listOriginTools(
  url: string,
  auth: { header: string; value: string } | null,
  guard: OutboundGuard,
  timeoutMs = 15_000,
): Promise<OriginTool[]> {
  try {
    return await withOrigin(url, auth, guard, timeoutMs, (client) => allTools(client, timeoutMs));
  } catch (error) {
    if (error instanceof DomainError)
      throw new DomainError('origin_unreachable', `Could not read tools/list: ${error.message}`);
    throw error;
  }
}

/**
 * A health check as a client would see the origin: `initialize`, then `tools/list`, timed end to
 * end on a monotonic timer. A failure is an answer (healthy false, with why), not an error.
 */
export async function checkOrigin(
  url: string,
  auth: { header: string; value: string } | null,
  guard: OutboundGuard,
  timeoutMs = 10_000,
): Promise<OriginHealth> {
  const started = performance.now();
  const elapsed = () => Math.max(0, Math.round(performance.now() - started));
  try {
    return await withOrigin(url, auth, guard, timeoutMs, async (client) => {
      const tools = await allTools(client, timeoutMs);
      const info = client.getServerVersion();
      return {
        healthy: true,
        latencyMs: elapsed(),
        protocolVersion:
          (client.transport as { protocolVersion?: string } | undefined)?.protocolVersion ?? null,
        serverName: info?.name ?? null,
        serverVersion: info?.version ?? null,
        toolCount: tools.length,
        problem: null,
      };
    });
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return {
      healthy: false,
      latencyMs: elapsed(),
      protocolVersion: null,
      serverName: null,
      serverVersion: null,
      toolCount: null,
      problem: error.message,
    };
  }
}
