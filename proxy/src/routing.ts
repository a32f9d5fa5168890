import { subdomainOfHost } from '@mcp-meter/contracts/snapshots';

/** Which server a request is for, from the path (`/mcp/<subdomain>`) or the Host. */
export interface Route {
  subdomain: string;
  /** Path after the server part, appended to the origin URL. */
  rest: string;
}

/**
 * A sub-path that could leave the registered origin path once the origin normalises it: a `.` or
 * `..` segment (also percent-encoded), an encoded slash, a backslash, or escapes that do not decode.
 */
export function escapesOriginPath(rest: string): boolean {
  let decoded = rest;
  if (rest.includes('%')) {
    if (/%2f|%5c/i.test(rest)) return true;
    try {
      decoded = decodeURIComponent(rest);
    } catch {
      return true;
    }
  }
  if (decoded.includes('\\')) return true;
  for (const segment of decoded.split('/')) if (segment === '.' || segment === '..') return true;
  return false;
}

export function routeOf(
  url: string,
  host: string,
  baseDomain: string | undefined,
): Route | 'unsafe_path' | undefined {
  const pathForm = /^\/mcp\/([a-z0-9-]+)(\/.*)?$/.exec(url);
  if (pathForm?.[1] !== undefined) {
    const rest = pathForm[2] ?? '';
    return escapesOriginPath(rest) ? 'unsafe_path' : { subdomain: pathForm[1], rest };
  }
  const subdomain = subdomainOfHost(host, baseDomain);
  return subdomain === undefined ? undefined : { subdomain, rest: '' };
}
