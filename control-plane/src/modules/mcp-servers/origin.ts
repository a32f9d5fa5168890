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

/**
 * Every tool the origin lists, over MCP streamable HTTP, with the origin's API key when one is
 * set. Connections go through the SSRF guard (the address dialled is the one checked) and
 * redirects are refused.
 */
export async function listOriginTools(
  url: string,
  auth: { header: string; value: string } | null,
  guard: OutboundGuard,
  timeoutMs = 15_000,
): Promise<OriginTool[]> {
  const refused = guard.literalProblem(new URL(url));
  if (refused !== undefined)
    throw new DomainError('origin_unreachable', `Could not read tools/list: ${refused}`);
  const dispatcher = new Agent({ connect: { timeout: timeoutMs, lookup: guard.lookup } as never });
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]);
  const client = new Client({ name: 'mcp-meter-tool-import', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: auth === null ? {} : { [auth.header]: auth.value } },
    fetch: ((input: string | URL, init?: RequestInit) =>
      undiciFetch(input, { ...(init as object), dispatcher, redirect: 'error' })) as never,
  });
  try {
    await client.connect(transport, { timeout: timeoutMs });
    const tools: OriginTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
      tools.push(...result.tools.map((t) => ({ name: t.name, description: t.description })));
      cursor = result.nextCursor;
      if (cursor === undefined) break;
    }
    return tools;
  } catch (error) {
    throw new DomainError('origin_unreachable', `Could not read tools/list: ${failureOf(error)}`);
  } finally {
    await client.close().catch(() => undefined);
    await dispatcher.close().catch(() => undefined);
  }
}
