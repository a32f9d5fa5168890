import type { JsonWebKey } from 'node:crypto';
import {
  ACCESS_TOKEN_AUDIENCE,
  type AccessTokenClaims,
  JWKS_KEY,
  MCP_SCOPE,
  type McpServerSnapshot,
  type RevocationSnapshot,
  type SnapshotStore,
  subdomainOfResource,
  type VerifyResult,
  verifyAccessToken,
} from '@mcp-meter/contracts/snapshots';
import { type RevocationDirectory, SnapshotUnavailableError } from './directory';

type VerifiedToken = Extract<VerifyResult, { ok: true }>;
type Revocation = RevocationSnapshot | undefined;

/** A revocation entry the store could not give: none known (the token is judged on its signature). */
async function unlessUnreadable(entry: Revocation | Promise<Revocation>): Promise<Revocation> {
  try {
    return await entry;
  } catch (error) {
    if (!(error instanceof SnapshotUnavailableError)) throw error;
    return undefined;
  }
}

/** Refused when the customer's tokens, or the token's grant, were revoked at or after its issue. */
function judgeRevocation(verified: VerifiedToken, customer: Revocation, grant: Revocation): VerifyResult {
  if (customer !== undefined && verified.claims.iat <= customer.before) return TOKEN_REVOKED;
  if (grant !== undefined && verified.claims.iat <= grant.before) return TOKEN_REVOKED;
  return verified;
}

/** How much of a header's end keys the verified tokens. */
const VERIFIED_KEY_LENGTH = 32;

const TOKEN_REVOKED: VerifyResult = Object.freeze({ ok: false, reason: 'token revoked' });

/**
 * Verifies customer access tokens locally: the key set comes from the snapshot store (cached,
 * refetched when a token names an unknown key), and verified tokens are remembered (by the
 * Authorization header that carried them) until they expire, so a call costs a map lookup
 * rather than a signature check.
 */
export class TokenVerifier {
  private keys: JsonWebKey[] = [];
  /** The `iss` tokens must carry, as the control plane published it with the keys. */
  private issuer_: string | undefined;
  private keysFetchedAt = 0;
  /**
   * Verified tokens by the last characters of the header that carried them (a part of the
   * token's signature), each with that whole header to compare: a new header string is hashed
   * character by character to be looked up, about 0.7 µs for a 440-character header, where its
   * end alone is a tenth of that. Two headers sharing an end take turns in one entry.
   */
  private readonly verified = new Map<string, { authorization: string; token: VerifiedToken }>();

  constructor(
    private readonly store: SnapshotStore,
    private readonly keysTtlMs: number,
    private readonly revocations: RevocationDirectory,
  ) {}

  /**
   * The published keys. When the store cannot be read, a routine refresh keeps the keys it has;
   * a forced one (a token names a key not known here) cannot tell a new key from a bad token, so
   * it reports the store unavailable rather than refusing a token that may be good.
   */
  private async keySet(force: boolean): Promise<JsonWebKey[]> {
    if (force || Date.now() - this.keysFetchedAt > this.keysTtlMs) {
      let raw: string | undefined;
      try {
        raw = await this.store.get(JWKS_KEY);
      } catch (error) {
        if (force || this.keysFetchedAt === 0) throw new SnapshotUnavailableError(error);
        return this.keys;
      }
      const published =
        raw === undefined ? {} : (JSON.parse(raw) as { keys?: JsonWebKey[]; issuer?: string });
      this.keys = published.keys ?? [];
      this.issuer_ = typeof published.issuer === 'string' ? published.issuer : undefined;
      this.keysFetchedAt = Date.now();
    }
    return this.keys;
  }

  /**
   * Reads the key set before the proxy takes traffic, retrying while the store connects; gives up
   * quietly after `timeoutMs` (the first calls then read it, or get a retry-shortly answer).
   */
  async warm(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.keySet(true);
        return true;
      } catch {
        if (Date.now() >= deadline) return false;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  /**
   * The token's own validity (signature, issuer, audience, expiry, revocation), before any server
   * is looked up. Synchronous for a token verified before whose revocation entries are cached
   * (nearly every call); a promise when a signature must be checked or the store read.
   */
  verify(authorization: string): VerifyResult | Promise<VerifyResult> {
    // Remembered by the header as it came: a client sends the same one call after call.
    const known = this.verified.get(authorization.slice(-VERIFIED_KEY_LENGTH));
    if (
      known === undefined ||
      known.authorization !== authorization ||
      known.token.claims.exp + 30 < Math.floor(Date.now() / 1000)
    )
      return this.verifyToken(authorization);
    return this.unlessRevoked(known.token);
  }

  private async verifyToken(authorization: string): Promise<VerifyResult> {
    const now = Math.floor(Date.now() / 1000);
    const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
    const token = match?.[1];
    if (token === undefined) return { ok: false, reason: 'missing bearer token' };
    let result = await verifyAccessToken(token, await this.keySet(false), now, this.issuer_);
    if (!result.ok && result.reason === 'unknown signing key')
      result = await verifyAccessToken(token, await this.keySet(true), now, this.issuer_);
    if (!result.ok) return result;
    // Bounded: a flood of distinct tokens costs verification time, never unbounded memory.
    if (this.verified.size >= 10_000) this.verified.clear();
    this.verified.set(authorization.slice(-VERIFIED_KEY_LENGTH), { authorization, token: result });
    return this.unlessRevoked(result);
  }

  /**
   * Revocation is read on every call (a cache hit): a verified token stays remembered, but a
   * deleted customer's tokens stop working within the snapshot TTL, at once with pub/sub. While
   * the store cannot be read, no revocation can be published either: the token is judged on its
   * signature, as it was before the outage.
   */
  private unlessRevoked(verified: VerifiedToken): VerifyResult | Promise<VerifyResult> {
    const revoked = this.revocations.lookup(verified.claims);
    const grantRevoked = this.revocations.lookupGrant(verified.claims);
    if (revoked instanceof Promise || grantRevoked instanceof Promise)
      return Promise.all([unlessUnreadable(revoked), unlessUnreadable(grantRevoked)]).then(
        ([customer, grantEntry]) => judgeRevocation(verified, customer, grantEntry),
      );
    return judgeRevocation(verified, revoked, grantRevoked);
  }
  /** The authorization server that issues the tokens, as published with the keys. */
  async issuer(): Promise<string | undefined> {
    await this.keySet(false);
    // Read before the control plane first published its keys: look again rather than wait a TTL.
    if (this.issuer_ === undefined) await this.keySet(true);
    return this.issuer_;
  }

  /**
   * What a valid token may do with a server: `foreign` for another provider's or environment's
   * server (answered as if it did not exist, so tokens cannot map other providers' servers),
   * `insufficient_scope` for a sign-in token without the MCP scope, a reason when the token is
   * for another server (a sign-in token names one resource, RFC 8707) or product, or undefined
   * when it opens the server.
   */
  static access(
    claims: AccessTokenClaims,
    server: McpServerSnapshot,
    baseDomain: string | undefined,
  ): 'foreign' | 'insufficient_scope' | string | undefined {
    if (claims.prv !== server.providerId || claims.env !== server.environment) return 'foreign';
    if (claims.aud !== ACCESS_TOKEN_AUDIENCE) {
      if (subdomainOfResource(claims.aud, baseDomain) !== server.subdomain)
        return 'token is for another MCP server';
      if (!(claims.scope ?? '').split(' ').includes(MCP_SCOPE)) return 'insufficient_scope';
    }
    if (claims.prd !== undefined && server.productId !== null && claims.prd !== server.productId)
      return 'token is for another product';
    return undefined;
  }
}
