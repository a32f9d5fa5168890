import type { JsonWebKey } from 'node:crypto';
import { createLocalJWKSet, errors, type JSONWebKeySet, jwtVerify } from 'jose';
import { ACCESS_TOKEN_AUDIENCE, type AccessTokenClaims } from './format';

export type VerifyResult = { ok: true; claims: AccessTokenClaims } | { ok: false; reason: string };

/** One key-set resolver per published key list (the proxy keeps the list until it changes). */
const keySets = new WeakMap<readonly JsonWebKey[], ReturnType<typeof createLocalJWKSet>>();
const keySetOf = (keys: readonly JsonWebKey[]) => {
  let set = keySets.get(keys);
  if (set === undefined) {
    set = createLocalJWKSet({ keys: keys as JSONWebKeySet['keys'] });
    keySets.set(keys, set);
  }
  return set;
};

const reasonOf = (error: unknown, issuer?: string): string => {
  if (error instanceof errors.JWKSNoMatchingKey) return 'unknown signing key';
  if (error instanceof errors.JWTExpired) return 'token expired';
  if (error instanceof errors.JOSEAlgNotAllowed) return 'unsupported algorithm';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'bad signature';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return 'wrong audience';
    // Named, so a token minted for another address (a CLI that did not know the port) says which.
    if (error.claim === 'iss')
      return issuer === undefined ? 'wrong issuer' : `wrong issuer: tokens here are issued by ${issuer}`;
    if (error.claim === 'iat' || error.claim === 'nbf') return 'token issued in the future';
    return 'missing claims';
  }
  return 'malformed token';
};

/**
 * Verifies a customer access token (an ES256 JWT, through jose) against a published key set:
 * signature, issuer (when the key set names one), expiry with 30 s of skew, an audience of the
 * proxy's (a minted token) or a resource URL (a sign-in token, matched to its server by the
 * proxy), and the claims the proxy relies on. No I/O, so the proxy can run it on every new token.
 */
export async function verifyAccessToken(
  token: string,
  keys: readonly JsonWebKey[],
  nowSeconds: number,
  issuer?: string,
): Promise<VerifyResult> {
  try {
    // The audience is checked below: the provider's own audience, or one server's resource URL,
    // whose server the proxy matches once it knows which server is called.
    const { payload } = await jwtVerify(token, keySetOf(keys), {
      algorithms: ['ES256'],
      ...(issuer === undefined ? {} : { issuer }),
      clockTolerance: 30,
      currentDate: new Date(nowSeconds * 1000),
      requiredClaims: ['exp', 'sub'],
    });
    if (typeof payload.iat === 'number' && payload.iat - 30 > nowSeconds)
      return { ok: false, reason: 'token issued in the future' };
    const claims = payload as Partial<AccessTokenClaims>;
    if (
      typeof claims.aud !== 'string' ||
      (claims.aud !== ACCESS_TOKEN_AUDIENCE && !/^https?:\/\//.test(claims.aud))
    )
      return { ok: false, reason: 'wrong audience' };
    if (
      typeof claims.sub !== 'string' ||
      (claims.scope !== undefined && typeof claims.scope !== 'string') ||
      (claims.sid !== undefined && typeof claims.sid !== 'string') ||
      typeof claims.prv !== 'string' ||
      (claims.env !== 'sandbox' && claims.env !== 'live') ||
      (claims.prd !== undefined && typeof claims.prd !== 'string')
    ) {
      return { ok: false, reason: 'missing claims' };
    }
    return { ok: true, claims: claims as AccessTokenClaims };
  } catch (error) {
    return { ok: false, reason: reasonOf(error, issuer) };
  }
}
