import { sameSecret } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import type { TokenService } from '../tokens/service';
import type { OAuthClients } from './clients';
import { OAuthError } from './errors';
import {
  type ClientRow,
  findLiveGrant,
  grantOfRefreshToken,
  insertRefreshToken,
  type LiveGrant,
  revokeGrant,
  spendCode,
  spendRefreshToken,
} from './repository';
import { newSecret, sha256 } from './secrets';

const REFRESH_TTL_MS = 30 * 86400_000;
const PKCE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/**
 * The token and revocation endpoints: a code exchanged once (with its PKCE verifier) for an
 * access token and a refresh token, refresh tokens rotated with reuse detection, and revocation
 * (RFC 7009). Access tokens are issued by the token service for one MCP server each (RFC 8707).
 */
export class TokenEndpoint {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly tokens: TokenService,
    private readonly clients: OAuthClients,
  ) {}

  /** The token endpoint (spec 4.2): `authorization_code` and `refresh_token`. */
  async token(form: Record<string, string>, authorization: string | undefined) {
    const client = await this.clients.authenticate(form, authorization);
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
    const refreshToken = newSecret();
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
    const client = await this.clients.authenticate(form, authorization);
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
