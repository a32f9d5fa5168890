import { type McpServerSnapshot, unseal } from '@mcp-meter/contracts/snapshots';

/** Where a server's origin lives, split once per snapshot for the dispatcher. */
export interface OriginTarget {
  origin: string;
  /** Path (and query) on the origin. */
  path: string;
}

const targets = new Map<string, { origin: string; basePath: string }>();

/** The origin and path of `<originUrl><rest>?<query>`; URL parsing happens once per origin URL. */
export function originTarget(originUrl: string, rest: string, query: string): OriginTarget {
  let base = targets.get(originUrl);
  if (base === undefined) {
    const url = new URL(originUrl);
    base = { origin: url.origin, basePath: `${url.pathname === '/' ? '' : url.pathname}${url.search}` };
    if (targets.size > 10_000) targets.clear();
    targets.set(originUrl, base);
  }
  const path = `${base.basePath}${rest}` || '/';
  return {
    origin: base.origin,
    path: query === '' ? path : `${path}${path.includes('?') ? '&' : '?'}${query}`,
  };
}

/**
 * The provider's key for each origin, unsealed once per server snapshot (a new snapshot, after a
 * change, is unsealed again); null for an origin without one.
 */
export class OriginKeys {
  private readonly keys = new WeakMap<McpServerSnapshot, { header: string; value: string } | null>();

  constructor(private readonly secretKey: Buffer) {}

  of(server: McpServerSnapshot): { header: string; value: string } | null {
    let key = this.keys.get(server);
    if (key === undefined) {
      const sealed = server.originAuth;
      key =
        sealed === undefined || sealed === null
          ? null
          : { header: sealed.header, value: unseal(this.secretKey, sealed.sealedValue) };
      this.keys.set(server, key);
    }
    return key;
  }
}
