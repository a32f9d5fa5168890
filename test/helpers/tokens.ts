import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { ACCESS_TOKEN_AUDIENCE } from '@mcp-meter/contracts/snapshots';

/**
 * Mints a customer access token the way the control plane's token service does (ES256 JWT with
 * a published key set), for proxy tests that run without a control plane. Publish `jwks` under
 * JWKS_KEY in the snapshot store the proxy reads.
 */
export function tokenIssuer(claims: { sub: string; prv: string; env?: 'sandbox' | 'live' }) {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = randomBytes(4).toString('hex');
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  /** Another token under the same key (a distinct `jti`, so never one the proxy has seen). */
  const mint = (sub = claims.sub) => {
    const now = Math.floor(Date.now() / 1000);
    const input = `${b64({ alg: 'ES256', typ: 'JWT', kid })}.${b64({
      iss: 'test',
      aud: ACCESS_TOKEN_AUDIENCE,
      sub,
      prv: claims.prv,
      env: claims.env ?? 'sandbox',
      iat: now,
      exp: now + 3600,
      jti: randomBytes(6).toString('hex'),
    })}`;
    const signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  };
  return {
    jwks: { keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' }] },
    token: mint(),
    mint,
  };
}
