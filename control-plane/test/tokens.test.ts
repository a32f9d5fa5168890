import {
  JWKS_KEY,
  MemorySnapshotStore,
  revocationKey,
  verifyAccessToken,
} from '@mcp-meter/contracts/snapshots';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startTestControlPlane,
  TEST_SECRET_KEY,
  type TestControlPlane,
} from '../../test/helpers/control-plane';
import { systemClock } from '../src/clock';
import { TokenService } from '../src/modules/tokens/service';

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
    expect(published).toEqual({ ...jwks, issuer: 'http://127.0.0.1:8080' });
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(jwks.keys[0].d).toBeUndefined();

    const now = Math.floor(Date.now() / 1000);
    const ok = await verifyAccessToken(accessToken, jwks.keys, now, published.issuer);
    expect(ok).toMatchObject({
      ok: true,
      claims: { sub: customer.reference, prv: provider.id, env: 'sandbox', prd: product.id },
    });
    const [h, p, s] = accessToken.split('.');
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), prv: 'prv_someone_else' }),
    ).toString('base64url');
    expect(await verifyAccessToken(`${h}.${forged}.${s}`, jwks.keys, now)).toEqual({
      ok: false,
      reason: 'bad signature',
    });
    expect(await verifyAccessToken(accessToken, jwks.keys, now + 601 + 31)).toEqual({
      ok: false,
      reason: 'token expired',
    });
    expect(await verifyAccessToken(accessToken, [], now)).toEqual({
      ok: false,
      reason: 'unknown signing key',
    });
    expect(await verifyAccessToken('a.b', jwks.keys, now)).toEqual({ ok: false, reason: 'malformed token' });
    expect(await verifyAccessToken(accessToken, jwks.keys, now, 'https://elsewhere.example')).toEqual({
      ok: false,
      reason: 'wrong issuer: tokens here are issued by https://elsewhere.example',
    });
    // Shapes a hand-written parser tripped on: a JSON null header, empty and non-JSON parts.
    for (const bad of [
      'bnVsbA.e30.AAAA',
      'e30.bnVsbA.AAAA',
      '..',
      'W10.W10.',
      '\u0000.\u0000.\u0000',
      'x'.repeat(10_000),
    ])
      expect((await verifyAccessToken(bad, jwks.keys, now)).ok, bad.slice(0, 20)).toBe(false);
    // An unsigned token (alg none) is refused whatever it claims.
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid: jwks.keys[0].kid })).toString('base64url')}.${p}.`;
    expect(await verifyAccessToken(none, jwks.keys, now)).toEqual({
      ok: false,
      reason: 'unsupported algorithm',
    });

    expect((await call('POST', '/v1/sdk/customers/nobody/tokens', {})).statusCode).toBe(404);
    expect((await call('POST', '/v1/sdk/customers/tok/tokens', { expiresInSeconds: 5 })).statusCode).toBe(
      400,
    );
  });

  it('keeps the signing private key sealed, and revokes tokens when the customer is deleted or on request', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Revoker' });
    const call = (method: 'POST' | 'DELETE', url: string, body?: object) =>
      harness.controlPlane.app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${sandboxKey}` },
        ...(body === undefined ? {} : { payload: body }),
      });
    const customer = (await call('POST', '/v1/sdk/customers', {})).json();
    expect((await call('POST', `/v1/sdk/customers/${customer.reference}/tokens`, {})).statusCode).toBe(201);
    const { rows } = await harness.pool.query<{ private_jwk: unknown; private_jwk_sealed: string | null }>(
      'SELECT private_jwk, private_jwk_sealed FROM signing_keys',
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.private_jwk).toBeNull();
      expect(row.private_jwk_sealed).toMatch(/^v1\./);
    }
    const key = revocationKey(provider.id, 'sandbox', customer.reference);
    expect(await harness.snapshots.get(key)).toBeUndefined();
    const revoked = await call('POST', `/v1/sdk/customers/${customer.reference}/tokens/revoke`);
    expect(revoked.statusCode).toBe(200);
    const first = JSON.parse((await harness.snapshots.get(key)) ?? '{}');
    expect(first).toEqual({ v: 1, before: expect.any(Number) });
    expect((await call('DELETE', `/v1/sdk/customers/${customer.reference}`)).statusCode).toBe(200);
    expect(JSON.parse((await harness.snapshots.get(key)) ?? '{}').before).toBeGreaterThanOrEqual(
      first.before,
    );
    // A flushed store gets the revocation back at the next start.
    await harness.snapshots.delete(key);
    await harness.controlPlane.tokens.publish();
    expect(await harness.snapshots.get(key)).toBeDefined();
  });

  it('tells a control plane that publishes another issuer which one it replaced', async () => {
    const store = new MemorySnapshotStore();
    const at = (issuer: string) =>
      new TokenService(harness.pool, systemClock, store, issuer, TEST_SECRET_KEY);
    expect(await at('https://api.example.com').publish()).toEqual({ replacedIssuer: undefined });
    // A replica with the same PUBLIC_URL replaces nothing; one with another does.
    expect(await at('https://api.example.com').publish()).toEqual({ replacedIssuer: undefined });
    expect(await at('http://10.0.0.7:8080').publish()).toEqual({ replacedIssuer: 'https://api.example.com' });
    expect(JSON.parse((await store.get(JWKS_KEY)) ?? '{}').issuer).toBe('http://10.0.0.7:8080');
  });

  it("signs under each SECRET_KEY with its own key, never retiring another secret's, all verifiable", async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Rekey' });
    const auth = await harness.controlPlane.providers.authenticate(`Bearer ${sandboxKey}`);
    const customer = (
      await harness.controlPlane.app.inject({
        method: 'POST',
        url: '/v1/sdk/customers',
        headers: { authorization: `Bearer ${sandboxKey}` },
        payload: {},
      })
    ).json();
    const other = new TokenService(
      harness.pool,
      systemClock,
      new MemorySnapshotStore(),
      'http://127.0.0.1:8080',
      Buffer.alloc(32, 9),
    );
    const theirs = await other.issue(auth, { customerRef: customer.reference });
    const ours = await harness.controlPlane.tokens.issue(auth, { customerRef: customer.reference });
    const header = (token: string) =>
      JSON.parse(Buffer.from(token.split('.')[0] ?? '', 'base64url').toString());
    expect(header(theirs.accessToken).kid).not.toBe(header(ours.accessToken).kid);
    const { keys } = await harness.controlPlane.tokens.jwks();
    const now = Math.floor(Date.now() / 1000);
    expect((await verifyAccessToken(theirs.accessToken, keys, now)).ok).toBe(true);
    expect((await verifyAccessToken(ours.accessToken, keys, now)).ok).toBe(true);
    // Neither secret retired the other's key: both sign again with the same key.
    const theirsAgain = await other.issue(auth, { customerRef: customer.reference });
    const oursAgain = await harness.controlPlane.tokens.issue(auth, { customerRef: customer.reference });
    expect(header(theirsAgain.accessToken).kid).toBe(header(theirs.accessToken).kid);
    expect(header(oursAgain.accessToken).kid).toBe(header(ours.accessToken).kid);
  });
});
