import { join, resolve } from 'node:path';
import {
  type EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readOutboundAllowedHosts,
} from '@mcp-meter/contracts/kit';
import { readSecretKey } from '@mcp-meter/contracts/snapshots';
import { type BusConfig, readBusConfig, readDataDir } from '@mcp-meter/contracts/usage';
import { usableCores } from './cores';

export interface ProxyConfig {
  host: string;
  port: number;
  /**
   * Proxy event loops on the port (PROXY_WORKERS, default the cores this process may use, its
   * cgroup's CPU quota included: cores.ts): processes that
   * share it, each with its own origin pools and spool, sharing Redis, snapshots and the bus
   * (deploy/proxy-workers.ts), or the stores of the process that supervises them (worker-stores.ts).
   */
  workers: number;
  /** This process's worker number, set by the supervisor that started it; undefined alone. */
  workerIndex: number | undefined;
  /** Set: route by Host `<subdomain>.<base domain>`; the path form /mcp/<subdomain> always works. */
  baseDomain: string | undefined;
  /**
   * The scheme clients reach the proxy with (from PROXY_PUBLIC_URL, as the control plane reads
   * it): the resource URLs of OAuth discovery carry it.
   */
  publicScheme: 'http' | 'https';
  redisUrl: string | undefined;
  maxBodyBytes: number;
  /** Emitted records wait here while the bus is unreachable (and across restarts). */
  spillDir: string;
  /** Write each usage record to the spool in spillDir before its answer ends (issue 32). */
  spoolEnabled: boolean;
  spoolFsyncMs: number;
  /** Concurrent requests per origin (standalone GET streams apart); more wait for a connection. */
  originMaxConnections: number;
  /** Requests that may wait for a connection to one origin; one more is refused at once (origin_busy). */
  originMaxPending: number;
  /** How long a request waits for a connection to its origin before it is refused (origin_busy). */
  originQueueTimeoutMs: number;
  originConnectTimeoutMs: number;
  originHeadersTimeoutMs: number;
  originIdleTimeoutMs: number;
  /** Origin hosts the SSRF guard lets through whatever they resolve to (OUTBOUND_ALLOWED_HOSTS). */
  outboundAllowedHosts: string[];
  snapshotTtlMs: number;
  meteringEnabled: boolean;
  /** Off only for local experiments: calls are then metered to the customer `anonymous`. */
  requireAuth: boolean;
  emitterMaxBatch: number;
  emitterLingerMs: number;
  emitterMaxQueued: number;
  /** Gating and exact limits on tools/call (needs requireAuth: limits are per customer). */
  limitsEnabled: boolean;
  /** What a limited call gets while Redis is unreachable: refused (closed) or admitted (open). */
  limitsWhenUnavailable: 'grace' | 'closed' | 'open';
  /** The `grace` policy's bound per counter: a share of the limit, capped. */
  limitOutageGracePercent: number;
  limitOutageGraceMax: number;
  /** Largest chunk of a limit one proxy leases at a time. */
  limitMaxLease: number;
  /** The control plane's internal API: paywall checkout sessions and limit counter seeds. */
  controlPlaneUrl: string;
  /**
   * How long a modern call whose client accepted the paywall's checkout waits for the purchase
   * before it is answered with the readable paywall (below the SDKs' 60 s request timeouts).
   */
  paywallWaitMs: number;
  secretKey: Buffer;
  logLevel: LogLevel;
  bus: BusConfig;
  /** Set: GET /metrics needs `Authorization: Bearer <token>` (PROXY_METRICS_TOKEN, else METRICS_TOKEN). */
  metricsToken: string | undefined;
}

export function readProxyConfig(env: EnvReader): ProxyConfig {
  return {
    host: env.string('PROXY_HOST', '127.0.0.1'),
    port: env.int('PROXY_PORT', 8081, { min: 0, max: 65535 }),
    workers: env.int('PROXY_WORKERS', usableCores(), { min: 1, max: 256 }),
    workerIndex: env.optionalInt('PROXY_WORKER_INDEX', { min: 0, max: 255 }),
    baseDomain: env.optionalString('PROXY_BASE_DOMAIN')?.toLowerCase(),
    publicScheme: env.url('PROXY_PUBLIC_URL', ['http', 'https'])?.startsWith('https:') ? 'https' : 'http',
    redisUrl: env.url('REDIS_URL', ['redis', 'rediss']),
    // MCP requests are small JSON-RPC messages; 4 MiB leaves room for large tool arguments.
    spillDir: resolve(env.string('PROXY_SPILL_DIR', join(readDataDir(env), 'spill'))),
    // A served call's record is on disk (the page cache) before its answer's last byte leaves;
    // fsync'd this often, which bounds what a machine crash (not a process crash) can lose.
    spoolEnabled: env.bool('PROXY_SPOOL', true),
    spoolFsyncMs: env.int('PROXY_SPOOL_FSYNC_MS', 1_000, { min: 10, max: 60_000 }),
    maxBodyBytes: env.int('PROXY_MAX_BODY_BYTES', 4 * 1024 * 1024, { min: 1024, max: 64 * 1024 * 1024 }),
    originMaxConnections: env.int('PROXY_ORIGIN_MAX_CONNECTIONS', 256, { min: 1, max: 100_000 }),
    // An origin whose every connection is busy queues what comes next, boundedly in number and
    // time: past either, a call is refused at once (503 origin_busy, never billed) rather than
    // waiting without end while its client gives up (Envoy's pending-request breaker, HAProxy's
    // queue timeout).
    originMaxPending: env.int('PROXY_ORIGIN_MAX_PENDING', 1_024, { min: 0, max: 1_000_000 }),
    originQueueTimeoutMs: env.int(
      'PROXY_ORIGIN_QUEUE_TIMEOUT_MS',
      env.int('PROXY_ORIGIN_CONNECT_TIMEOUT_MS', 5_000, { min: 100, max: 60_000 }),
      { min: 1, max: 600_000 },
    ),
    originConnectTimeoutMs: env.int('PROXY_ORIGIN_CONNECT_TIMEOUT_MS', 5_000, { min: 100, max: 60_000 }),
    // Tools may think for a while before the first byte; a minute is generous without hanging forever.
    originHeadersTimeoutMs: env.int('PROXY_ORIGIN_HEADERS_TIMEOUT_MS', 60_000, { min: 100, max: 600_000 }),
    // SSE streams may idle between events; five minutes of silence ends them.
    originIdleTimeoutMs: env.int('PROXY_ORIGIN_IDLE_TIMEOUT_MS', 300_000, { min: 100, max: 3_600_000 }),
    paywallWaitMs: env.int('PROXY_PAYWALL_WAIT_MS', 40_000, { min: 0, max: 600_000 }),
    // How long a server's routing snapshot is trusted before it is read again.
    outboundAllowedHosts: readOutboundAllowedHosts(env),
    snapshotTtlMs: env.int('PROXY_SNAPSHOT_TTL_MS', 5_000, { min: 0, max: 600_000 }),
    meteringEnabled: env.bool('PROXY_METERING_ENABLED', true),
    requireAuth: env.bool('PROXY_REQUIRE_AUTH', true),
    emitterMaxBatch: env.int('EMITTER_MAX_BATCH', 1_000, { min: 1, max: 100_000 }),
    // Records leave at least this often. Each publish costs the broker (and the consumer's
    // fetch) about the same whatever its size, so at 20 ms it was most of the metering CPU per
    // record; 100 ms keeps usage fresh within well under a second (bench/results/proxy.md).
    emitterLingerMs: env.int('EMITTER_LINGER_MS', 100, { min: 0, max: 10_000 }),
    emitterMaxQueued: env.int('EMITTER_MAX_QUEUED', 100_000, { min: 1, max: 10_000_000 }),
    limitsEnabled: env.bool('PROXY_LIMITS_ENABLED', true),
    // Redis away and this proxy's leases spent: a bounded grace per counter (default 1% of the
    // limit, at most 100 calls; 0 fails closed), added to the counter once Redis is back.
    limitsWhenUnavailable: env.oneOf(
      'PROXY_LIMITS_WHEN_UNAVAILABLE',
      ['grace', 'closed', 'open'] as const,
      'grace',
    ),
    limitOutageGracePercent: env.int('PROXY_LIMIT_OUTAGE_GRACE_PERCENT', 1, { min: 0, max: 100 }),
    limitOutageGraceMax: env.int('PROXY_LIMIT_OUTAGE_GRACE_MAX', 100, { min: 0, max: 1_000_000 }),
    limitMaxLease: env.int('PROXY_LIMIT_MAX_LEASE', 100, { min: 1, max: 100_000 }),
    controlPlaneUrl: (
      env.url('CONTROL_PLANE_URL', ['http', 'https']) ??
      `http://127.0.0.1:${env.int('PORT', 8080, { min: 0, max: 65535 })}`
    ).replace(/\/$/, ''),
    secretKey: readSecretKey(env, readDataDir(env)),
    logLevel: env.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    bus: readBusConfig(env),
    // One METRICS_TOKEN guards every service's page; PROXY_METRICS_TOKEN, the proxy's alone.
    metricsToken: env.optionalString('PROXY_METRICS_TOKEN') ?? env.optionalString('METRICS_TOKEN'),
  };
}
