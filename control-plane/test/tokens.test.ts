import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { JWKS_KEY } from '../src/snapshots/format';
import { verifyAccessToken } from '../src/snapshots/jwt';

/** Customer access tokens: issued by the control plane, verifiable with the published key set alone. */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

describe('customer access tokens', () => {
  it('verify with the published key set, and fail when tampered, expired, or signed by an unknown key', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Tokens' });
    const call = (method: 'GET' | 'POST', url: string, body?: object, key: string | null = sandboxKey) =>
      harness.controlPlane.app.inject({
        method,
        url,
        headers: key === null ? {} : { authorization: `Bearer ${key}` },
        ...(body === undefined ? {} : { payload: body }),
      });
    const customer = (await call('POST', '/v1/sdk/customers', { externalRef: 'tok' })).json();
    const product = (await call('POST', '/v1/ui/products', { name: 'P' })).json();
    const issued = await call('POST', `/v1/sdk/customers/tok/tokens`, {
      productRef: product.id,
      expiresInSeconds: 600,
    });
    expect(issued.statusCode).toBe(201);
    const { accessToken, expiresIn } = issued.json();
    expect(expiresIn).toBe(600);

    await harness.controlPlane.tokens.publish();
    const published = JSON.parse((await harness.snapshots.get(JWKS_KEY)) ?? '{}');
    const jwks = (await call('GET', '/.well-known/jwks.json', undefined, null)).json();
    expect(jwks).toEqual(published);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(jwks.keys[0].d).toBeUndefined();

    const now = Math.floor(Date.now() / 1000);
    const ok = verifyAccessToken(accessToken, jwks.keys, now);
    expect(ok).toMatchObject({
      ok: true,
      claims: { sub: customer.reference, prv: provider.id, env: 'sandbox', prd: product.id },
    });
    const [h, p, s] = accessToken.split('.');
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), prv: 'prv_someone_else' }),
    ).toString('base64url');
    expect(verifyAccessToken(`${h}.${forged}.${s}`, jwks.keys, now)).toEqual({
      ok: false,
      reason: 'bad signature',
    });
    expect(verifyAccessToken(accessToken, jwks.keys, now + 601 + 31)).toEqual({
      ok: false,
      reason: 'token expired',
    });
    expect(verifyAccessToken(accessToken, [], now)).toEqual({ ok: false, reason: 'unknown signing key' });
    expect(verifyAccessToken('a.b', jwks.keys, now)).toEqual({ ok: false, reason: 'malformed token' });

    expect((await call('POST', '/v1/sdk/customers/nobody/tokens', {})).statusCode).toBe(404);
    expect((await call('POST', '/v1/sdk/customers/tok/tokens', { expiresInSeconds: 5 })).statusCode).toBe(
      400,
    );
  });
});
