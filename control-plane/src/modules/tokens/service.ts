import { createHmac, generateKeyPairSync, type JsonWebKey, randomBytes } from 'node:crypto';
import type { SnapshotStore } from '@mcp-meter/contracts/snapshots';
import {
  ACCESS_TOKEN_AUDIENCE,
  type AccessTokenClaims,
  JWKS_KEY,
  type RevocationSnapshot,
  revocationKey,
  revokedGrantKey,
  seal,
  unseal,
} from '@mcp-meter/contracts/snapshots';
import { importJWK, SignJWT } from 'jose';
import type { Clock } from '../../clock';
import { type Pool, type PoolClient, withAdvisoryLock } from '../../db/pool';
import { NotFoundError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { findCustomer } from '../customers/repository';
import { findProduct } from '../products/repository';
import { recentlyRevokedGrants } from '../sign-in/repository';
import {
  claimSigningKey,
  insertSigningKey,
  publicSigningKeys,
  type RevocationRow,
  recentRevocations,
  sealSigningKey,
  upsertRevocation,
  usableSigningKeys,
} from './repository';

/** The longest an access token lives; revocations older than this no longer matter. */
export const MAX_TOKEN_SECONDS = 30 * 86400;

/** How long a hosted sign-in's access token lives: an hour, then the client refreshes it. */
export const SIGN_IN_TOKEN_SECONDS = 3600;

const unixSeconds = (at: Date) => Math.floor(at.getTime() / 1000);

/** The advisory lock under which replicas find or create the signing key (one at a time). */
const SIGNING_KEY_LOCK = 727274002;

/**
 * Issues customer access tokens: ES256 JWTs (signed with jose) the proxy verifies locally with
 * the published key set and issuer. Private keys are stored sealed with SECRET_KEY. A customer's
 * tokens can be revoked (and are, when the customer is deleted): the proxy refuses tokens issued
 * at or before the published revocation time. The hosted OAuth sign-in issues through here too.
 */
export class TokenService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly snapshots: SnapshotStore,
    private readonly issuer: string,
    private readonly secretKey: Buffer,
    /**
     * Without a key of its own SECRET_KEY, the service makes one; a one-off tool (the admin CLI,
     * whose new key the proxies would not know before the next start) refuses instead.
     */
    private readonly withoutOwnKey: 'create' | 'refuse' = 'create',
  ) {
    this.secretId = createHmac('sha256', secretKey)
      .update('mcp-meter signing key owner v1')
      .digest('hex')
      .slice(0, 32);
  }

  /** Names this SECRET_KEY among the keys' owners without revealing it. */
  private readonly secretId: string;

  /** The active signing key's private JWK; the first caller creates it (replicas agree through the advisory lock). */
  private async activeKey(): Promise<{ kid: string; privateJwk: JsonWebKey; created?: true }> {
    return withAdvisoryLock(this.pool, SIGNING_KEY_LOCK, async (client) => {
      for (const row of await usableSigningKeys(client, this.secretId)) {
        if (row.private_jwk_sealed === null) {
          // Written in plain text before keys were sealed: sealed now under this secret, in place.
          const privateJwk = row.private_jwk ?? {};
          await sealSigningKey(client, row.kid, seal(this.secretKey, JSON.stringify(privateJwk)));
          await claimSigningKey(client, row.kid, this.secretId);
          return { kid: row.kid, privateJwk };
        }
        try {
          const privateJwk = JSON.parse(unseal(this.secretKey, row.private_jwk_sealed)) as JsonWebKey;
          if (row.secret_id === null) await claimSigningKey(client, row.kid, this.secretId);
          return { kid: row.kid, privateJwk };
        } catch {
          // Sealed under another SECRET_KEY: that secret's key, left alone for its owner.
        }
      }
      // No key of this secret: a new one, whose public half is published beside the others
      // (tokens signed under another secret keep verifying). A one-off tool refuses instead when
      // keys exist: its secret differs from the service's, and the proxies would not know its key.
      if (this.withoutOwnKey === 'refuse' && (await publicSigningKeys(client)).length > 0)
        throw new Error('the signing keys are sealed under another SECRET_KEY than this one');
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const kid = randomBytes(8).toString('hex');
      const privateJwk = privateKey.export({ format: 'jwk' });
      await insertSigningKey(client, {
        kid,
        sealed: seal(this.secretKey, JSON.stringify(privateJwk)),
        publicJwk: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' },
        secretId: this.secretId,
        at: this.clock.now(),
      });
      return { kid, privateJwk, created: true };
    });
  }

  async jwks(): Promise<{ keys: JsonWebKey[] }> {
    await this.activeKey();
    return { keys: await publicSigningKeys(this.pool) };
  }

  /** Publishes the key set and this issuer; answers the issuer it replaced, when another was published. */
  private async publishKeys(): Promise<string | undefined> {
    const before = await this.snapshots.get(JWKS_KEY);
    await this.snapshots.set(JWKS_KEY, JSON.stringify({ ...(await this.jwks()), issuer: this.issuer }));
    let replaced: unknown;
    try {
      replaced = before === undefined ? undefined : (JSON.parse(before) as { issuer?: unknown }).issuer;
    } catch {
      replaced = undefined; // unreadable: nothing to compare with
    }
    return typeof replaced === 'string' && replaced !== this.issuer ? replaced : undefined;
  }

  /**
   * Writes the key set and issuer where proxies read them, and every revocation that can still
   * matter; called at start (a fresh or flushed store is made whole) and when keys change.
   * `replacedIssuer`: the issuer another control plane had published (its PUBLIC_URL differs),
   * whose tokens the proxies now refuse.
   */
  async publish(): Promise<{ replacedIssuer: string | undefined }> {
    const replacedIssuer = await this.publishKeys();
    const since = new Date(this.clock.now().getTime() - MAX_TOKEN_SECONDS * 1000);
    for (const row of await recentRevocations(this.pool, since)) await this.publishRevocation(row);
    const grantsSince = new Date(this.clock.now().getTime() - SIGN_IN_TOKEN_SECONDS * 1000);
    for (const grant of await recentlyRevokedGrants(this.pool, grantsSince))
      await this.publishGrantRevocation(grant.id, grant.revoked_at);
    return { replacedIssuer };
  }

  private async publishRevocation(row: RevocationRow): Promise<void> {
    const snapshot: RevocationSnapshot = { v: 1, before: unixSeconds(row.revoked_before) };
    await this.snapshots.set(
      revocationKey(row.provider_id, row.environment, row.customer_id),
      JSON.stringify(snapshot),
    );
  }

  /**
   * Revokes every token the customer holds now (tokens issued within the same second too), inside
   * the caller's transaction; `published` then tells the proxies, after the commit.
   */
  async revokeIn(tx: PoolClient, auth: AuthContext, customerId: string): Promise<() => Promise<void>> {
    const row = await upsertRevocation(tx, {
      customer_id: customerId,
      provider_id: auth.providerId,
      environment: auth.environment,
      revoked_before: this.clock.now(),
    });
    return () => this.publishRevocation(row);
  }

  async revoke(auth: AuthContext, customerRef: string) {
    const customer = await findCustomer(this.pool, auth, customerRef);
    if (customer === undefined) throw new NotFoundError('customer_not_found', `No customer ${customerRef}`);
    const client = await this.pool.connect();
    let publish: () => Promise<void>;
    try {
      publish = await this.revokeIn(client, auth, customer.id);
    } finally {
      client.release();
    }
    await publish();
    return { customerRef: customer.id, revokedBefore: this.clock.now().toISOString() };
  }

  /**
   * An access token of a hosted sign-in (RFC 9068 profile, `typ: at+jwt`): for one MCP server's
   * resource URL only (RFC 8707), with the grant's scope, client and id, so revoking the grant
   * refuses it. Short-lived: the client refreshes it.
   */
  async issueForGrant(grant: {
    id: string;
    clientId: string;
    customerId: string;
    providerId: string;
    environment: AuthContext['environment'];
    resource: string;
    scope: string;
    productId: string | null;
  }): Promise<{ accessToken: string; expiresIn: number }> {
    const accessToken = await this.sign({
      typ: 'at+jwt',
      audience: grant.resource,
      subject: grant.customerId,
      expiresIn: SIGN_IN_TOKEN_SECONDS,
      claims: {
        prv: grant.providerId,
        env: grant.environment,
        ...(grant.productId === null ? {} : { prd: grant.productId }),
        scope: grant.scope,
        client_id: grant.clientId,
        sid: grant.id,
      },
    });
    return { accessToken, expiresIn: SIGN_IN_TOKEN_SECONDS };
  }

  /** Signs an access token with the active key (published first when it was made just now). */
  private async sign(token: {
    typ: 'JWT' | 'at+jwt';
    audience: string;
    subject: string;
    expiresIn: number;
    claims: Omit<AccessTokenClaims, 'iss' | 'aud' | 'sub' | 'iat' | 'exp' | 'jti'>;
  }): Promise<string> {
    const key = await this.activeKey();
    // A key made just now (the first, or one replacing a key sealed under another secret) must
    // reach the proxies before its tokens do.
    if (key.created) await this.publishKeys();
    const now = unixSeconds(this.clock.now());
    return new SignJWT({ ...token.claims })
      .setProtectedHeader({ alg: 'ES256', typ: token.typ, kid: key.kid })
      .setIssuer(this.issuer)
      .setAudience(token.audience)
      .setSubject(token.subject)
      .setIssuedAt(now)
      .setExpirationTime(now + token.expiresIn)
      .setJti(randomBytes(12).toString('base64url'))
      .sign(await importJWK({ ...key.privateJwk, alg: 'ES256' }, 'ES256'));
  }

  /** Tells the proxies that every token of the grant issued until `at` is revoked. */
  async publishGrantRevocation(grantId: string, at: Date): Promise<void> {
    const snapshot: RevocationSnapshot = { v: 1, before: unixSeconds(at) };
    await this.snapshots.set(revokedGrantKey(grantId), JSON.stringify(snapshot));
  }

  async issue(
    auth: AuthContext,
    input: { customerRef: string; productRef?: string | undefined; expiresInSeconds?: number | undefined },
  ) {
    const customer = await findCustomer(this.pool, auth, input.customerRef);
    if (customer === undefined)
      throw new NotFoundError('customer_not_found', `No customer ${input.customerRef}`);
    let productId: string | undefined;
    if (input.productRef !== undefined) {
      const product = await findProduct(this.pool, auth, input.productRef);
      if (product === undefined)
        throw new NotFoundError('product_not_found', `No product ${input.productRef}`);
      productId = product.id;
    }
    const expiresIn = Math.min(input.expiresInSeconds ?? 3600, MAX_TOKEN_SECONDS);
    const accessToken = await this.sign({
      typ: 'JWT',
      audience: ACCESS_TOKEN_AUDIENCE,
      subject: customer.id,
      expiresIn,
      claims: {
        prv: auth.providerId,
        env: auth.environment,
        ...(productId === undefined ? {} : { prd: productId }),
      },
    });
    return { accessToken, tokenType: 'Bearer' as const, expiresIn, customerRef: customer.id };
  }
}
