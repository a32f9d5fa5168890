import type { IncomingHttpHeaders } from 'node:http';
import { type McpServerSnapshot, unseal } from '@mcp-meter/contracts/snapshots';
import type { Dispatcher } from 'undici';

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

export interface OriginSink {
  /** Status and headers arrived. */
  head(status: number, headers: IncomingHttpHeaders): void;
  /** A body chunk; false pauses the origin until the sink calls `resume`. */
  data(chunk: Buffer): boolean;
}

export interface OriginControl {
  abort(reason: Error): void;
  resume(): void;
}

/**
 * One origin request on undici's dispatcher, with the response pushed straight to the sink:
 * no body stream and no promise per chunk on the hot path. Resolves when the answer has ended;
 * rejects on connect, timeout or protocol errors (before or after the head).
 */
export function callOrigin(
  dispatcher: Dispatcher,
  target: OriginTarget,
  request: { method: string; headers: Record<string, string>; body: Buffer | null },
  sink: OriginSink,
  bind: (control: OriginControl) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    dispatcher.dispatch(
      {
        origin: target.origin,
        path: target.path,
        method: request.method as Dispatcher.HttpMethod,
        headers: request.headers,
        body: request.body,
      },
      {
        onRequestStart(controller) {
          bind({ abort: (reason) => controller.abort(reason), resume: () => controller.resume() });
        },
        onResponseStart(_controller, statusCode, headers) {
          sink.head(statusCode, headers);
        },
        onResponseData(controller, chunk) {
          if (!sink.data(chunk)) controller.pause();
        },
        onResponseEnd() {
          resolve();
        },
        onResponseError(_controller, error) {
          reject(error);
        },
      },
    );
  });
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
