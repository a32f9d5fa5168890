import { ID, newId } from '@mcp-meter/contracts/kit';
import { MCP_SCOPE, subdomainOfResource } from '@mcp-meter/contracts/snapshots';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { getProvider } from '../providers/repository';
import type { OAuthClients } from './clients';
import { OAuthError } from './errors';
import { type ClientRow, findServerBySubdomain, insertCode, insertGrant } from './repository';
import { newSecret, sha256 } from './secrets';

/** What an authorization request asks for (the query of the authorization endpoint, spec 4.3's fields). */
export interface AuthorizationParams {
  response_type?: string | undefined;
  client_id?: string | undefined;
  redirect_uri?: string | undefined;
  state?: string | undefined;
  scope?: string | undefined;
  code_challenge?: string | undefined;
  code_challenge_method?: string | undefined;
  resource?: string | undefined;
  mcp_subdomain?: string | undefined;
}

/** A checked authorization request: who asks, for which server, and where the answer goes. */
export interface Authorization {
  client: ClientRow;
  redirectUri: string;
  state: string | undefined;
  scope: string;
  codeChallenge: string;
  resource: string;
  server: { id: string; name: string; productId: string | null; avatarUrl: string | null };
  tenant: { providerId: string; environment: 'sandbox' | 'live' };
  provider: { name: string; logoUrl: string | null; brandColor: string | null };
}

const CODE_TTL_MS = 60_000;
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export /** The parameters that resume an authorization request (as `authorize` reads them). */
const requestParams = (request: Authorization): Record<string, string> => ({
  response_type: 'code',
  client_id: request.client.id,
  redirect_uri: request.redirectUri,
  scope: request.scope,
  code_challenge: request.codeChallenge,
  code_challenge_method: 'S256',
  resource: request.resource,
  ...(request.state === undefined ? {} : { state: request.state }),
});

/**
 * The authorization request (spec 4.3): checked once the client and its redirect URI are known
 * good, then answered, after the customer signed in, with a code bound to the request (PKCE S256,
 * the resource, the redirect URI) on the client's redirect URI, or with an error there.
 */
export class Authorizer {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly clients: OAuthClients,
    private readonly addressing: {
      issuer: string;
      proxyBaseDomain: string | undefined;
      /** The resource URL of a server, as its mcpProxyUrl shows it. */
      resourceOf: (subdomain: string) => string;
    },
  ) {}

  /**
   * The rest of an authorization request, once the client and redirect URI are known good: these
   * errors go back to the client on its redirect URI (RFC 6749 §4.1.2.1).
   */
  async authorize(params: AuthorizationParams): Promise<Authorization> {
    const { client, redirectUri } = await this.clients.checkClient(params);
    if (params.response_type !== 'code')
      throw new OAuthError('unsupported_response_type', 'response_type must be code');
    // PKCE S256 for every client (OAuth 2.1): a code is worthless without its verifier.
    if (params.code_challenge_method !== 'S256')
      throw new OAuthError('invalid_request', 'code_challenge_method must be S256');
    if (params.code_challenge === undefined || !PKCE_CHALLENGE.test(params.code_challenge))
      throw new OAuthError('invalid_request', 'code_challenge must be a base64url SHA-256 digest');
    const scopes = (params.scope ?? MCP_SCOPE).split(' ').filter((s) => s !== '');
    if (scopes.length === 0 || scopes.some((s) => s !== MCP_SCOPE))
      throw new OAuthError('invalid_scope', `the only scope is ${MCP_SCOPE}`);
    const subdomain =
      params.resource !== undefined
        ? subdomainOfResource(params.resource, this.addressing.proxyBaseDomain)
        : params.mcp_subdomain;
    const server = subdomain === undefined ? undefined : await findServerBySubdomain(this.pool, subdomain);
    if (server === undefined || server.status !== 'active')
      throw new OAuthError('invalid_target', 'resource does not name an active MCP server of this service');
    const provider = await getProvider(this.pool, server.provider_id);
    if (provider === undefined) throw new OAuthError('invalid_target', 'resource has no provider');
    return {
      client,
      redirectUri,
      state: params.state,
      scope: MCP_SCOPE,
      codeChallenge: params.code_challenge,
      resource: params.resource ?? this.addressing.resourceOf(subdomain as string),
      server: {
        id: server.id,
        name: server.name,
        productId: server.product_id,
        avatarUrl: server.avatar_url,
      },
      tenant: { providerId: server.provider_id, environment: server.environment },
      provider: { name: provider.displayName, logoUrl: provider.logoUrl, brandColor: provider.brandColor },
    };
  }

  /** Where the client's redirect URI sends an error (RFC 6749 §4.1.2.1, with `iss` of RFC 9207). */
  errorRedirect(redirectUri: string, state: string | undefined, error: OAuthError): string {
    const url = new URL(redirectUri);
    url.searchParams.set('error', error.error);
    url.searchParams.set('error_description', error.description);
    if (state !== undefined) url.searchParams.set('state', state);
    url.searchParams.set('iss', this.addressing.issuer);
    return url.toString();
  }

  /** A new grant and its code; the redirect URI with `code`, `state` and `iss`. */
  async codeRedirect(request: Authorization, customerId: string): Promise<string> {
    const code = newSecret();
    const at = this.clock.now();
    const grantId = newId(ID.grant);
    await inTransaction(this.pool, async (tx) => {
      await insertGrant(tx, {
        id: grantId,
        client_id: request.client.id,
        customer_id: customerId,
        provider_id: request.tenant.providerId,
        environment: request.tenant.environment,
        mcp_server_id: request.server.id,
        resource: request.resource,
        scope: request.scope,
        revoked_at: null,
        created_at: at,
      });
      await insertCode(tx, {
        codeHash: sha256(code),
        grantId,
        redirectUri: request.redirectUri,
        codeChallenge: request.codeChallenge,
        expiresAt: new Date(at.getTime() + CODE_TTL_MS),
      });
    });
    const url = new URL(request.redirectUri);
    url.searchParams.set('code', code);
    if (request.state !== undefined) url.searchParams.set('state', request.state);
    url.searchParams.set('iss', this.addressing.issuer);
    return url.toString();
  }
}
