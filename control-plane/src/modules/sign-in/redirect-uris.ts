/**
 * Redirect URIs of OAuth clients (OAuth 2.1 §2.3.1, RFC 8252 for native apps): where a client may
 * ask for the authorization response to be sent.
 */

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Schemes that never carry an authorization response, private-use or not. */
const FORBIDDEN_SCHEMES = new Set([
  'javascript:',
  'data:',
  'file:',
  'blob:',
  'vbscript:',
  'about:',
  'ftp:',
  'ws:',
  'wss:',
]);

/**
 * Why a redirect URI cannot be registered, or undefined when it can: https to any host, http
 * only to a loopback address with any port (RFC 8252 §7.3), or a private-use scheme in reverse
 * domain form (RFC 8252 §7.1, `com.example.app:/callback`). Never a fragment or credentials.
 */
export function redirectUriProblem(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not an absolute URI';
  }
  if (url.hash !== '' || uri.includes('#')) return 'must not carry a fragment';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.protocol === 'https:') return url.hostname === '' ? 'has no host' : undefined;
  if (url.protocol === 'http:')
    return LOOPBACK_HOSTS.has(url.hostname) ? undefined : 'http is allowed only on a loopback address';
  if (FORBIDDEN_SCHEMES.has(url.protocol)) return `the ${url.protocol.slice(0, -1)} scheme is not allowed`;
  // A private-use scheme names a domain its app controls, so another app cannot claim it.
  return /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/.test(url.protocol)
    ? undefined
    : 'a custom scheme must be a reverse domain name such as com.example.app';
}

/**
 * Whether `given` is one of the registered URIs: the same string, except that a loopback http URI
 * may name any port (native apps listen on whichever port is free, RFC 8252 §7.3).
 */
export function redirectUriMatches(registered: readonly string[], given: string): boolean {
  if (registered.includes(given)) return true;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' || !LOOPBACK_HOSTS.has(url.hostname) || url.hash !== '' || given.includes('#'))
    return false;
  return registered.some((candidate) => {
    try {
      const known = new URL(candidate);
      return (
        known.protocol === 'http:' &&
        known.hostname === url.hostname &&
        known.pathname === url.pathname &&
        known.search === url.search
      );
    } catch {
      return false;
    }
  });
}
