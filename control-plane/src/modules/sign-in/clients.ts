import { ID, newId, sameSecret } from '@mcp-meter/contracts/kit';
import { MCP_SCOPE } from '@mcp-meter/contracts/snapshots';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { unixSeconds } from '../events/outbox';
import { ClientMetadataError, type ClientMetadataFetcher, isMetadataDocumentUrl } from './client-metadata';
import { OAuthError } from './errors';
import { redirectUriMatches, redirectUriProblem } from './redirect-uris';
import { type ClientRow, findClient, insertClient } from './repository';
import { newSecret, sha256 } from './secrets';

/**
 * The OAuth clients of customer sign-in: dynamic registration (RFC 7591), clients described by a
 * metadata document at an https client_id, the check of a client and its redirect URI before
 * anything is redirected, and client authentication at the token and revocation endpoints.
 */
export class OAuthClients {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly documents: ClientMetadataFetcher,
  ) {}

  /** Dynamic client registration (RFC 7591): public clients (`none`) and confidential ones. */
  async register(body: Record<string, unknown>) {
    const uris = body.redirect_uris;
    if (!Array.isArray(uris) || uris.length === 0 || uris.length > 20)
      throw new OAuthError('invalid_redirect_uri', 'redirect_uris must list 1 to 20 URIs');
    for (const uri of uris) {
      if (typeof uri !== 'string' || uri.length > 2000)
        throw new OAuthError(
          'invalid_redirect_uri',
          'each redirect URI must be a string of at most 2000 characters',
        );
      const problem = redirectUriProblem(uri);
      if (problem !== undefined) throw new OAuthError('invalid_redirect_uri', `${uri} ${problem}`);
    }
    const method = body.token_endpoint_auth_method ?? 'client_secret_basic';
    if (method !== 'none' && method !== 'client_secret_post' && method !== 'client_secret_basic')
      throw new OAuthError(
        'invalid_client_metadata',
        'token_endpoint_auth_method must be none, client_secret_post or client_secret_basic',
      );
    const grantTypes = body.grant_types ?? ['authorization_code', 'refresh_token'];
    if (
      !Array.isArray(grantTypes) ||
      grantTypes.some((g) => g !== 'authorization_code' && g !== 'refresh_token')
    )
      throw new OAuthError(
        'invalid_client_metadata',
        'grant_types may hold authorization_code and refresh_token',
      );
    const responseTypes = body.response_types ?? ['code'];
    if (!Array.isArray(responseTypes) || responseTypes.some((t) => t !== 'code'))
      throw new OAuthError('invalid_client_metadata', 'response_types may hold code only');
    const applicationType = body.application_type ?? 'web';
    if (applicationType !== 'web' && applicationType !== 'native')
      throw new OAuthError('invalid_client_metadata', 'application_type must be web or native');
    const text = (name: string, max: number): string | null => {
      const value = body[name];
      if (value === undefined || value === null) return null;
      if (typeof value !== 'string' || value.length > max)
        throw new OAuthError(
          'invalid_client_metadata',
          `${name} must be a string of at most ${max} characters`,
        );
      return value;
    };
    const url = (name: string): string | null => {
      const value = text(name, 2000);
      if (value !== null && !/^https:\/\/[^\s]+$/.test(value))
        throw new OAuthError('invalid_client_metadata', `${name} must be an https URL`);
      return value;
    };
    const secret = method === 'none' ? undefined : `cs_${newSecret()}`;
    const at = this.clock.now();
    const row: ClientRow = {
      id: newId(ID.oauthClient),
      secret_hash: secret === undefined ? null : sha256(secret),
      token_endpoint_auth_method: method,
      redirect_uris: uris as string[],
      client_name: text('client_name', 200),
      client_uri: url('client_uri'),
      logo_uri: url('logo_uri'),
      application_type: applicationType,
      created_at: at,
      metadata_expires_at: null,
    };
    await insertClient(this.pool, row);
    return {
      client_id: row.id,
      ...(secret === undefined ? {} : { client_secret: secret, client_secret_expires_at: 0 }),
      client_id_issued_at: unixSeconds(at),
      redirect_uris: row.redirect_uris,
      token_endpoint_auth_method: method,
      grant_types: grantTypes,
      response_types: ['code'],
      application_type: applicationType,
      ...(row.client_name === null ? {} : { client_name: row.client_name }),
      ...(row.client_uri === null ? {} : { client_uri: row.client_uri }),
      ...(row.logo_uri === null ? {} : { logo_uri: row.logo_uri }),
      scope: MCP_SCOPE,
    };
  }

  /**
   * Checks the client and its redirect URI, which decide whether errors may go back to the client
   * at all: these throw `OAuthError` to be shown on the page, never redirected (an unknown client
   * or URI would make the server an open redirector).
   */
  async checkClient(params: {
    client_id?: string | undefined;
    redirect_uri?: string | undefined;
  }): Promise<{ client: ClientRow; redirectUri: string }> {
    if (params.client_id === undefined || params.client_id === '')
      throw new OAuthError('invalid_request', 'client_id is missing');
    const client = await this.clientOf(params.client_id);
    if (client === undefined)
      throw new OAuthError('invalid_client', 'This application is not registered here');
    const redirectUri = params.redirect_uri;
    if (redirectUri === undefined || !redirectUriMatches(client.redirect_uris, redirectUri))
      throw new OAuthError('invalid_request', 'redirect_uri is not one the application registered');
    return { client, redirectUri };
  }

  /**
   * The client an authorization request names: a registered one, or the one described by the
   * metadata document at an https client_id, fetched when no fresh copy is cached. A document that
   * cannot be used is an `invalid_client` shown on the page.
   */
  private async clientOf(clientId: string): Promise<ClientRow | undefined> {
    const cached = await findClient(this.pool, clientId);
    if (!isMetadataDocumentUrl(clientId)) return cached;
    const now = this.clock.now();
    if (cached?.metadata_expires_at != null && cached.metadata_expires_at > now) return cached;
    let fetched: Awaited<ReturnType<ClientMetadataFetcher['fetch']>>;
    try {
      fetched = await this.documents.fetch(clientId);
    } catch (error) {
      if (error instanceof ClientMetadataError) throw new OAuthError('invalid_client', error.message);
      throw error;
    }
    const row: ClientRow = {
      id: clientId,
      secret_hash: null,
      token_endpoint_auth_method: 'none',
      ...fetched.metadata,
      created_at: cached?.created_at ?? now,
      metadata_expires_at: new Date(now.getTime() + fetched.cacheMs),
    };
    await insertClient(this.pool, row);
    return row;
  }

  /**
   * Client authentication at the token and revocation endpoints, by the method the client
   * registered: `none` (client_id only), `client_secret_post` or `client_secret_basic`.
   */
  async authenticate(form: Record<string, string>, authorization: string | undefined) {
    let id = form.client_id;
    let secret = form.client_secret;
    let basic = false;
    if (authorization !== undefined && /^basic /i.test(authorization)) {
      const decoded = Buffer.from(authorization.slice(6).trim(), 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) throw new OAuthError('invalid_client', 'Malformed Basic credentials', 401);
      try {
        id = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
        secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
      } catch {
        throw new OAuthError('invalid_client', 'Malformed Basic credentials', 401);
      }
      basic = true;
    }
    if (id === undefined || id === '') throw new OAuthError('invalid_client', 'client_id is missing', 401);
    const client = await findClient(this.pool, id);
    if (client === undefined) throw new OAuthError('invalid_client', 'Unknown client', 401);
    const method = client.token_endpoint_auth_method;
    if (method === 'none') {
      if (secret !== undefined || basic)
        throw new OAuthError('invalid_client', 'This client is public and has no secret', 401);
      return client;
    }
    if ((method === 'client_secret_basic') !== basic || secret === undefined || client.secret_hash === null)
      throw new OAuthError('invalid_client', `Authenticate with ${method}`, 401);
    if (!sameSecret(sha256(secret), client.secret_hash))
      throw new OAuthError('invalid_client', 'Wrong client secret', 401);
    return client;
  }
}
