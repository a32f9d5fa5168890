import { createHash, randomBytes, randomInt } from 'node:crypto';
import { ID, newId, sameSecret } from '@mcp-meter/contracts/kit';
import { MCP_SCOPE, subdomainOfResource } from '@mcp-meter/contracts/snapshots';
import type { Clock } from '../../clock';
import { inTransaction, type Pool } from '../../db/pool';
import { DomainError } from '../../errors';
import type { Mailer } from '../../mail';
import { createCustomerIn } from '../customers/service';
import { unixSeconds } from '../events/outbox';
import { getProvider } from '../providers/repository';
import type { TokenService } from '../tokens/service';
import { ClientMetadataError, type ClientMetadataFetcher, isMetadataDocumentUrl } from './client-metadata';
import { hashPassword, verifyPassword } from './passwords';
import { redirectUriMatches, redirectUriProblem } from './redirect-uris';
import {
  accountOfEmail,
  attemptVerification,
  type ClientRow,
  clearFailures,
  findClient,
  findLiveGrant,
  findLogin,
  findServerBySubdomain,
  grantOfRefreshToken,
  insertClient,
  insertCode,
  insertGrant,
  insertLogin,
  insertRefreshToken,
  insertVerification,
  type LiveGrant,
  lockEmail,
  releaseAttempts,
  reserveAttempts,
  revokeGrant,
  spendCode,
  spendRefreshToken,
  updateLoginPassword,
  useVerification,
} from './repository';

/** An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 6750): answered as `{error, error_description}`. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
  }
}

/**
 * A sign-in the hosted page or the JSON login could not complete, in the API's error vocabulary
 * (its status comes from ERROR_STATUS); a throttled one says when to try again.
 */
export class SignInError extends DomainError {
  constructor(
    override readonly code:
      | 'invalid_credentials'
      | 'too_many_attempts'
      | 'weak_password'
      | 'invalid_verification_code'
      | 'verification_expired'
      | 'verification_not_found'
      | 'mail_unavailable',
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(code, message);
  }
}

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
  provider: { name: string; logoUrl: string | null };
}

const CODE_TTL_MS = 60_000;
const REFRESH_TTL_MS = 30 * 86400_000;
/** Sign-in failures counted per account and per address within this window. */
const FAILURE_WINDOW_MS = 15 * 60_000;
const MAX_FAILURES_PER_ACCOUNT = 5;
const MAX_FAILURES_PER_ADDRESS = 30;
/** Codes mailed to one address of a tenant within the window: bounds mail sent to someone else's inbox. */
const MAX_CODES_PER_EMAIL = 5;
const VERIFICATION_TTL_MS = 10 * 60_000;
const MAX_CODE_ATTEMPTS = 5;
const PKCE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');
const token = () => randomBytes(32).toString('base64url');
const normaliseEmail = (email: string) => email.trim().toLowerCase();
/** The throttle key of failed sign-ins to one account (an email of one provider and environment). */
const accountKey = (tenant: { providerId: string; environment: string }, email: string) =>
  `account:${tenant.providerId}:${tenant.environment}:${email}`;

/** The parameters that resume an authorization request (as `authorize` reads them). */
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
 * The authorization server of customer sign-in (OAuth 2.1 for MCP clients): client registration
 * (RFC 7591), the authorization request and the hosted sign-in, codes with PKCE S256, rotating
 * refresh tokens with reuse detection, and revocation (RFC 7009). Access tokens are issued by the
 * token service for one MCP server each (RFC 8707); the proxy verifies them with the published keys.
 */
export class SignInService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly tokens: TokenService,
    private readonly mailer: Mailer,
    private readonly documents: ClientMetadataFetcher,
    private readonly addressing: {
      issuer: string;
      proxyBaseDomain: string | undefined;
      /** The resource URL of a server, as its mcpProxyUrl shows it. */
      resourceOf: (subdomain: string) => string;
    },
  ) {}

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
    const secret = method === 'none' ? undefined : `cs_${token()}`;
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
  async checkClient(params: AuthorizationParams): Promise<{ client: ClientRow; redirectUri: string }> {
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
   * The rest of an authorization request, once the client and redirect URI are known good: these
   * errors go back to the client on its redirect URI (RFC 6749 §4.1.2.1).
   */
  async authorize(params: AuthorizationParams): Promise<Authorization> {
    const { client, redirectUri } = await this.checkClient(params);
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
      provider: { name: provider.displayName, logoUrl: provider.logoUrl },
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

  /** Signs in an existing account and answers the redirect carrying a fresh code. */
  async login(request: Authorization, credentials: { email: string; password: string; address: string }) {
    const email = normaliseEmail(credentials.email);
    const account = accountKey(request.tenant, email);
    const addressKey = `address:${credentials.address}`;
    // Counted before the password is checked: a wrong one keeps the count, a right one clears it.
    await this.reserve(account, addressKey);
    const login = await findLogin(this.pool, request.tenant, email);
    // The same work whether or not the account exists: the answer and its timing tell nothing.
    const ok = await verifyPassword(login?.password_hash, credentials.password);
    if (login === undefined || !ok)
      throw new SignInError('invalid_credentials', 'The email or password is not right');
    await clearFailures(this.pool, account);
    await releaseAttempts(this.pool, [addressKey]);
    return { redirectUrl: await this.codeRedirect(request, login.customer_id) };
  }

  /**
   * Starts a sign-up (or a new password: the same thing for the person asking) by mailing a
   * one-time code to the address. Nothing is created until the code comes back, so the answer is
   * the same whether the email is new, belongs to a customer the provider created through the API,
   * or already has an account: sign-up tells nobody which addresses are known, and only the
   * person who reads the inbox can attach a password to it.
   */
  async startSignup(
    request: Authorization,
    details: { email: string; password: string; name?: string | undefined; address: string },
  ): Promise<{ verificationId: string; email: string; expiresAt: string }> {
    const email = normaliseEmail(details.email);
    const mailKey = `mail:${request.tenant.providerId}:${request.tenant.environment}:${email}`;
    const addressKey = `address:${details.address}`;
    if (details.password.length < 8)
      throw new SignInError('weak_password', 'Choose a password of at least 8 characters');
    // A code mailed counts against the address's mail; the address is checked, not counted.
    await this.reserve(mailKey, addressKey);
    await releaseAttempts(this.pool, [addressKey]);
    const at = this.clock.now();
    const id = newId(ID.emailVerification);
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const expiresAt = new Date(at.getTime() + VERIFICATION_TTL_MS);
    await insertVerification(this.pool, {
      id,
      provider_id: request.tenant.providerId,
      environment: request.tenant.environment,
      email,
      name: details.name ?? null,
      password_hash: await hashPassword(details.password),
      request: requestParams(request),
      code_hash: sha256(`${id}:${code}`),
      expires_at: expiresAt,
      created_at: at,
    });
    try {
      await this.mailer.send({
        to: email,
        subject: `${code} is your ${request.provider.name} code`,
        text: [
          `Your code to sign in to ${request.provider.name} (${request.server.name}) is:`,
          '',
          `    ${code}`,
          '',
          'It works once, for 10 minutes. If you did not ask for it, ignore this message:',
          'nothing changes without the code.',
        ].join('\n'),
      });
    } catch {
      throw new SignInError(
        'mail_unavailable',
        'We could not send the code just now; try again in a minute',
        60,
      );
    }
    return { verificationId: id, email, expiresAt: expiresAt.toISOString() };
  }

  /**
   * Finishes a sign-up with the mailed code: the address is proven, so its password is set. The
   * customer is the one with an account for the email, else the one the provider created with it,
   * else a new one (`customer.created` with the server's product, spec 6.5 rule 1). Answers the
   * redirect of the authorization request the sign-up started from, with a fresh code.
   */
  async verifySignup(verificationId: string, code: string, address: string) {
    const addressKey = `address:${address}`;
    // Counted before the code is checked; given back once it proves right.
    await this.reserve(addressKey);
    const now = this.clock.now();
    const row = await attemptVerification(this.pool, verificationId, now, MAX_CODE_ATTEMPTS);
    if (row === undefined)
      throw new SignInError('verification_not_found', 'This sign-up is not known; start again');
    if (row === 'closed')
      throw new SignInError('verification_expired', 'This code expired or was used up; start again');
    if (!/^\d{6}$/.test(code) || !sameSecret(sha256(`${row.id}:${code}`), row.code_hash)) {
      const left = MAX_CODE_ATTEMPTS - row.attempts;
      throw new SignInError(
        'invalid_verification_code',
        left > 0
          ? `That code is not right; ${left} ${left === 1 ? 'try' : 'tries'} left`
          : 'That code is not right; start again',
      );
    }
    // The client and server are checked again: either may have gone while the mail travelled.
    let request: Authorization;
    try {
      request = await this.authorize(row.request);
    } catch (error) {
      if (error instanceof OAuthError)
        throw new SignInError('verification_expired', 'This sign-in request is no longer valid; start again');
      throw error;
    }
    const tenant = { providerId: row.provider_id, environment: row.environment };
    const customerId = await inTransaction(this.pool, async (tx) => {
      if (!(await useVerification(tx, row.id, now))) return undefined;
      // One sign-up per email at a time: the second waits, then finds the first's account.
      await lockEmail(tx, tenant, row.email);
      const account = await accountOfEmail(tx, tenant, row.email);
      if (account?.hasLogin) {
        await updateLoginPassword(tx, account.customerId, row.password_hash, now);
        return account.customerId;
      }
      const id =
        account?.customerId ??
        (
          await createCustomerIn(
            tx,
            tenant,
            { name: row.name ?? undefined, email: row.email },
            { at: now, productId: request.server.productId },
          )
        )?.id;
      if (id === undefined) throw new Error('a customer without externalRef was not inserted');
      await insertLogin(tx, {
        customerId: id,
        tenant,
        email: row.email,
        passwordHash: row.password_hash,
        at: now,
      });
      return id;
    });
    if (customerId === undefined)
      throw new SignInError('verification_expired', 'This code was already used; start again');
    await clearFailures(this.pool, accountKey(tenant, row.email));
    await releaseAttempts(this.pool, [addressKey]);
    return { redirectUrl: await this.codeRedirect(request, customerId) };
  }

  /**
   * Reserves an attempt under each key before the attempt is judged (one guarded statement), or
   * refuses with 429 when any key has used its window's attempts; a refused attempt counts nowhere.
   */
  private async reserve(...keys: string[]): Promise<void> {
    const now = this.clock.now();
    const limitOf = (key: string) =>
      key.startsWith('account:')
        ? MAX_FAILURES_PER_ACCOUNT
        : key.startsWith('mail:')
          ? MAX_CODES_PER_EMAIL
          : MAX_FAILURES_PER_ADDRESS;
    const refused = await reserveAttempts(
      this.pool,
      keys.map((key) => ({ key, limit: limitOf(key) })),
      now,
      FAILURE_WINDOW_MS,
    );
    if (refused.length === 0) return;
    const until = Math.max(...refused.map((r) => r.windowEnds.getTime()));
    throw new SignInError(
      'too_many_attempts',
      'Too many attempts; wait a few minutes and try again',
      Math.max(1, Math.ceil((until - now.getTime()) / 1000)),
    );
  }

  /** A new grant and its code; the redirect URI with `code`, `state` and `iss`. */
  private async codeRedirect(request: Authorization, customerId: string): Promise<string> {
    const code = token();
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

  /**
   * Client authentication at the token and revocation endpoints, by the method the client
   * registered: `none` (client_id only), `client_secret_post` or `client_secret_basic`.
   */
  private async authenticateClient(form: Record<string, string>, authorization: string | undefined) {
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

  /** The token endpoint (spec 4.2): `authorization_code` and `refresh_token`. */
  async token(form: Record<string, string>, authorization: string | undefined) {
    const client = await this.authenticateClient(form, authorization);
    if (form.grant_type === 'authorization_code') return this.exchangeCode(client, form);
    if (form.grant_type === 'refresh_token') return this.refresh(client, form);
    throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
  }

  private async exchangeCode(client: ClientRow, form: Record<string, string>) {
    const code = form.code;
    if (code === undefined || code === '') throw new OAuthError('invalid_request', 'code is missing');
    const verifier = form.code_verifier;
    if (verifier === undefined || !PKCE_VERIFIER.test(verifier))
      throw new OAuthError('invalid_request', 'code_verifier must be 43 to 128 unreserved characters');
    const now = this.clock.now();
    const result = await spendCode(this.pool, sha256(code), now);
    if (result === undefined) throw new OAuthError('invalid_grant', 'Unknown authorization code');
    if ('used' in result) {
      // A code presented twice was intercepted or replayed: what it issued is revoked (RFC 6749 §4.1.2).
      await this.revokeGrant(result.used.grant_id, 'authorization code reused');
      throw new OAuthError('invalid_grant', 'This authorization code was already used');
    }
    const spent = result.spent;
    if (spent.expires_at <= now) throw new OAuthError('invalid_grant', 'The authorization code expired');
    const grant = await findLiveGrant(this.pool, spent.grant_id);
    if (grant === undefined)
      throw new OAuthError('invalid_grant', 'The sign-in behind this code was revoked');
    if (grant.client_id !== client.id)
      throw new OAuthError('invalid_grant', 'The code was issued to another client');
    if (form.redirect_uri !== spent.redirect_uri)
      throw new OAuthError('invalid_grant', 'redirect_uri differs from the authorization request');
    if (!sameSecret(sha256(verifier), spent.code_challenge))
      throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge');
    if (form.resource !== undefined && form.resource !== grant.resource)
      throw new OAuthError('invalid_target', 'resource differs from the authorization request');
    return this.issue(grant);
  }

  private async refresh(client: ClientRow, form: Record<string, string>) {
    const presented = form.refresh_token;
    if (presented === undefined || presented === '')
      throw new OAuthError('invalid_request', 'refresh_token is missing');
    const result = await spendRefreshToken(this.pool, sha256(presented), this.clock.now());
    if (result === undefined) throw new OAuthError('invalid_grant', 'Unknown refresh token');
    if ('reused' in result) {
      // Rotation: a used refresh token presented again means two parties hold the family.
      await this.revokeGrant(result.reused, 'refresh token reused');
      throw new OAuthError('invalid_grant', 'This refresh token was already used; sign in again');
    }
    if ('expired' in result)
      throw new OAuthError('invalid_grant', 'The refresh token expired; sign in again');
    const grant = await findLiveGrant(this.pool, result.grantId);
    if (grant === undefined) throw new OAuthError('invalid_grant', 'This sign-in was revoked; sign in again');
    if (grant.client_id !== client.id)
      throw new OAuthError('invalid_grant', 'The refresh token was issued to another client');
    if (form.scope?.split(' ').some((s) => s !== '' && !grant.scope.split(' ').includes(s)))
      throw new OAuthError('invalid_scope', 'A refresh cannot widen the scope');
    if (form.resource !== undefined && form.resource !== grant.resource)
      throw new OAuthError('invalid_target', 'resource differs from the sign-in');
    return this.issue(grant);
  }

  private async issue(grant: LiveGrant) {
    const refreshToken = token();
    const at = this.clock.now();
    await insertRefreshToken(this.pool, {
      tokenHash: sha256(refreshToken),
      grantId: grant.id,
      expiresAt: new Date(at.getTime() + REFRESH_TTL_MS),
      at,
    });
    const { accessToken, expiresIn } = await this.tokens.issueForGrant({
      id: grant.id,
      clientId: grant.client_id,
      customerId: grant.customer_id,
      providerId: grant.provider_id,
      environment: grant.environment,
      resource: grant.resource,
      scope: grant.scope,
      productId: grant.product_id,
    });
    return {
      access_token: accessToken,
      token_type: 'Bearer' as const,
      expires_in: expiresIn,
      refresh_token: refreshToken,
      scope: grant.scope,
    };
  }

  /**
   * Token revocation (RFC 7009): a refresh token revokes its whole grant (and so the access tokens
   * issued under it); an access token cannot be looked up here and is answered 200 like any
   * unknown token. Only the client the token was issued to may revoke it.
   */
  async revoke(form: Record<string, string>, authorization: string | undefined): Promise<void> {
    const client = await this.authenticateClient(form, authorization);
    const presented = form.token;
    if (presented === undefined || presented === '')
      throw new OAuthError('invalid_request', 'token is missing');
    const grantId = await grantOfRefreshToken(this.pool, sha256(presented));
    if (grantId === undefined) return;
    const grant = await findLiveGrant(this.pool, grantId);
    if (grant === undefined || grant.client_id !== client.id) return;
    await this.revokeGrant(grantId, 'revoked by the client');
  }

  private async revokeGrant(grantId: string, reason: string): Promise<void> {
    const at = this.clock.now();
    if (await revokeGrant(this.pool, grantId, reason, at))
      await this.tokens.publishGrantRevocation(grantId, at);
  }
}
