import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { EnvReader } from './env';

/**
 * The one SSRF guard for every URL the service dials on someone's behalf (MCP origins, webhook
 * endpoints): only public unicast addresses, on the default web ports or unprivileged ones, with
 * the host resolved and the address actually dialled checked. Hosts on the allow-list (tests,
 * private deployments) pass whatever they resolve to.
 */

/** IPv6 global unicast: everything else (unique-local, site-local fec0::/10, link-local, ::/96, …) is internal. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * True unless the address is public unicast. ipaddr.js names every special range; only
 * `unicast` is public. IPv6 forms that carry or translate an IPv4 address (mapped, NAT64, 6to4,
 * Teredo, ::ffff:0:0/96) are refused as a whole rather than decoded, so no embedding is missed.
 */
export function isInternalAddress(address: string): boolean {
  const host = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (!ipaddr.isValid(host) || isIP(host) === 0) return true;
  let parsed = ipaddr.parse(host);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
    else if (!v6.match(GLOBAL_UNICAST_V6)) return true;
  }
  return parsed.range() !== 'unicast';
}

/** Ports a non-allow-listed URL may use: the web's defaults, or any unprivileged port. */
export function isAllowedPort(port: number): boolean {
  return port === 80 || port === 443 || (port >= 1024 && port <= 65535);
}

/** What a refusal says an operator can do about it: the setting that lets a host through. */
const ALLOW_HINT = ' (an operator can allow a host of a private deployment with OUTBOUND_ALLOWED_HOSTS)';

/** OUTBOUND_ALLOWED_HOSTS: host names or addresses the SSRF guard lets through. */
export function readOutboundAllowedHosts(env: EnvReader): string[] {
  return env.list('OUTBOUND_ALLOWED_HOSTS').map((h) => h.toLowerCase());
}

export class UnsafeUrlError extends Error {
  readonly code = 'unsafe_url';
}

export class OutboundGuard {
  private readonly allowed: ReadonlySet<string>;

  constructor(allowedHosts: Iterable<string>) {
    this.allowed = new Set([...allowedHosts].map((h) => h.toLowerCase().replace(/^\[|\]$/g, '')));
  }

  allows(hostname: string): boolean {
    return this.allowed.has(hostname.toLowerCase().replace(/^\[|\]$/g, ''));
  }

  /**
   * Why the URL may not be dialled, as words for an API error, or undefined when it may.
   * Checks the scheme, credentials, port and, unless allow-listed, every address the host
   * resolves to now (the dial checks again: DNS may change).
   */
  async problem(url: URL): Promise<string | undefined> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be http or https';
    if (url.username !== '' || url.password !== '') return 'must not carry credentials';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (this.allows(host)) return undefined;
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    if (!isAllowedPort(port)) return `must use port 80, 443 or 1024-65535, not ${port}`;
    if (isIP(host) !== 0)
      return isInternalAddress(host) ? `points at an internal address${ALLOW_HINT}` : undefined;
    try {
      const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
        dnsLookup(host, { all: true }, (error, found) => (error ? reject(error) : resolve(found))),
      );
      if (addresses.length === 0) return 'does not resolve';
      if (addresses.some((a) => isInternalAddress(a.address)))
        return `resolves to an internal address${ALLOW_HINT}`;
      return undefined;
    } catch {
      return 'does not resolve';
    }
  }

  /**
   * Refuses a literal-address or non-allowed-port target before dialling (a literal address
   * never passes through `lookup`); undefined when the dial may go ahead.
   */
  literalProblem(url: URL): string | undefined {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (this.allows(host)) return undefined;
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    if (!isAllowedPort(port)) return `port ${port} is not allowed`;
    if (isIP(host) !== 0 && isInternalAddress(host)) return 'the URL points at an internal address';
    return undefined;
  }

  /**
   * A `lookup` for net.connect (undici's `connect.lookup`): resolves, refuses the host if any
   * answer is internal, and hands the socket the address that was checked.
   */
  readonly lookup = (
    hostname: string,
    options: { family?: number; all?: boolean },
    callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    dnsLookup(hostname, { all: true }, (error, found) => {
      if (error) return callback(error, '', 0);
      const allowed = this.allows(hostname);
      const first = found[0];
      if (first === undefined || (!allowed && found.some((a) => isInternalAddress(a.address)))) {
        return callback(new UnsafeUrlError(`${hostname} resolves to an internal address`), '', 0);
      }
      if (options.all === true) return callback(null, found);
      callback(null, first.address, first.family);
    });
  };
}
