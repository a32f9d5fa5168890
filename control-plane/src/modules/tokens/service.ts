import { createPrivateKey, generateKeyPairSync, type JsonWebKey, randomBytes, sign } from 'node:crypto';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { NotFoundError } from '../../errors';
import { ACCESS_TOKEN_AUDIENCE, type AccessTokenClaims, JWKS_KEY } from '../../snapshots/format';
import type { SnapshotStore } from '../../snapshots/store';
import { findCustomer } from '../customers/repository';
import { findProduct } from '../products/repository';
import type { AuthContext } from '../providers/service';

interface KeyRow {
  kid: string;
  private_jwk: JsonWebKey;
  public_jwk: JsonWebKey;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/**
 * Issues customer access tokens: ES256 JWTs the proxy verifies locally with the published key
 * set. The hosted OAuth sign-in (a later issue) issues through this same service.
 */
export class TokenService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly snapshots: SnapshotStore,
    private readonly issuer: string,
  ) {}

  /** The active signing key; the first caller creates it (replicas agree through the advisory lock). */
  private async activeKey(): Promise<KeyRow> {
    const client = await this.pool.connect();
    try {
      await client.query('SELECT pg_advisory_lock(727274002)');
      const { rows } = await client.query<KeyRow>(
        'SELECT * FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 1',
      );
      if (rows[0] !== undefined) return rows[0];
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const kid = randomBytes(8).toString('hex');
      const publicJwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' };
      const row = { kid, private_jwk: privateKey.export({ format: 'jwk' }), public_jwk: publicJwk };
      await client.query(
        'INSERT INTO signing_keys (kid, algorithm, private_jwk, public_jwk, created_at) VALUES ($1, $2, $3, $4, $5)',
        [kid, 'ES256', row.private_jwk, row.public_jwk, this.clock.now()],
      );
      return row;
    } finally {
      await client.query('SELECT pg_advisory_unlock(727274002)').catch(() => undefined);
      client.release();
    }
  }

  async jwks(): Promise<{ keys: JsonWebKey[] }> {
    await this.activeKey();
    const { rows } = await this.pool.query<{ public_jwk: JsonWebKey }>(
      'SELECT public_jwk FROM signing_keys ORDER BY created_at',
    );
    return { keys: rows.map((r) => r.public_jwk) };
  }

  /** Writes the key set where proxies read it; called at start and whenever keys change. */
  async publish(): Promise<void> {
    await this.snapshots.set(JWKS_KEY, JSON.stringify(await this.jwks()));
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
    const key = await this.activeKey();
    const now = Math.floor(this.clock.now().getTime() / 1000);
    const expiresIn = input.expiresInSeconds ?? 3600;
    const claims: AccessTokenClaims = {
      iss: this.issuer,
      aud: ACCESS_TOKEN_AUDIENCE,
      sub: customer.id,
      prv: auth.providerId,
      env: auth.environment,
      ...(productId === undefined ? {} : { prd: productId }),
      iat: now,
      exp: now + expiresIn,
      jti: randomBytes(12).toString('base64url'),
    };
    const signingInput = `${b64({ alg: 'ES256', typ: 'JWT', kid: key.kid })}.${b64(claims)}`;
    const signature = sign('sha256', Buffer.from(signingInput), {
      key: createPrivateKey({ key: key.private_jwk, format: 'jwk' }),
      dsaEncoding: 'ieee-p1363',
    });
    return {
      accessToken: `${signingInput}.${signature.toString('base64url')}`,
      tokenType: 'Bearer' as const,
      expiresIn,
      customerRef: customer.id,
    };
  }
}
