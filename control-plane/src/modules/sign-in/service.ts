import { MCP_SCOPE } from '@mcp-meter/contracts/snapshots';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import type { Mailer } from '../../mail';
import type { TokenService } from '../tokens/service';
import { CustomerAccounts } from './accounts';
import { type Authorization, type AuthorizationParams, Authorizer } from './authorization';
import type { ClientMetadataFetcher } from './client-metadata';
import { OAuthClients } from './clients';
import type { OAuthError } from './errors';
import { TokenEndpoint } from './token-endpoint';

export type { Authorization, AuthorizationParams } from './authorization';
export { OAuthError, SignInError } from './errors';

/**
 * The authorization server of customer sign-in (OAuth 2.1 for MCP clients), one part per file:
 * client registration and client authentication (clients.ts), the authorization request and its
 * code (authorization.ts), the hosted sign-in and sign-up (accounts.ts), and the token and
 * revocation endpoints (token-endpoint.ts). Access tokens are issued by the token service for one
 * MCP server each (RFC 8707); the proxy verifies them with the published keys.
 */
export class SignInService {
  private readonly clients: OAuthClients;
  private readonly authorizer: Authorizer;
  private readonly accounts: CustomerAccounts;
  private readonly endpoint: TokenEndpoint;

  constructor(
    pool: Pool,
    clock: Clock,
    tokens: TokenService,
    mailer: Mailer,
    documents: ClientMetadataFetcher,
    private readonly addressing: {
      issuer: string;
      proxyBaseDomain: string | undefined;
      /** The resource URL of a server, as its mcpProxyUrl shows it. */
      resourceOf: (subdomain: string) => string;
    },
  ) {
    this.clients = new OAuthClients(pool, clock, documents);
    this.authorizer = new Authorizer(pool, clock, this.clients, addressing);
    this.accounts = new CustomerAccounts(pool, clock, mailer, this.authorizer);
    this.endpoint = new TokenEndpoint(pool, clock, tokens, this.clients);
  }

  /** RFC 8414 authorization server metadata (also served as the OpenID discovery document). */
  metadata() {
    const issuer = this.addressing.issuer;
    return {
      issuer,
      authorization_endpoint: `${issuer}/v1/customer/auth/authorize`,
      token_endpoint: `${issuer}/v1/customer/auth/token`,
      registration_endpoint: `${issuer}/v1/customer/auth/register`,
      revocation_endpoint: `${issuer}/v1/customer/auth/revoke`,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      scopes_supported: [MCP_SCOPE],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
      revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
    };
  }

  /** Dynamic client registration (RFC 7591). */
  register(body: Record<string, unknown>) {
    return this.clients.register(body);
  }

  /** The client and its redirect URI, checked before any error may be redirected to it. */
  checkClient(params: AuthorizationParams) {
    return this.clients.checkClient(params);
  }

  /** The rest of an authorization request; its errors go back on the redirect URI. */
  authorize(params: AuthorizationParams): Promise<Authorization> {
    return this.authorizer.authorize(params);
  }

  /** Where the client's redirect URI sends an error. */
  errorRedirect(redirectUri: string, state: string | undefined, error: OAuthError): string {
    return this.authorizer.errorRedirect(redirectUri, state, error);
  }

  /** Signs in an existing account; answers the redirect carrying a fresh code. */
  login(request: Authorization, credentials: { email: string; password: string; address: string }) {
    return this.accounts.login(request, credentials);
  }

  /** An account's customer, by its email and password (the customer portal's sign-in). */
  verifyAccount(
    tenant: Authorization['tenant'],
    credentials: { email: string; password: string; address: string },
  ): Promise<string> {
    return this.accounts.verify(tenant, credentials);
  }

  /** Starts a sign-up (or a new password) by mailing a one-time code. */
  startSignup(
    request: Authorization,
    details: { email: string; password: string; name?: string | undefined; address: string },
  ) {
    return this.accounts.startSignup(request, details);
  }

  /** Finishes a sign-up with the mailed code. */
  verifySignup(verificationId: string, code: string, address: string) {
    return this.accounts.verifySignup(verificationId, code, address);
  }

  /** The token endpoint: `authorization_code` and `refresh_token`. */
  token(form: Record<string, string>, authorization: string | undefined) {
    return this.endpoint.token(form, authorization);
  }

  /** Token revocation (RFC 7009). */
  revoke(form: Record<string, string>, authorization: string | undefined): Promise<void> {
    return this.endpoint.revoke(form, authorization);
  }
}
