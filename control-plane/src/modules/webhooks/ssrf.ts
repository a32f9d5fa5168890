import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** Addresses a webhook may never reach: loopback, private, link-local (cloud metadata), CGNAT, reserved. */
const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
] as const)
  blocked.addSubnet(network, prefix, 'ipv6');

/** An IPv4 address carried inside IPv6 (mapped ::ffff:a.b.c.d, or NAT64 64:ff9b::/96). */
function embeddedIPv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted?.[1] !== undefined) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex?.[1] === undefined || hex[2] === undefined) return undefined;
  const high = Number.parseInt(hex[1], 16);
  const low = Number.parseInt(hex[2], 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIPv4(address);
    if (v4 !== undefined) return blocked.check(v4, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true;
}

export class UnsafeWebhookUrl extends Error {}

/**
 * The SSRF guard of webhook delivery: hosts on the allow-list (WEBHOOK_ALLOWED_HOSTS, for tests
 * and private deployments) pass; any other host must resolve only to public addresses, and the
 * connection goes to the address that was checked.
 */
export class WebhookUrlGuard {
  constructor(private readonly allowedHosts: ReadonlySet<string>) {}

  allows(hostname: string): boolean {
    return this.allowedHosts.has(hostname.toLowerCase().replace(/^\[|\]$/g, ''));
  }

  /** For registration: a clear reason when the URL may not be used, else undefined. */
  async problem(url: URL): Promise<string | undefined> {
    if (url.username !== '' || url.password !== '') return 'must not carry credentials';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (this.allows(host)) return undefined;
    if (isIP(host) !== 0) return isInternalAddress(host) ? 'points at an internal address' : undefined;
    try {
      const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
        dnsLookup(host, { all: true }, (error, found) => (error ? reject(error) : resolve(found))),
      );
      if (addresses.length === 0) return 'does not resolve';
      if (addresses.some((a) => isInternalAddress(a.address))) return 'resolves to an internal address';
      return undefined;
    } catch {
      return 'does not resolve';
    }
  }

  /** A `lookup` for net.connect: resolves, refuses internal answers, returns the checked address. */
  readonly lookup = (
    hostname: string,
    options: { family?: number; all?: boolean },
    callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    dnsLookup(hostname, { all: true }, (error, found) => {
      if (error) return callback(error, '', 0);
      const allowed = this.allows(hostname);
      const usable = found.filter((a) => allowed || !isInternalAddress(a.address));
      const first = usable[0];
      if (first === undefined || (!allowed && usable.length !== found.length)) {
        return callback(new UnsafeWebhookUrl(`${hostname} resolves to an internal address`), '', 0);
      }
      if (options.all === true) return callback(null, [first]);
      callback(null, first.address, first.family);
    });
  };
}
