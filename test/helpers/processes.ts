import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { runAdmin as runAdminIn, type Spawned, spawnGroup, waitFor } from '../../bench/harness/processes';
import { NODE_FLAGS } from '../../deploy/node-flags';
import type { Infra } from '../global-setup';
import { suffix } from './flows';

export const root = resolve(import.meta.dirname, '..', '..');

/** A service a test started: the bench harness's process group with its log (bench/harness). */
export type Service = Spawned;

/** Spawns a command in its own process group with output to a log file (read it when a test fails). */
export function spawnService(
  command: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; logDir: string; name: string },
): Service {
  return spawnGroup(command, args, {
    cwd: root,
    env: options.env,
    logFile: join(options.logDir, `${options.name}.log`),
  });
}

/** The services as `npm start` runs them: from their build (made by the global setup). */
export const SERVE = [...NODE_FLAGS, 'deploy/start.mjs'];

/**
 * The services as `npm run stack` runs them: control plane + ingest in one process (on
 * `env.PORT`) and a proxy process per entry of `proxies`, each with its own extra variables
 * (its `PROXY_PORT` among them, unless the base env has it). The services are there to stop at
 * once; `ready` resolves when every one answers /healthz.
 */
export function spawnSplitStack(options: {
  env: NodeJS.ProcessEnv;
  logDir: string;
  proxies: NodeJS.ProcessEnv[];
}): { services: Service[]; ready: Promise<void> } {
  const { env, logDir } = options;
  const controlPlane = spawnService(process.execPath, SERVE, {
    env: { ...env, SERVICES: 'control-plane,ingest' },
    logDir,
    name: 'control-plane',
  });
  const proxies = options.proxies.map((extra, i) => {
    const proxyEnv: NodeJS.ProcessEnv = { ...env, SERVICES: 'proxy', ...extra };
    const service = spawnService(process.execPath, SERVE, {
      env: proxyEnv,
      logDir,
      name: options.proxies.length === 1 ? 'proxy' : `proxy-${i}`,
    });
    return { service, url: `http://127.0.0.1:${proxyEnv.PROXY_PORT}` };
  });
  const ready = (async () => {
    await waitHealthy(`http://127.0.0.1:${env.PORT}`, controlPlane);
    for (const proxy of proxies) await waitHealthy(proxy.url, proxy.service);
  })();
  return { services: [controlPlane, ...proxies.map((p) => p.service)], ready };
}

/** Waits for 200 on /healthz; fails at once, with the service's log, if the process has exited. */
/**
 * The Redis database of each test file that starts its own stack on the run's shared Redis: the
 * key set and issuer its proxies read must be its own control plane's, not those of another
 * file's that published last. One map, so no two files can share one by accident.
 */
const REDIS_DATABASES = {
  stack: 1,
  edges: 2,
  limits: 3,
  modern: 6,
  signin: 7,
  conformance: 8,
  gate: 9,
  'conformance-v1': 10,
  paywall: 11,
  console: 12,
  workers: 13,
} as const;

/** The test files with a split stack of their own, each on its own Redis database. */
export type StackName = keyof typeof REDIS_DATABASES;

/** The Redis URL of a test file's own database on the run's shared Redis. */
export function stackRedisUrl(infra: Infra, name: keyof typeof REDIS_DATABASES): string {
  return `${infra.redisUrl}/${REDIS_DATABASES[name]}`;
}

/**
 * The environment of a split stack (control plane + ingest, and proxies) on the run's shared
 * PostgreSQL, Redis and Kafka: its own data directory, Redis database and bus namespace (own
 * topics and consumer group), and no webhook deliveries (the database is shared with other
 * files, whose endpoints this one must not send to). `extra` adds or overrides variables.
 */
export function sharedStackEnv(options: {
  name: keyof typeof REDIS_DATABASES;
  infra: Infra;
  dir: string;
  port: number;
  logLevel?: string;
  extra?: NodeJS.ProcessEnv;
}): NodeJS.ProcessEnv {
  const { name, infra, dir, port } = options;
  return {
    ...process.env,
    LOG_LEVEL: options.logLevel ?? 'warn',
    DATA_DIR: join(dir, 'data'),
    DATABASE_URL: infra.databaseUrl,
    WEBHOOKS_ENABLED: 'false',
    REDIS_URL: stackRedisUrl(infra, name),
    KAFKA_BROKERS: infra.kafkaBrokers,
    BUS_NAMESPACE: `${name}${suffix()}`,
    PORT: String(port),
    CONTROL_PLANE_URL: `http://127.0.0.1:${port}`,
    // One proxy process each, as the tests that stop or kill one mean it; the worker tests ask for more.
    PROXY_WORKERS: '1',
    ...options.extra,
  };
}

export async function waitHealthy(url: string, service: Service, timeoutMs = 90_000): Promise<void> {
  await waitFor(`${url}/healthz`, timeoutMs / 1000, service);
}

/** Runs the admin CLI exactly as a user would and parses its JSON output. */
export const runAdmin = <T = Record<string, unknown>>(args: string[], env: NodeJS.ProcessEnv): Promise<T> =>
  runAdminIn<T>(root, args, env);

/** The environment a newcomer has: nothing configured, so every embedded default applies. */
export function embeddedEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', ...extra };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'CLICKHOUSE_URL', 'SERVICES'])
    delete env[name];
  return env;
}

/** The all-in-one service on embedded defaults, in a directory of its own (embeddedService). */
export interface EmbeddedService {
  /** Its data (`DATA_DIR` is `data` below it) and its logs. */
  dir: string;
  env: NodeJS.ProcessEnv;
  baseUrl: string;
  proxyUrl: string;
  /** The running service: the latest `start`'s. */
  service: Service | undefined;
  /** Starts it (again, after a kill) and waits until its control plane answers. */
  start(timeoutMs?: number): Promise<Service>;
  /** Removes its directory (stop the service first). */
  remove(): void;
}

/**
 * The all-in-one service as a newcomer runs it: nothing configured but `extra`, free ports, a
 * fresh directory (that the embedded PostgreSQL, which runs as user postgres, can reach), started
 * as `npm start` starts it (`npm: true`: by `npm start` itself).
 */
export async function embeddedService(
  name: string,
  options: { extra?: Record<string, string>; npm?: boolean } = {},
): Promise<EmbeddedService> {
  const dir = mkdtempSync(join(tmpdir(), `mcpmeter-${name}-`));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const proxyPort = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  let runs = 0;
  const embedded: EmbeddedService = {
    dir,
    env: embeddedEnv({
      DATA_DIR: join(dir, 'data'),
      PORT: String(port),
      PROXY_PORT: String(proxyPort),
      ...options.extra,
    }),
    baseUrl,
    proxyUrl: `http://127.0.0.1:${proxyPort}`,
    service: undefined,
    async start(timeoutMs) {
      const [command, args] = options.npm === true ? ['npm', ['start']] : [process.execPath, SERVE];
      const service = spawnService(command, args, {
        env: embedded.env,
        logDir: dir,
        name: `serve-${++runs}`,
      });
      embedded.service = service;
      await waitHealthy(baseUrl, service, timeoutMs);
      return service;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
  return embedded;
}
