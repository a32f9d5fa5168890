import { createPublicKey, type JsonWebKey, verify } from 'node:crypto';
import { ACCESS_TOKEN_AUDIENCE, type AccessTokenClaims } from './format';

export type VerifyResult = { ok: true; claims: AccessTokenClaims } | { ok: false; reason: string };

const decode = (part: string): unknown => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));

/**
 * Verifies a customer access token (ES256 JWT) against a published key set: signature,
 * audience, expiry (30 s skew allowed) and claim shapes. Pure: no I/O, so the proxy can run it
 * on every request.
 */
export function verifyAccessToken(
  token: string,
  keys: readonly JsonWebKey[],
  nowSeconds: number,
): VerifyResult {
  const parts = token.split('.');
  if (parts.length !== 3) return { ok: false, reason: 'malformed token' };
  const [headerPart = '', payloadPart = '', signaturePart = ''] = parts;
  let header: { alg?: unknown; kid?: unknown };
  let claims: Partial<AccessTokenClaims>;
  try {
    header = decode(headerPart) as typeof header;
    claims = decode(payloadPart) as typeof claims;
  } catch {
    return { ok: false, reason: 'malformed token' };
  }
  if (header.alg !== 'ES256') return { ok: false, reason: 'unsupported algorithm' };
  const jwk = keys.find((k) => (k as { kid?: string }).kid === header.kid);
  if (jwk === undefined) return { ok: false, reason: 'unknown signing key' };
  const valid = verify(
    'sha256',
    Buffer.from(`${headerPart}.${payloadPart}`),
    { key: createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
    Buffer.from(signaturePart, 'base64url'),
  );
  if (!valid) return { ok: false, reason: 'bad signature' };
  if (claims.aud !== ACCESS_TOKEN_AUDIENCE) return { ok: false, reason: 'wrong audience' };
  if (typeof claims.exp !== 'number' || claims.exp + 30 < nowSeconds)
    return { ok: false, reason: 'token expired' };
  if (typeof claims.iat === 'number' && claims.iat - 30 > nowSeconds)
    return { ok: false, reason: 'token issued in the future' };
  if (
    typeof claims.sub !== 'string' ||
    typeof claims.prv !== 'string' ||
    (claims.env !== 'sandbox' && claims.env !== 'live')
  ) {
    return { ok: false, reason: 'missing claims' };
  }
  return { ok: true, claims: claims as AccessTokenClaims };
}
