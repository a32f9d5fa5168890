import { OutboundGuard } from '@mcp-meter/contracts/kit';
import type { ProxyConfig } from '../config';
import { OriginClient } from './client';

/** The proxy's two origin clients, and the SSRF guard's verdict on literal addresses. */
export function originClients(config: ProxyConfig) {
  // Every origin connection goes to an address the SSRF guard checked at the dial (DNS may
  // have changed since registration); literal addresses, which skip lookup, are checked per URL.
  const guard = new OutboundGuard(config.outboundAllowedHosts);
  const literalProblems = new Map<string, string | undefined>();
  const literalProblemOf = (originUrl: string) => {
    if (!literalProblems.has(originUrl)) {
      if (literalProblems.size > 10_000) literalProblems.clear();
      literalProblems.set(originUrl, guard.literalProblem(new URL(originUrl)));
    }
    return literalProblems.get(originUrl);
  };
  const originOptions = {
    connectTimeoutMs: config.originConnectTimeoutMs,
    lookup: guard.lookup as never,
    headersTimeoutMs: config.originHeadersTimeoutMs,
    idleTimeoutMs: config.originIdleTimeoutMs,
    keepAliveMs: 30_000,
  };
  // Requests share a bounded keep-alive pool per origin. A session's standalone GET stream holds
  // its connection for as long as the session lives, so streams get their own, unbounded pool
  // (one connection per client session): in the shared one, a few hundred connected clients
  // would take every connection and queue all calls behind streams that never end.
  const origins = new OriginClient({
    ...originOptions,
    maxConnections: config.originMaxConnections,
    maxPending: config.originMaxPending,
    queueTimeoutMs: config.originQueueTimeoutMs,
  });
  // Silence is such a stream's normal state (nothing changed): it is never ended for it.
  const streams = new OriginClient({
    ...originOptions,
    idleTimeoutMs: 0,
    maxConnections: Number.POSITIVE_INFINITY,
    // Never reached: an unbounded pool dials for every request.
    maxPending: 0,
    queueTimeoutMs: config.originQueueTimeoutMs,
  });
  return { origins, streams, literalProblemOf };
}
