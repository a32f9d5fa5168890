import { join, resolve } from 'node:path';
import {
  type EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readOutboundAllowedHosts,
} from '@mcp-meter/contracts/kit';
import { readSecretKey } from '@mcp-meter/contracts/snapshots';
import {
  type BusConfig,
  type ClickHouseConfig,
  readBusConfig,
  readClickHouseConfig,
  readDataDir,
} from '@mcp-meter/contracts/usage';

export { readSecretKey };

export interface ControlPlaneConfig {
  dataDir: string;
  /**
   * The write-ahead spool of the SDK limit check's usage records (CONTROL_PLANE_SPILL_DIR,
   * default DATA_DIR/spill-control-plane): a check answers once its record is here, and the
   * records go to the bus in batches.
   */
  spillDir: string;
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
  schedulerEnabled: boolean;
  /**
   * Set: GET /metrics needs `Authorization: Bearer <token>` (METRICS_TOKEN): the control plane's
   * page, and ingest's when it runs alone (INGEST_METRICS_PORT).
   */
  metricsToken: string | undefined;
  /** Ingest run without the control plane serves /metrics and /healthz here (INGEST_METRICS_PORT; unset: no HTTP). */
  ingestMetricsPort: number | undefined;
  schedulerIntervalMs: number;
  dunningRetryHours: number[];
  /** How long after a usage-billed period ends its records may still arrive before it is billed. */
  usageLatenessMs: number;
  /** The platform's fee on each payment (ledger, P&L): PLATFORM_FEE_BPS and PLATFORM_FEE_FIXED. */
  platformFee: { bps: number; fixed: number };
  /** PAYOUT_SCHEDULE (daily, weekly, manual) and PAYOUT_DELAY_DAYS. */
  payouts: { schedule: 'daily' | 'weekly' | 'manual'; delayDays: number };
  logLevel: LogLevel;
  bus: BusConfig;
  clickhouse: ClickHouseConfig;
  /** Seals origin API keys and derives the proxy's internal API token (SECRET_KEY or DATA_DIR/secret.key). */
  secretKey: Buffer;
  webhooks: WebhookConfig;
  /**
   * Hosts exempt from the SSRF guard for every URL the service dials (MCP origins, webhooks):
   * OUTBOUND_ALLOWED_HOSTS, for tests and private deployments.
   */
  outboundAllowedHosts: string[];
  /** Where sign-in codes are sent from: SMTP_URL (smtp:// or smtps://); unset, they are logged. */
  smtpUrl: string | undefined;
  /**
   * MAIL_TO_LOG: without SMTP_URL, write mail (sign-in codes included) to the log. A development
   * setting: on by default only on embedded defaults (no DATABASE_URL), as `npm start` runs.
   */
  mailToLog: boolean;
  /** The From of the service's mail: MAIL_FROM. */
  mailFrom: string;
  /** Where the Stripe API is (STRIPE_API_URL): Stripe's own, or stripe-mock for tests. */
  stripeApiUrl: string;
  /**
   * CONSOLE_SIGNUP: `open` (default) lets anyone sign up to the console as a new provider (in
   * sandbox only until the operator enables live); `closed` leaves only invitations and the CLI.
   */
  consoleSignup: 'open' | 'closed';
  /** CONSOLE_DIR: the console's built files (default console/dist of this checkout or image). */
  consoleDir: string | undefined;
}

export interface WebhookConfig {
  enabled: boolean;
  intervalMs: number;
  batchSize: number;
  maxInFlight: number;
  perEndpoint: number;
  timeoutMs: number;
  disableAfter: number;
  /** Hosts exempt from the SSRF guard for webhooks only (besides OUTBOUND_ALLOWED_HOSTS). */
  allowedHosts: string[];
}

export function readWebhookConfig(env: EnvReader): WebhookConfig {
  return {
    enabled: env.bool('WEBHOOKS_ENABLED', true),
    // Spec 6.1 / 8: a 30 s job sending up to 20 deliveries per batch.
    intervalMs: env.int('WEBHOOK_INTERVAL_MS', 30_000, { min: 10, max: 3_600_000 }),
    batchSize: env.int('WEBHOOK_BATCH_SIZE', 20, { min: 1, max: 10_000 }),
    maxInFlight: env.int('WEBHOOK_MAX_IN_FLIGHT', 64, { min: 1, max: 10_000 }),
    perEndpoint: env.int('WEBHOOK_PER_ENDPOINT', 8, { min: 1, max: 1_000 }),
    timeoutMs: env.int('WEBHOOK_TIMEOUT_MS', 10_000, { min: 100, max: 60_000 }),
    disableAfter: env.int('WEBHOOK_DISABLE_AFTER', 12, { min: 1, max: 1_000 }),
    allowedHosts: env.list('WEBHOOK_ALLOWED_HOSTS').map((h) => h.toLowerCase()),
  };
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
    spillDir: resolve(env.string('CONTROL_PLANE_SPILL_DIR', join(dataDir, 'spill-control-plane'))),
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
    // Several replicas may run it: purchases are taken with SKIP LOCKED.
    schedulerEnabled: env.bool('SCHEDULER_ENABLED', true),
    metricsToken: env.optionalString('METRICS_TOKEN'),
    ingestMetricsPort: env.optionalInt('INGEST_METRICS_PORT', { min: 0, max: 65535 }),
    // Renewals and retries are due at day granularity; a minute keeps them prompt and cheap.
    schedulerIntervalMs: env.int('SCHEDULER_INTERVAL_MS', 60_000, { min: 1_000, max: 3_600_000 }),
    dunningRetryHours: readRetryHours(env),
    // Proxies hand records to the bus within milliseconds; minutes cover a broker failover or a
    // spool replay. Later records are billed on the next invoice (docs/billing.md).
    usageLatenessMs: env.int('BILLING_USAGE_LATENESS_SECONDS', 300, { min: 0, max: 86_400 }) * 1000,
    platformFee: {
      bps: env.int('PLATFORM_FEE_BPS', 0, { min: 0, max: 10_000 }),
      fixed: env.int('PLATFORM_FEE_FIXED', 0, { min: 0, max: 1_000_000 }),
    },
    payouts: {
      schedule: env.oneOf('PAYOUT_SCHEDULE', ['daily', 'weekly', 'manual'] as const, 'daily'),
      delayDays: env.int('PAYOUT_DELAY_DAYS', 2, { min: 0, max: 30 }),
    },
    logLevel: env.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    bus: readBusConfig(env),
    clickhouse: readClickHouseConfig(env, dataDir),
    secretKey: readSecretKey(env, dataDir),
    webhooks: readWebhookConfig(env),
    outboundAllowedHosts: readOutboundAllowedHosts(env),
    smtpUrl: env.url('SMTP_URL', ['smtp', 'smtps']),
    mailToLog: env.bool('MAIL_TO_LOG', env.string('DATABASE_URL', '') === ''),
    mailFrom: env.string('MAIL_FROM', 'MCP Meter <no-reply@localhost>'),
    consoleSignup: env.oneOf('CONSOLE_SIGNUP', ['open', 'closed'] as const, 'open'),
    consoleDir: env.string('CONSOLE_DIR', '') || undefined,
    // Set by the operator, never by a provider: the one host live payments are sent to.
    stripeApiUrl: (env.url('STRIPE_API_URL', ['http', 'https']) ?? 'https://api.stripe.com').replace(
      /\/$/,
      '',
    ),
  };
}

/** DUNNING_RETRY_HOURS: hours between a failed renewal and each retry; default 1, 3 and 7 days. */
function readRetryHours(env: EnvReader): number[] {
  const raw = env.list('DUNNING_RETRY_HOURS');
  if (raw.length === 0) return [24, 72, 168];
  const hours = raw.map(Number);
  if (hours.some((h) => !Number.isInteger(h) || h < 1 || h > 24 * 90)) {
    env.problem(
      `DUNNING_RETRY_HOURS: comma-separated whole hours between 1 and 2160, got "${raw.join(',')}"`,
    );
    return [24, 72, 168];
  }
  return hours;
}
