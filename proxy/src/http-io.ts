import type uWS from 'uWebSockets.js';
import type { IncomingHttpHeaders } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Counter } from '@mcp-meter/contracts/metrics';
import type { OriginControl } from './origin/types';

/**
 * HTTP on uWebSockets.js: one exchange per request, its aborts and backpressure, and the few
 * ways an answer is written (a whole body, the origin's head, chunks). Everything written to a
 * response goes inside `cork`, so a head and its body leave in one syscall.
 */
export interface Exchange {
  res: uWS.HttpResponse;
  aborted: boolean;
  headersSent: boolean;
  /** The origin request, once dispatched: aborted when the client goes away, resumed when it drains. */
  origin: OriginControl | undefined;
  wakeWriter: (() => void) | undefined;
  requests: Counter;
  /**
   * A stream that ends only when someone ends it: a session's standalone GET stream (MCP 2025)
   * or a `subscriptions/listen` POST (MCP 2026-07-28).
   */
  standalone: boolean;
  /** The proxy is stopping and cancelled this exchange's origin request. */
  stopped: boolean;
  /**
   * The value of `access-control-allow-origin` the answer carries: a browser's Origin once the
   * MCP server allows it, `*` on public documents (protected-resource metadata), else undefined
   * (no CORS headers; the origin's own pass only to clients that are not browsers).
   */
  cors: string | undefined;
  /** Its place among the exchanges in flight (in-flight.ts); -1 when not among them. */
  slot: number;
  /**
   * The proxy opened an event stream on this answer itself (the paywall asked inside the call,
   * paywall/ask.ts): what is answered from then on goes as events on it.
   */
  eventStream?: boolean;
}

/** Never forwarded: hop-by-hop headers, and the customer's own credentials (meant for us, not the origin). */
export const REQUEST_SKIP = new Set([
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
/**
 * uWS frames the body itself (chunked) and writes its own Date. Cookies are dropped: every
 * origin shares the proxy's host, so one origin's cookie would reach the others.
 */
const RESPONSE_SKIP = new Set([
  'set-cookie',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'date',
  'trailer',
  'upgrade',
]);

const STATUS_LINES = new Map<number, string>();
export const statusLine = (status: number) => {
  let line = STATUS_LINES.get(status);
  if (line === undefined) {
    line = `${status} ${STATUS_CODES[status] ?? ''}`.trim();
    STATUS_LINES.set(status, line);
  }
  return line;
};

/**
 * CORS for browser-based MCP clients. A page may call an MCP server only from an origin the
 * server lists in its allowed origins (the MCP transport requires servers to validate Origin:
 * this is what stops DNS rebinding); the answer names that origin alone and varies on it. The
 * origin's own CORS headers are replaced by these.
 */
const CORS_EXPOSED = 'mcp-session-id, mcp-protocol-version, www-authenticate, retry-after';
export const CORS_METHODS = 'GET, POST, DELETE, OPTIONS';

/** Call inside cork. */
export function writeCors(exchange: Exchange): void {
  const allowed = exchange.cors;
  if (allowed === undefined) return;
  exchange.res.writeHeader('access-control-allow-origin', allowed);
  if (allowed !== '*') exchange.res.writeHeader('vary', 'origin');
  exchange.res.writeHeader('access-control-expose-headers', CORS_EXPOSED);
}

/** A whole answer written by the proxy itself. */
export function respond(
  exchange: Exchange,
  status: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
): void {
  if (exchange.aborted) return;
  exchange.requests.incLabel('code', status);
  exchange.res.cork(() => {
    if (!exchange.headersSent) {
      exchange.res.writeStatus(statusLine(status)).writeHeader('content-type', contentType);
      for (const [name, value] of Object.entries(headers)) exchange.res.writeHeader(name, value);
      writeCors(exchange);
    }
    exchange.headersSent = true;
    exchange.res.end(exchange.eventStream === true ? sseEvent(body) : body);
  });
}

/**
 * One JSON-RPC message as a server-sent event. Its lines become `data:` lines, which the event's
 * reader joins with LF again: a JSON text's line breaks are only whitespace between tokens.
 */
export function sseEvent(json: string | Buffer): Buffer {
  const text = typeof json === 'string' ? json : json.toString('utf8');
  return Buffer.from(`event: message\ndata: ${text.split(/\r\n|\r|\n/).join('\ndata: ')}\n\n`);
}

/** One chunk of a streamed answer; a promise when the client must drain first. */
export function writeChunk(
  exchange: Exchange,
  chunk: Uint8Array,
  writeHead: () => void,
): Promise<void> | undefined {
  let accepted = true;
  exchange.res.cork(() => {
    if (!exchange.headersSent) writeHead();
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

/** Header names listed in a Connection header, other than the usual keep-alive and close. */
export function hopHeadersIn(connection: string): string[] {
  // What nearly every answer says, without a split.
  if (connection === 'keep-alive' || connection === 'close' || connection === 'Keep-Alive') return [];
  const names: string[] = [];
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '' && name !== 'keep-alive' && name !== 'close') names.push(name);
  }
  return names;
}

/** The origin's status and headers, less hop-by-hop ones; call inside cork. */
export function writeHead(exchange: Exchange, status: number, headers: IncomingHttpHeaders): void {
  exchange.res.writeStatus(statusLine(status));
  const connection = headers.connection;
  const hop = typeof connection === 'string' ? hopHeadersIn(connection) : [];
  for (const name in headers) {
    const value = headers[name];
    if (RESPONSE_SKIP.has(name) || value === undefined || (hop.length > 0 && hop.includes(name))) continue;
    if (exchange.cors !== undefined && name.startsWith('access-control-')) continue;
    if (typeof value === 'string') exchange.res.writeHeader(name, value);
    else for (const v of value) exchange.res.writeHeader(name, v);
  }
  writeCors(exchange);
  exchange.headersSent = true;
}

/** A CORS preflight: 204, and for an allowed browser origin the methods and headers it asked for. */
export function answerPreflight(exchange: Exchange, askedHeaders: string): void {
  if (exchange.aborted) return;
  const res = exchange.res;
  exchange.requests.incLabel('code', 204);
  res.cork(() => {
    res.writeStatus('204 No Content').writeHeader('allow', CORS_METHODS);
    if (exchange.cors !== undefined) {
      res
        .writeHeader('access-control-allow-origin', exchange.cors)
        .writeHeader('access-control-allow-methods', CORS_METHODS)
        .writeHeader('access-control-max-age', '86400');
      if (askedHeaders !== '') res.writeHeader('access-control-allow-headers', askedHeaders);
      if (exchange.cors !== '*') res.writeHeader('vary', 'origin');
    }
    res.endWithoutBody();
  });
}
