import type { AccessTokenClaims, McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import { TokenVerifier } from './auth';
import type { ToolCall } from './calls';
import type { ProxyConfig } from './config';
import { originAllowed, type ServerDirectory } from './directory';
import { bearerChallenge, resourceUrlOf } from './discovery';
import { type Era, eraOf, headerMismatch } from './era';
import { type Exchange, respond } from './http-io';
import type { ProxyRequest } from './intake';
import { declaresUrlElicitation, idOf, toolCallsIn } from './jsonrpc';
import type { PaywallAsks } from './paywall/ask';
import { refuse } from './refusals';

/**
 * Admission: whether a request is let in at all, before any call of it is judged. A browser
 * page's origin, the customer's token, the MCP server it names and that server's state, a body
 * the proxy could read, and headers the body does not contradict; and the client's answers to
 * the proxy's own paywall asks, which are taken here.
 */

/** A request admitted: who sends it, to which server, in which era, with which calls. */
export interface Admitted {
  server: McpServerSnapshot;
  customerRef: string;
  /** The body as read (undefined when it could not be, which is refused). */
  parsed: unknown;
  calls: ToolCall[];
  era: Era;
  /** The id of a single JSON-RPC request, which an error answer must carry; null otherwise. */
  singleId: string | number | null;
  /** The request is an `initialize` whose client declared URL elicitation (MCP 2025-11-25). */
  declaresElicitation: boolean;
}

export interface AdmissionDeps {
  config: ProxyConfig;
  directory: ServerDirectory;
  verifier: TokenVerifier;
  asks: PaywallAsks;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Admits `request`, or answers it (a refusal, or the 202 to a paywall ask's answer): undefined. */
export async function admit(
  deps: AdmissionDeps,
  exchange: Exchange,
  request: ProxyRequest,
): Promise<Admitted | undefined> {
  const { config } = deps;
  const parsed = request.reading.ok ? request.reading.parsed : undefined;
  // A page from an origin the server does not allow is refused before anything else is judged
  // (MCP transports: servers MUST validate Origin, against DNS rebinding). An unknown server
  // answers the same, so no page learns which subdomains exist.
  if (request.pageOrigin !== '') {
    if (!(await originAllowed(deps.directory, request.route.subdomain, request.pageOrigin))) {
      refuse(exchange, 'browser_origin_not_allowed');
      return undefined;
    }
    exchange.cors = request.pageOrigin;
  }
  // MCP 2026-07-28's subscriptions/listen is a POST whose event stream lasts as long as the
  // client listens: like a session's GET stream it takes a connection of the stream pool, not
  // one the calls share, and a stopping proxy ends it at once.
  if (isObject(parsed) && parsed.method === 'subscriptions/listen') exchange.standalone = true;
  const singleId = idOf(parsed);
  // RFC 6750 / MCP authorization: the client learns it must (re)authenticate, and where the
  // server's protected-resource metadata names the authorization server (RFC 9728).
  const challenge = (error?: Parameters<typeof bearerChallenge>[1]) =>
    bearerChallenge(resourceUrlOf(request.route, request.host, config.publicScheme, request.pathForm), error);
  const unauthorized = (reason: string) =>
    refuse(exchange, 'unauthorized', singleId, {
      message: `Unauthorized: ${reason}`,
      headers: {
        'www-authenticate': challenge(
          request.authorization === '' ? undefined : { code: 'invalid_token', description: reason },
        ),
      },
    });
  // The token is judged before the server is looked up: without a valid one, no request
  // learns whether a subdomain exists.
  let claims: AccessTokenClaims | undefined;
  if (config.requireAuth) {
    const verifying = deps.verifier.verify(request.authorization);
    const verdict = verifying instanceof Promise ? await verifying : verifying;
    if (!verdict.ok) return void unauthorized(verdict.reason);
    claims = verdict.claims;
  }
  // Cached lookups answer at once: awaited only when the store must be read.
  const found = deps.directory.lookup(request.route.subdomain);
  const server = found instanceof Promise ? await found : found;
  const access =
    server === undefined || claims === undefined
      ? undefined
      : TokenVerifier.access(claims, server, config.baseDomain);
  if (server === undefined || access === 'foreign') return void refuse(exchange, 'mcp_server_not_found');
  if (access === 'insufficient_scope')
    return void refuse(exchange, 'insufficient_scope', singleId, {
      headers: {
        'www-authenticate': challenge({
          code: 'insufficient_scope',
          description: 'the token does not carry the mcp scope',
        }),
      },
    });
  if (access !== undefined) return void unauthorized(access);
  const customerRef = claims?.sub ?? 'anonymous';
  if (server.status !== 'active')
    return void refuse(exchange, 'mcp_server_not_active', singleId, {
      message: `This MCP server is ${server.status}`,
    });
  // Not read, so not judged: the origin never sees it (it might decode a call the proxy missed).
  if (!request.reading.ok)
    return void refuse(exchange, request.reading.code, null, { message: request.reading.message });
  // A client's answer to a paywall the proxy asked inside a call is the proxy's (paywall/ask.ts).
  if (request.method === 'POST' && deps.asks.take(parsed, customerRef))
    return void respond(exchange, 202, 'application/json', '');
  // MCP 2026-07-28: headers the body contradicts are refused before anything is spent.
  const era = eraOf(request.headers, parsed);
  if (request.method === 'POST') {
    const mismatch = headerMismatch(request.headers, parsed, era);
    if (mismatch !== undefined)
      return void refuse(exchange, 'header_mismatch', singleId, { message: `Header mismatch: ${mismatch}` });
  }
  return {
    server,
    customerRef,
    parsed,
    calls: toolCallsIn(parsed),
    era,
    singleId,
    declaresElicitation: Array.isArray(parsed)
      ? parsed.some(declaresUrlElicitation)
      : declaresUrlElicitation(parsed),
  };
}
