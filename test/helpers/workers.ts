import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { pollUntil } from './poll';

/**
 * What the proxy-workers tests share: requests on connections of their own (so the kernel may
 * hand each to any worker), each worker's figures, and MCP clients with connections of their own.
 */

export type ToolResult = { content: Array<{ type: string; text?: string }>; isError?: boolean };

/** One request on a connection of its own (agent: false), so the kernel may pick any worker for it. */
export function fresh(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Each worker's figures, read until `count` answered: worker number → (pid, tool calls served
 * with success, tool calls judged whatever their outcome). The pids from each worker's /healthz
 * (a fresh connection reaches any of them); the calls from one metrics page, which has every
 * worker's series, labelled with its worker.
 */
export async function perWorker(
  proxyUrl: string,
  count = 2,
): Promise<Map<number, { pid: number; success: number; calls: number }>> {
  const pids = new Map<number, number>();
  for (let i = 0; i < 200 && pids.size < count; i++) {
    const health = JSON.parse((await fresh(`${proxyUrl}/healthz`)).body) as { worker: number; pid: number };
    pids.set(health.worker, health.pid);
  }
  const seen = new Map<number, { pid: number; success: number; calls: number }>();
  for (let i = 0; i < 50 && seen.size < pids.size; i++) {
    const metrics = (await fresh(`${proxyUrl}/metrics`)).body;
    seen.clear();
    for (const [worker, pid] of pids) {
      if (!new RegExp(`^mcpmeter_proxy_worker\\{worker="${worker}"\\} ${worker}$`, 'm').test(metrics))
        continue;
      let success = 0;
      let calls = 0;
      const series = new RegExp(
        `^mcpmeter_proxy_tool_calls_total\\{worker="${worker}",outcome="([a-z_]+)"\\} (\\d+)$`,
        'gm',
      );
      for (const [, outcome, n] of metrics.matchAll(series)) {
        calls += Number(n);
        if (outcome === 'success') success += Number(n);
      }
      seen.set(worker, { pid, success, calls });
    }
  }
  return seen;
}

/**
 * An MCP client (the SDK's) with connections of its own (its own undici pool): sixteen of them
 * open at least sixteen connections, which the kernel spreads over the workers.
 */
export async function workersClient(serverUrl: string, token: string) {
  const dispatcher = new Agent({ connections: 4 });
  const mcp = new Client({ name: 'workers-client', version: '1.0.0' });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(serverUrl), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
      fetch: (url, init) =>
        undiciFetch(url, { ...(init as object), dispatcher }) as unknown as Promise<Response>,
    }),
  );
  return {
    callTool: (params: { name: string; arguments: Record<string, unknown> }) =>
      mcp.callTool(params) as Promise<ToolResult>,
    close: async () => {
      await mcp.close();
      await dispatcher.close();
    },
  };
}

/** Whether process `pid` is alive. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

type WorkersClient = Awaited<ReturnType<typeof workersClient>>;

/**
 * `calls` tool calls at once over `clients` MCP clients' own connections (spread by the kernel
 * over the workers), each `add` of (i, b); the calls admitted (answered with a result).
 */
export async function callAtOnce(
  open: () => Promise<WorkersClient>,
  clients: number,
  calls: number,
  b: number,
): Promise<number> {
  const opened = await Promise.all(Array.from({ length: clients }, open));
  const results = await Promise.all(
    Array.from({ length: calls }, (_, i) =>
      opened[i % opened.length]?.callTool({ name: 'add', arguments: { a: i, b } }),
    ),
  );
  for (const c of opened) await c.close();
  return results.filter((r) => r !== undefined && r.isError !== true).length;
}

/**
 * Eight clients calling while worker 1 (of `workers`) is SIGKILLed, then worker 1 started again
 * as a new process; the calls that were answered with a result.
 */
export async function killWorkerUnderLoad(
  proxyUrl: string,
  open: () => Promise<WorkersClient>,
  workers = 2,
): Promise<number> {
  const victim = (await perWorker(proxyUrl, workers)).get(1)?.pid;
  if (victim === undefined) throw new Error('worker 1 did not answer');
  const clients = await Promise.all(Array.from({ length: 8 }, open));
  // Calls keep coming from every client while worker 1 is killed, so some are in flight there.
  let answered = 0;
  let calling = true;
  const burst = Promise.all(
    clients.map(async (c, k) => {
      for (let i = 0; calling && i < 6; i++) {
        const result = await c.callTool({ name: 'add', arguments: { a: k, b: i } }).catch(() => undefined);
        if (result !== undefined && result.isError !== true) answered++;
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 15));
  process.kill(victim, 'SIGKILL');
  calling = false;
  await burst;
  for (const c of clients) await c.close().catch(() => undefined);
  await pollUntil(
    async () => (await perWorker(proxyUrl, workers)).get(1)?.pid,
    (pid) => pid !== undefined && pid !== victim,
    { what: 'worker 1 started again', timeoutMs: 60_000 },
  );
  return answered;
}
