import uWS from 'uWebSockets.js';
import { STATUS_CODES } from 'node:http';
import type { McpServerSnapshot } from '@mcp-meter/control-plane/snapshots';
import type { UsageEmitter } from '@mcp-meter/ingest';
import { type Logger, newId } from '@mcp-meter/ingest/kit';
import { Agent, request as originRequest } from 'undici';
import type { TokenVerifier } from './auth';
import type { ProxyConfig } from './config';
import type { ServerDirectory } from './directory';
import {
  jsonRpcError,
  outcomeOf,
  responsesIn,
  type ToolCall,
  type ToolOutcome,
  toolCallsIn,
} from './jsonrpc';

/** Never forwarded: hop-by-hop headers, and the customer's own credentials (meant for us, not the origin). */
const REQUEST_SKIP = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'authorization',
]);
/** uWS frames the body itself (chunked) and writes its own Date. */
const RESPONSE_SKIP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'date',
  'trailer',
  'upgrade',
]);
/** Enough of an answer to find the JSON-RPC result of the calls it carries. */
const SNIFF_LIMIT_BYTES = 1024 * 1024;

const statusLine = (status: number) => `${status} ${STATUS_CODES[status] ?? ''}`.trim();

interface Exchange {
  res: uWS.HttpResponse;
  aborted: boolean;
  headersSent: boolean;
  controller: AbortController;
  wakeWriter: (() => void) | undefined;
}

interface Route {
  subdomain: string;
  /** Path after the server part, appended to the origin URL. */
  rest: string;
}

export function routeOf(url: string, host: string, baseDomain: string | undefined): Route | undefined {
  const pathForm = /^\/mcp\/([a-z0-9-]+)(\/.*)?$/.exec(url);
  if (pathForm?.[1] !== undefined) return { subdomain: pathForm[1], rest: pathForm[2] ?? '' };
  if (baseDomain === undefined) return undefined;
  const hostname = host.toLowerCase().replace(/:\d+$/, '');
  if (!hostname.endsWith(`.${baseDomain}`)) return undefined;
  const subdomain = hostname.slice(0, -baseDomain.length - 1);
  return /^[a-z0-9-]+$/.test(subdomain) ? { subdomain, rest: '' } : undefined;
}

function writeChunk(exchange: Exchange, chunk: Uint8Array): Promise<void> | undefined {
  let accepted = true;
  exchange.res.cork(() => {
    accepted = exchange.res.write(chunk);
  });
  if (accepted) return undefined;
  return new Promise((resolve) => {
    exchange.wakeWriter = resolve;
    exchange.res.onWritable(() => {
      exchange.wakeWriter = undefined;
      resolve();
      return true;
    });
  });
}

function respond(
  exchange: Exchange,
  status: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (exchange.aborted) return;
  exchange.res.cork(() => {
    if (!exchange.headersSent) {
      exchange.res.writeStatus(statusLine(status)).writeHeader('content-type', contentType);
      for (const [name, value] of Object.entries(headers)) exchange.res.writeHeader(name, value);
    }
    exchange.headersSent = true;
    exchange.res.end(body);
  });
}

/** Prometheus exposition of the usage emitter; the full proxy metrics arrive with the proxy issue. */
function metricsText(emitter: UsageEmitter | undefined): string {
  const stats = emitter?.stats();
  if (stats === undefined) return '';
  const counter = (name: string, help: string, value: number) =>
    `# HELP mcpmeter_usage_${name} ${help}\n# TYPE mcpmeter_usage_${name} counter\nmcpmeter_usage_${name} ${value}\n`;
  return (
    counter('emitted_total', 'Usage records emitted by the proxy', stats.emitted) +
    counter('published_total', 'Usage records acknowledged by the bus', stats.published) +
    counter('retried_total', 'Usage records whose publish failed and was retried', stats.retried) +
    counter('spilled_total', 'Usage records written to the local spill file', stats.spilled) +
    counter('replayed_total', 'Spilled usage records published after recovery', stats.replayed) +
    counter('dropped_total', 'Usage records lost (no spill directory, or the disk failed)', stats.dropped) +
    `# HELP mcpmeter_usage_emitter_queue_depth Records waiting in memory\n# TYPE mcpmeter_usage_emitter_queue_depth gauge\nmcpmeter_usage_emitter_queue_depth ${stats.queued}\n`
  );
}

export interface ProxyServerDeps {
  config: ProxyConfig;
  directory: ServerDirectory;
  emitter: UsageEmitter | undefined;
  verifier: TokenVerifier;
  logger: Logger;
}

export interface ProxyServer {
  port: number;
  url: string;
  close(): Promise<void>;
}

export async function startProxyServer(deps: ProxyServerDeps): Promise<ProxyServer> {
  const { config, directory, emitter, verifier, logger } = deps;
  const origins = new Agent({
    connect: { timeout: config.originConnectTimeoutMs },
    headersTimeout: config.originHeadersTimeoutMs,
    bodyTimeout: config.originIdleTimeoutMs,
    keepAliveTimeout: 30_000,
    connections: 256,
    pipelining: 1,
  });
  let inflight = 0;

  function meter(
    server: McpServerSnapshot,
    customerRef: string,
    calls: ToolCall[],
    outcomeFor: (call: ToolCall) => ToolOutcome,
    started: number,
  ) {
    if (emitter === undefined || calls.length === 0) return;
    const latencyMs = Math.round((performance.now() - started) * 1000) / 1000;
    const timestamp = new Date().toISOString();
    for (const call of calls) {
      // Built here rather than through the record validator: every field comes from the trusted
      // snapshot or from this process, and this is the hot path.
      emitter.emit({
        id: newId('rec'),
        providerId: server.providerId,
        environment: server.environment,
        meterRef: server.meterRef,
        meterName: server.meterName,
        customerRef,
        value: 1,
        timestamp,
        properties: { tool: call.tool, outcome: outcomeFor(call), server: server.serverId, latencyMs },
      });
    }
  }

  async function forward(
    exchange: Exchange,
    request: {
      method: string;
      route: Route;
      query: string;
      headers: Record<string, string>;
      body: Buffer;
      authorization: string;
    },
  ) {
    const started = performance.now();
    const server = await directory.lookup(request.route.subdomain);
    if (server === undefined) {
      return respond(
        exchange,
        404,
        'application/json',
        JSON.stringify({ code: 'mcp_server_not_found', detail: 'No MCP server here' }),
      );
    }
    let parsed: unknown;
    if (request.body.length > 0 && (request.headers['content-type'] ?? '').includes('json')) {
      try {
        parsed = JSON.parse(request.body.toString('utf8'));
      } catch {
        parsed = undefined; // the origin answers the parse error in its own words
      }
    }
    const calls = toolCallsIn(parsed);
    const singleId =
      parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) && 'id' in parsed
        ? (parsed.id as string | number)
        : null;
    let customerRef = 'anonymous';
    if (config.requireAuth) {
      const verdict = await verifier.verify(request.authorization, server);
      if (!verdict.ok) {
        // RFC 6750 / MCP authorization: the client learns it must (re)authenticate.
        const challenge =
          request.authorization === ''
            ? 'Bearer realm="mcp"'
            : `Bearer realm="mcp", error="invalid_token", error_description="${verdict.reason}"`;
        return respond(
          exchange,
          401,
          'application/json',
          jsonRpcError(singleId, -32001, `Unauthorized: ${verdict.reason}`),
          {
            'www-authenticate': challenge,
          },
        );
      }
      customerRef = verdict.claims.sub;
    }
    if (server.status !== 'active') {
      return respond(
        exchange,
        503,
        'application/json',
        jsonRpcError(singleId, -32000, `This MCP server is ${server.status}`),
      );
    }

    const target = `${server.originUrl}${request.route.rest}${request.query === '' ? '' : `?${request.query}`}`;
    try {
      const upstream = await originRequest(target, {
        method: request.method as 'POST',
        headers: request.headers,
        body: request.body.length > 0 ? request.body : null,
        dispatcher: origins,
        signal: exchange.controller.signal,
      });
      const contentType = String(upstream.headers['content-type'] ?? '');
      if (exchange.aborted) {
        upstream.body.destroy();
        return;
      }
      exchange.res.cork(() => {
        exchange.res.writeStatus(statusLine(upstream.statusCode));
        for (const [name, value] of Object.entries(upstream.headers)) {
          if (RESPONSE_SKIP.has(name) || value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) exchange.res.writeHeader(name, v);
        }
      });
      exchange.headersSent = true;
      let sniffed = '';
      for await (const chunk of upstream.body as AsyncIterable<Buffer>) {
        if (exchange.aborted) break;
        if (calls.length > 0 && sniffed.length < SNIFF_LIMIT_BYTES) sniffed += chunk.toString('utf8');
        const waiting = writeChunk(exchange, chunk);
        if (waiting !== undefined) await waiting;
      }
      if (!exchange.aborted) exchange.res.cork(() => exchange.res.end());
      const responses = calls.length > 0 ? responsesIn(contentType, sniffed) : [];
      meter(server, customerRef, calls, (call) => outcomeOf(call, upstream.statusCode, responses), started);
    } catch (error) {
      if (exchange.aborted) return;
      logger.warn({ err: error, server: server.serverId }, 'origin request failed');
      meter(server, customerRef, calls, () => 'upstream_error', started);
      if (exchange.headersSent) {
        exchange.res.cork(() => exchange.res.end());
      } else if (singleId !== null) {
        respond(
          exchange,
          200,
          'application/json',
          jsonRpcError(singleId, -32603, 'The MCP server is unreachable; try again'),
        );
      } else {
        respond(
          exchange,
          502,
          'application/json',
          JSON.stringify({ code: 'origin_unreachable', detail: 'The MCP server is unreachable' }),
        );
      }
    }
  }

  const app = uWS.App().any('/*', (res, req) => {
    const url = req.getUrl();
    const method = req.getCaseSensitiveMethod();
    const exchange: Exchange = {
      res,
      aborted: false,
      headersSent: false,
      controller: new AbortController(),
      wakeWriter: undefined,
    };
    res.onAborted(() => {
      exchange.aborted = true;
      exchange.controller.abort();
      exchange.wakeWriter?.();
    });
    if (url === '/healthz') return respond(exchange, 200, 'application/json', '{"status":"ok"}');
    if (url === '/metrics') return respond(exchange, 200, 'text/plain; version=0.0.4', metricsText(emitter));

    const route = routeOf(url, req.getHeader('host'), config.baseDomain);
    if (route === undefined) {
      return respond(
        exchange,
        404,
        'application/json',
        JSON.stringify({ code: 'route_not_found', detail: `No route for ${url}` }),
      );
    }
    const headers: Record<string, string> = {};
    req.forEach((name, value) => {
      if (!REQUEST_SKIP.has(name)) headers[name] = value;
    });
    const query = req.getQuery() ?? '';
    const authorization = req.getHeader('authorization');
    const declaredLength = Number(headers['content-length'] ?? req.getHeader('content-length') ?? 0);
    if (declaredLength > config.maxBodyBytes) {
      return respond(
        exchange,
        413,
        'application/json',
        JSON.stringify({ code: 'payload_too_large', detail: 'Request body too large' }),
      );
    }

    inflight++;
    const run = (body: Buffer) =>
      forward(exchange, { method, route, query, headers, body, authorization })
        .catch((error: unknown) => {
          logger.error({ err: error }, 'proxy request failed');
          respond(exchange, 500, 'application/json', jsonRpcError(null, -32603, 'Internal proxy error'));
        })
        .finally(() => {
          inflight--;
        });

    if (method === 'GET' || method === 'HEAD' || method === 'DELETE' || method === 'OPTIONS') {
      void run(Buffer.alloc(0));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (size > config.maxBodyBytes) return;
      size += chunk.byteLength;
      if (size > config.maxBodyBytes) {
        inflight--;
        return respond(
          exchange,
          413,
          'application/json',
          JSON.stringify({ code: 'payload_too_large', detail: 'Request body too large' }),
        );
      }
      // uWS reuses the chunk's memory after this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) void run(Buffer.concat(chunks));
    });
  });

  const socket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (listenSocket) => {
      if (listenSocket === false)
        reject(new Error(`proxy could not listen on ${config.host}:${config.port}`));
      else resolve(listenSocket);
    });
  });
  const port = uWS.us_socket_local_port(socket as unknown as uWS.us_socket);

  return {
    port,
    url: `http://${config.host}:${port}`,
    async close() {
      uWS.us_listen_socket_close(socket);
      // In-flight calls finish (and are metered) before the process moves on; bounded in time.
      const deadline = Date.now() + 10_000;
      while (inflight > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      await origins.close();
    },
  };
}
