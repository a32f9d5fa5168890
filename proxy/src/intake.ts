import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { TokenVerifier } from './auth';
import type { ProxyConfig } from './config';
import { originAllowed, type ServerDirectory, SnapshotUnavailableError } from './directory';
import { metadataRouteOf, resourceUrlOf, serveResourceMetadata } from './discovery';
import { answerPreflight, type Exchange, hopHeadersIn, REQUEST_SKIP, respond } from './http-io';
import type { InFlight } from './in-flight';
import { idOf } from './jsonrpc';
import { type ProxyMetrics, serveMetrics } from './metrics-page';
import { type ProxyErrorCode, refuse } from './refusals';
import { type BodyReading, readJsonBody } from './request-body';
import { type Route, routeOf } from './routing';
import type { SessionOrder, Ticket } from './session-order';
import { sessionOf } from './sessions';

/**
 * Intake: a request as it arrives, before anything about it is judged. The proxy's own routes
 * (health, metrics, protected-resource metadata, CORS preflights) are answered; an MCP request's
 * line and head are checked so that what is forwarded is what was read, its route and session
 * place are taken, and its body is read whole (within the size limit) and parsed once.
 */

/**
 * What a request's line and head must be before the proxy reads further, so that the bytes it
 * writes to an origin are the bytes it judged. uWebSockets.js hands the target and header values
 * over as strings decoded from UTF-8 (a value that is not UTF-8 arrives empty): a character past
 * U+00FF cannot be written back as the byte it came from, and written as Latin-1 it would become
 * another byte (U+010D U+010A is `\r\n`). So the target is visible ASCII, and stays free of
 * controls once percent-decoded; header values are visible ASCII, space and tab; names are tokens.
 */

/** Visible ASCII only: no space, no control, nothing past U+007E. */
const UNSENDABLE = /[^\x21-\x7e]/;
/** A percent-encoded control character (C0 or DEL), which an origin's decoding would bring back. */
const ENCODED_CONTROL = /%(?:[01][0-9a-f]|7f)/i;
const UNSAFE_VALUE = /[^\t\x20-\x7e]/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/**
 * Headers the proxy reads, or that frame or route the request: given twice, one reader could take
 * the first and another the last, so a request that repeats one is refused.
 */
const SINGLE = new Set([
  'host',
  'authorization',
  'content-length',
  'transfer-encoding',
  'content-type',
  'content-encoding',
  'origin',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'last-event-id',
]);

/** Whether the request target (path and query, as uWebSockets.js decoded them) may be sent on. */
export function targetSendable(path: string, query: string | undefined): boolean {
  if (UNSENDABLE.test(path) || ENCODED_CONTROL.test(path)) return false;
  return query === undefined || (!UNSENDABLE.test(query) && !ENCODED_CONTROL.test(query));
}

/**
 * The request's headers to forward (hop-by-hop and the proxy's own left out; a header sent more
 * than once joined as HTTP joins a list, cookies with `; `), or why the head is refused.
 */
export function forwardableHeaders(req: HttpRequest): Record<string, string> | ProxyErrorCode {
  const headers: Record<string, string> = {};
  let seen: Set<string> | undefined;
  let problem: ProxyErrorCode | undefined;
  req.forEach((name, value) => {
    if (problem !== undefined) return;
    // `__proto__` would set the object's prototype, not a header (uWebSockets.js drops it anyway).
    if (!TOKEN.test(name) || UNSAFE_VALUE.test(value) || name === '__proto__') {
      problem = 'invalid_header';
      return;
    }
    if (SINGLE.has(name)) {
      seen ??= new Set();
      if (seen.has(name)) {
        problem = 'duplicate_header';
        return;
      }
      seen.add(name);
    }
    if (REQUEST_SKIP.has(name)) return;
    const earlier = headers[name];
    headers[name] = earlier === undefined ? value : `${earlier}${name === 'cookie' ? '; ' : ', '}${value}`;
  });
  return problem ?? headers;
}

/** An MCP request as intake read it: what every later step (admission, gating, relay) works from. */
export interface ProxyRequest {
  method: string;
  route: Route;
  query: string;
  headers: Record<string, string>;
  body: Buffer;
  /** What the proxy read of the body (GET and DELETE have none: read as an empty object). */
  reading: BodyReading;
  authorization: string;
  /** How the client addressed the server (its resource URL is built only for a refusal). */
  host: string;
  pathForm: boolean;
  arrived: number;
  /** The Origin header ('' when the client is not a browser page). */
  pageOrigin: string;
  /** Its place in its session's order of requests to the origin (session-order.ts). */
  ticket: Ticket | undefined;
}

export interface IntakeDeps {
  config: ProxyConfig;
  directory: ServerDirectory;
  verifier: TokenVerifier;
  order: SessionOrder;
  /** Exchanges being served (the in-flight gauge), so a stop can wait for them or end them. */
  live: InFlight<Exchange>;
  metrics: ProxyMetrics;
  logger: Logger;
  /** The proxy is stopping: health says so, and new requests are sent elsewhere. */
  stopping: () => boolean;
  /** What /healthz answers while serving. */
  healthy: string;
  /** The metrics page's text. */
  renderMetrics: () => string | Promise<string>;
  /** Serves an MCP request once read (admission, gating, relay). */
  forward: (exchange: Exchange, request: ProxyRequest) => Promise<void>;
}

/** How long a session's later requests wait for the origin to answer its standalone GET's head. */
const STANDALONE_HEAD_WAIT_MS = 500;
const EMPTY = Buffer.alloc(0);
const NO_BODY: BodyReading = { ok: true, parsed: {} };

/** Takes in one request from uWebSockets.js (everything read from `req` is read synchronously). */
export function receive(deps: IntakeDeps, res: HttpResponse, req: HttpRequest) {
  const { config, logger, live, order } = deps;
  const url = req.getUrl();
  const method = req.getCaseSensitiveMethod();
  const exchange: Exchange = {
    res,
    aborted: false,
    headersSent: false,
    origin: undefined,
    wakeWriter: undefined,
    requests: deps.metrics.requests,
    standalone: method === 'GET',
    stopped: false,
    cors: undefined,
    slot: -1,
  };
  // A browser's page (an Origin header); served only from origins its MCP server allows.
  const pageOrigin = req.getHeader('origin');
  /** Set once the request is routed; given up when it ends, is refused or its client leaves. */
  let ticket: Ticket | undefined;
  res.onAborted(() => {
    ticket?.done();
    exchange.aborted = true;
    exchange.origin?.abort(new Error('client went away'));
    exchange.wakeWriter?.();
  });
  if (url === '/healthz') {
    if (deps.stopping()) return respond(exchange, 503, 'application/json', '{"status":"stopping"}');
    return respond(exchange, 200, 'application/json', deps.healthy);
  }
  if (url === '/metrics')
    return serveMetrics(
      exchange,
      req.getHeader('authorization'),
      config.metricsToken === undefined ? undefined : `Bearer ${config.metricsToken}`,
      deps.renderMetrics,
    );
  // Before anything is read or routed: the target is sent on only as the bytes it arrived as.
  const query = req.getQuery();
  if (!targetSendable(url, query)) return refuse(exchange, 'invalid_request_target');
  const headers = forwardableHeaders(req);
  if (typeof headers === 'string') return refuse(exchange, headers);

  const host = req.getHeader('host');
  const metadataRoute = metadataRouteOf(url, host, config.baseDomain);
  // A CORS preflight carries no credentials: answered here, never sent on or refused for want
  // of a token. Public documents are for any page; an MCP server only for the origins it allows.
  if (method === 'OPTIONS') {
    const asked = req.getHeader('access-control-request-headers');
    if (pageOrigin === '') return answerPreflight(exchange, asked);
    if (metadataRoute !== undefined) {
      exchange.cors = '*';
      return answerPreflight(exchange, asked);
    }
    const target = routeOf(url, host, config.baseDomain);
    if (target === undefined || target === 'unsafe_path')
      return refuse(exchange, 'browser_origin_not_allowed');
    void originAllowed(deps.directory, target.subdomain, pageOrigin).then(
      (allowed) => {
        if (!allowed) return refuse(exchange, 'browser_origin_not_allowed');
        exchange.cors = pageOrigin;
        answerPreflight(exchange, asked);
      },
      (error: unknown) => {
        logger.warn({ err: error, subdomain: target.subdomain }, 'snapshot store unavailable');
        refuse(exchange, 'proxy_unavailable');
      },
    );
    return;
  }
  if (metadataRoute !== undefined) {
    if (metadataRoute === 'none' || (method !== 'GET' && method !== 'HEAD'))
      return refuse(exchange, 'route_not_found', null, { message: `No route for ${url}` });
    const resource = resourceUrlOf(metadataRoute.route, host, config.publicScheme, metadataRoute.pathForm);
    void serveResourceMetadata(exchange, resource, deps.verifier);
    return;
  }
  const route = routeOf(url, host, config.baseDomain);
  if (route === undefined)
    return refuse(exchange, 'route_not_found', null, { message: `No route for ${url}` });
  // The origin path is the registered one: nothing may climb out of it, encoded or not.
  if (route === 'unsafe_path') return refuse(exchange, 'path_not_allowed');
  // Headers the client named in Connection are for this hop only (RFC 9110 §7.6.1).
  const connection = req.getHeader('connection');
  if (connection !== '') for (const name of hopHeadersIn(connection)) delete headers[name];
  const authorization = req.getHeader('authorization');
  const arrived = performance.now();
  const declaredLength = Number(headers['content-length'] ?? req.getHeader('content-length') ?? 0);
  // Said before the body is read, so no request id is known.
  if (declaredLength > config.maxBodyBytes) return refuse(exchange, 'payload_too_large');
  // A request on a kept-alive connection after the stop began: sent elsewhere, not started.
  if (deps.stopping()) return refuse(exchange, 'proxy_stopping', null, { headers: { connection: 'close' } });
  // Its place among its session's requests, taken in the order they arrive.
  ticket = order.enter(sessionOf(headers));
  // An origin that holds a GET's head until its first event holds the session back no longer.
  if (method === 'GET') ticket?.expireAfter(STANDALONE_HEAD_WAIT_MS);
  live.add(exchange);
  const run = (body: Buffer, reading: BodyReading) => {
    const parsed = reading.ok ? reading.parsed : undefined;
    return deps
      .forward(exchange, {
        method,
        route,
        query: query ?? '',
        headers,
        body,
        reading,
        authorization,
        host,
        pathForm: url.startsWith('/mcp/'),
        arrived,
        pageOrigin,
        ticket,
      })
      .catch((error: unknown) => {
        const id = idOf(parsed);
        if (error instanceof SnapshotUnavailableError) {
          // Redis is away and this server, or the token's signing key, is not cached here yet.
          logger.warn({ err: error, subdomain: route.subdomain }, 'snapshot store unavailable');
          return refuse(exchange, 'proxy_unavailable', id);
        }
        logger.error({ err: error }, 'proxy request failed');
        refuse(exchange, 'internal_error', id);
      })
      .finally(() => {
        ticket?.done();
        live.delete(exchange);
      });
  };

  if (method === 'GET' || method === 'HEAD' || method === 'DELETE') {
    // No body is read or forwarded for these, so none can carry a call.
    void run(EMPTY, NO_BODY);
    return;
  }
  if (method !== 'POST') {
    ticket?.done();
    live.delete(exchange);
    return refuse(exchange, 'method_not_allowed', null, {
      message: `MCP takes POST, GET and DELETE, not ${method}`,
    });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  res.onData((chunk, isLast) => {
    if (size > config.maxBodyBytes) return;
    size += chunk.byteLength;
    if (size > config.maxBodyBytes) {
      ticket?.done();
      live.delete(exchange);
      return refuse(exchange, 'payload_too_large');
    }
    // uWS reuses the chunk's memory after this callback returns: copy it (once, for a body
    // that came in one chunk, as most do).
    const copy = Buffer.from(new Uint8Array(chunk));
    if (isLast) {
      const body = chunks.length === 0 ? copy : Buffer.concat([...chunks, copy]);
      void run(body, readJsonBody(body, headers['content-type'], headers['content-encoding']));
    } else chunks.push(copy);
  });
}
