import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DomainError } from '../../errors';

export interface OriginTool {
  name: string;
  description?: string | undefined;
}

/** Every tool the origin lists, over MCP streamable HTTP, with the origin's API key when one is set. */
export async function listOriginTools(
  url: string,
  auth: { header: string; value: string } | null,
  timeoutMs = 15_000,
): Promise<OriginTool[]> {
  const client = new Client({ name: 'mcp-meter-tool-import', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: auth === null ? {} : { [auth.header]: auth.value } },
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
    throw new DomainError(
      'origin_unreachable',
      `Could not read tools/list from the origin: ${error instanceof Error ? error.message : String(error)}`,
    );
  } finally {
    await client.close().catch(() => undefined);
  }
}
