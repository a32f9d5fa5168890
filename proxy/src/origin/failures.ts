import { UnsafeUrlError } from '@mcp-meter/contracts/kit';
import type { ProxyErrorCode } from '../refusals';
import { OriginError } from './errors';

/** How an origin request's failure is told to the client: which refusal it is. */

/** An origin that did not connect, answer or go on answering in time. */
const isOriginTimeout = (error: unknown) =>
  error instanceof OriginError &&
  (error.code === 'origin_connect_timeout' ||
    error.code === 'origin_headers_timeout' ||
    error.code === 'origin_body_timeout');
/**
 * The origin asked for authentication (401, 407). The customer's credentials are for the proxy and
 * never reach the origin, so this is the origin key the provider configured (missing or wrong):
 * passed through, it would send the MCP client into sign-in against the proxy for nothing.
 */
export class OriginCredentialsRefused extends Error {
  constructor(status: number) {
    super(`the origin refused the proxy's credentials (HTTP ${status})`);
  }
}
/** The SSRF guard refused the origin's address (a literal one, or what its name resolved to). */
const isOriginNotAllowed = (error: unknown): boolean =>
  error instanceof UnsafeUrlError ||
  (error instanceof Error && error.cause instanceof UnsafeUrlError) ||
  (error !== null && typeof error === 'object' && (error as { code?: unknown }).code === 'unsafe_url');

/** Which refusal an origin request's failure is. */
export function originFailure(error: unknown): ProxyErrorCode {
  if (error instanceof OriginCredentialsRefused) return 'origin_auth_failed';
  if (error instanceof OriginError && error.code === 'origin_busy') return 'origin_busy';
  if (isOriginNotAllowed(error)) return 'origin_not_allowed';
  return isOriginTimeout(error) ? 'origin_timeout' : 'origin_unreachable';
}
