import type { Environment } from '../usage-record';

/**
 * What the proxy needs to route and meter calls for one MCP server, written by the control
 * plane on every change and read by the proxy without calling the control plane. Versioned so
 * a proxy never misreads a newer shape.
 */
export interface McpServerSnapshot {
  v: 1;
  serverId: string;
  providerId: string;
  environment: Environment;
  subdomain: string;
  originUrl: string;
  status: 'active' | 'inactive' | 'suspended';
  productId: string | null;
  meterRef: string;
  meterName: string;
  /** For tool gating: which plans unlock each tool; tools not listed fall back to defaultPlanId. */
  defaultPlanId?: string | null;
  /** The default plan's terms, so the proxy can limit it without asking. */
  defaultPlan?: {
    planId: string;
    limit: number | null;
    billingCycle: 'weekly' | 'monthly' | 'quarterly' | 'yearly' | 'custom' | null;
    intervalDays: number | null;
  } | null;
  tools?: { name: string; planIds: string[]; noPlan: boolean }[];
  /**
   * Web origins whose pages may call the server (the Origin header, exactly); a request with
   * any other Origin is refused with 403. Absent or empty: every browser request is refused.
   */
  allowedOrigins?: string[];
  /** Header the origin expects its API key in, and the header value sealed with the deployment secret. */
  originAuth?: { header: string; sealedValue: string } | null;
}

export const SNAPSHOT_PREFIX = 'mcpmeter:snapshot:';

export const mcpServerKey = (subdomain: string): string => `${SNAPSHOT_PREFIX}mcp:${subdomain}`;

export function parseMcpServerSnapshot(raw: string | undefined): McpServerSnapshot | undefined {
  if (raw === undefined) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<McpServerSnapshot>;
    return value.v === 1 && typeof value.originUrl === 'string' && typeof value.serverId === 'string'
      ? (value as McpServerSnapshot)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What the proxy's limit check needs about one customer's access to one product, written by
 * the control plane after every purchase change.
 */
export interface EntitlementSnapshot {
  v: 1;
  providerId: string;
  environment: Environment;
  customerId: string;
  productId: string;
  purchaseId: string;
  planId: string;
  status: string;
  grantsAccess: boolean;
  limit: number | null;
  meterRef: string | null;
  periodStart: string;
  periodEnd: string | null;
  /**
   * A plan paid from credits: each admitted call spends `perUnit` credits of the customer's
   * balance. `funded` is every credit ever made available to the customer (the balance plus what
   * usage has been debited), the cap of its credit counter. Absent for other plans.
   */
  credits?: { perUnit: number; funded: number } | null;
}

export const entitlementKey = (
  s: Pick<EntitlementSnapshot, 'providerId' | 'environment' | 'customerId' | 'productId'>,
): string => `${SNAPSHOT_PREFIX}entitlement:${s.providerId}:${s.environment}:${s.customerId}:${s.productId}`;

/**
 * The public keys that verify customer access tokens (a JWKS), read by the proxy, with the
 * issuer (`iss`) the tokens must carry.
 */
export const JWKS_KEY = `${SNAPSHOT_PREFIX}jwks`;

/**
 * A customer whose access tokens are revoked: every token issued before `before` (Unix seconds)
 * is refused. Written when the customer is deleted or its tokens are revoked.
 */
export interface RevocationSnapshot {
  v: 1;
  before: number;
}

export const revocationKey = (providerId: string, environment: Environment, customerId: string): string =>
  `${SNAPSHOT_PREFIX}revoked:${providerId}:${environment}:${customerId}`;

export function parseRevocation(raw: string | undefined): RevocationSnapshot | undefined {
  if (raw === undefined) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<RevocationSnapshot>;
    return value.v === 1 && typeof value.before === 'number' ? (value as RevocationSnapshot) : undefined;
  } catch {
    return undefined;
  }
}

/** Claims of a customer access token as the proxy reads them. */
export interface AccessTokenClaims {
  iss: string;
  /**
   * Who the token is for: `ACCESS_TOKEN_AUDIENCE` for a token the provider minted (any of its
   * servers, or one product's), or the resource URL of one MCP server for a token issued by the
   * hosted sign-in (RFC 8707), which only that server accepts.
   */
  aud: string;
  /** The customer's reference. */
  sub: string;
  prv: string;
  env: Environment;
  prd?: string;
  /** Space-separated scopes (hosted sign-in tokens); a minted token carries none and needs none. */
  scope?: string;
  /** The OAuth client the token was issued to (hosted sign-in tokens). */
  client_id?: string;
  /** The grant (sign-in) the token belongs to: revoking the grant refuses all of its tokens. */
  sid?: string;
  iat: number;
  exp: number;
  jti: string;
}

export const ACCESS_TOKEN_AUDIENCE = 'mcp-meter-proxy';

/** The scope a hosted sign-in token needs to call an MCP server through the proxy. */
export const MCP_SCOPE = 'mcp';

/**
 * The MCP server (its subdomain) that a resource URL names, in either of the proxy's address
 * forms: `<origin>/mcp/<subdomain>[/…]`, or a host `<subdomain>.<baseDomain>`. Undefined for
 * anything else, including URLs with credentials, a query or a fragment.
 */
export function subdomainOfResource(resource: string, baseDomain: string | undefined): string | undefined {
  let url: URL;
  try {
    url = new URL(resource);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') return undefined;
  const pathForm = /^\/mcp\/([a-z0-9-]+)\/?$/.exec(url.pathname);
  if (pathForm?.[1] !== undefined) return pathForm[1];
  return url.pathname === '/' || url.pathname === '/mcp' ? subdomainOfHost(url.host, baseDomain) : undefined;
}

/**
 * The MCP server a Host names in the subdomain form `<subdomain>.<baseDomain>` (ports and case
 * aside), or undefined.
 */
export function subdomainOfHost(host: string, baseDomain: string | undefined): string | undefined {
  if (baseDomain === undefined) return undefined;
  const hostname = host.toLowerCase().replace(/:\d+$/, '');
  const base = baseDomain.toLowerCase().replace(/:\d+$/, '');
  if (!hostname.endsWith(`.${base}`)) return undefined;
  const subdomain = hostname.slice(0, -base.length - 1);
  return /^[a-z0-9-]+$/.test(subdomain) ? subdomain : undefined;
}

/** Grants (hosted sign-ins) whose tokens are revoked: a token of the grant issued at or before `before` is refused. */
export const revokedGrantKey = (grantId: string): string => `${SNAPSHOT_PREFIX}revoked-grant:${grantId}`;
