import { MCP_SCOPE, subdomainOfHost } from '@mcp-meter/contracts/snapshots';
import type { TokenVerifier } from './auth';
import { type Exchange, respond } from './http-io';
import { refuse } from './refusals';
import type { Route } from './routing';

/**
 * OAuth discovery for MCP clients (MCP authorization, 2025-06-18 and 2025-11-25): each MCP server
 * behind the proxy is a protected resource whose metadata (RFC 9728) names the authorization
 * server, and every refusal for want of a token points at that metadata.
 */

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/** A Host this proxy may repeat in a URL: a name or an address, with an optional port. */
const SAFE_HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The server a protected-resource metadata request asks about: the path form
 * `/.well-known/oauth-protected-resource/mcp/<subdomain>` (RFC 9728 §3.1, for the resource
 * `<origin>/mcp/<subdomain>`), or on a server's own host the root form or `/mcp` after it.
 * Undefined when the path is not a metadata request at all.
 */
export function metadataRouteOf(
  url: string,
  host: string,
  baseDomain: string | undefined,
): { route: Route; pathForm: boolean } | 'none' | undefined {
  if (!url.startsWith(WELL_KNOWN)) return undefined;
  const rest = url.slice(WELL_KNOWN.length);
  const pathForm = /^\/mcp\/([a-z0-9-]+)\/?$/.exec(rest);
  if (pathForm?.[1] !== undefined) return { route: { subdomain: pathForm[1], rest: '' }, pathForm: true };
  const subdomain =
    rest === '' || rest === '/' || rest === '/mcp' ? subdomainOfHost(host, baseDomain) : undefined;
  if (subdomain !== undefined) return { route: { subdomain, rest: '' }, pathForm: false };
  return 'none';
}

/**
 * The resource URL of the server a request reached, as the client addressed it (so an SDK that
 * checks the metadata's `resource` against the URL it dialled finds it a prefix): the path form
 * `<scheme>://<host>/mcp/<subdomain>`, or the server's own host `<scheme>://<host>/`. Undefined
 * when the Host header is not a plain host and port.
 */
export function resourceUrlOf(
  route: Route,
  host: string,
  scheme: string,
  pathForm: boolean,
): string | undefined {
  if (!SAFE_HOST.test(host)) return undefined;
  return pathForm ? `${scheme}://${host}/mcp/${route.subdomain}` : `${scheme}://${host}/`;
}

/** Where the metadata of a resource is published (RFC 9728 §3.1: the well-known part before the path). */
export function metadataUrlOf(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === '/' ? '' : url.pathname;
  return `${url.origin}${WELL_KNOWN}${path}`;
}

/** The protected-resource metadata document of one MCP server. */
export function protectedResourceMetadata(resource: string, issuer: string): string {
  return JSON.stringify({
    resource,
    authorization_servers: [issuer],
    scopes_supported: [MCP_SCOPE],
    bearer_methods_supported: ['header'],
  });
}

/**
 * The `WWW-Authenticate` challenge of a refused call (RFC 6750 §3, RFC 9728 §5.1): where the
 * metadata is and which scope to ask for, plus the error when a token was presented.
 */
export function bearerChallenge(
  resource: string | undefined,
  error?: { code: 'invalid_token' | 'insufficient_scope'; description: string },
): string {
  const parts = ['Bearer realm="mcp"'];
  if (resource !== undefined) parts.push(`resource_metadata="${metadataUrlOf(resource)}"`);
  parts.push(`scope="${MCP_SCOPE}"`);
  if (error !== undefined)
    parts.push(`error="${error.code}"`, `error_description="${error.description.replace(/["\\]/g, '')}"`);
  return parts.join(', ');
}

/**
 * Answers a protected-resource metadata request: public, the same for every server name (no
 * lookup, so nothing to enumerate), readable from browsers.
 */
export async function serveResourceMetadata(
  exchange: Exchange,
  resource: string | undefined,
  verifier: TokenVerifier,
): Promise<void> {
  if (resource === undefined)
    return refuse(exchange, 'route_not_found', null, { message: 'Bad Host header' });
  let issuer: string | undefined;
  try {
    issuer = await verifier.issuer();
  } catch {
    issuer = undefined;
  }
  if (issuer === undefined) return refuse(exchange, 'proxy_unavailable');
  exchange.cors = '*';
  return respond(exchange, 200, 'application/json', protectedResourceMetadata(resource, issuer));
}
