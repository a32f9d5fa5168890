import {
  type BusConfig,
  type ClickHouseConfig,
  readBusConfig,
  readClickHouseConfig,
  readDataDir,
} from '@mcp-meter/ingest';
import { type EnvReader, LOG_LEVELS, type LogLevel } from '@mcp-meter/ingest/kit';

export interface ControlPlaneConfig {
  dataDir: string;
  host: string;
  port: number;
  /** Where providers and customers reach the control plane (hosted pages, links in events). */
  publicUrl: string;
  /** Unset: embedded PostgreSQL under DATA_DIR/postgres. */
  databaseUrl: string | undefined;
  /** Unset: in-memory snapshot store (only valid when the proxy runs in the same process). */
  redisUrl: string | undefined;
  proxyPublicUrl: string;
  proxyBaseDomain: string | undefined;
  bodyLimitBytes: number;
  logLevel: LogLevel;
  bus: BusConfig;
  clickhouse: ClickHouseConfig;
}

export function readControlPlaneConfig(env: EnvReader): ControlPlaneConfig {
  const dataDir = readDataDir(env);
  const host = env.string('HOST', '127.0.0.1');
  const port = env.int('PORT', 8080, { min: 0, max: 65535 });
  const proxyPort = env.int('PROXY_PORT', 8081, { min: 0, max: 65535 });
  const proxyBaseDomain = env.optionalString('PROXY_BASE_DOMAIN');
  if (proxyBaseDomain !== undefined && !/^[a-z0-9.-]+(:\d+)?$/.test(proxyBaseDomain)) {
    env.problem(`PROXY_BASE_DOMAIN: expected a host name such as mcp.example.com, got "${proxyBaseDomain}"`);
  }
  return {
    dataDir,
    host,
    port,
    publicUrl: (env.url('PUBLIC_URL', ['http', 'https']) ?? `http://127.0.0.1:${port}`).replace(/\/$/, ''),
    databaseUrl: env.url('DATABASE_URL', ['postgres', 'postgresql']),
    redisUrl: env.url('REDIS_URL', ['redis', 'rediss']),
    proxyPublicUrl: (
      env.url('PROXY_PUBLIC_URL', ['http', 'https']) ?? `http://127.0.0.1:${proxyPort}`
    ).replace(/\/$/, ''),
    proxyBaseDomain,
    // Plans and bulk usage are the largest bodies; 1 MiB is far above both and bounds memory.
    bodyLimitBytes: env.int('BODY_LIMIT_BYTES', 1024 * 1024, { min: 1024, max: 64 * 1024 * 1024 }),
    logLevel: env.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    bus: readBusConfig(env),
    clickhouse: readClickHouseConfig(env, dataDir),
  };
}
