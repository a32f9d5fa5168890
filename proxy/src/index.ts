import type { Logger } from '@mcp-meter/contracts/kit';
import { type CounterStore, DEFAULT_LIMITER_OPTIONS, LeasedLimiter } from '@mcp-meter/contracts/limits';
import { internalToken, type SnapshotStore } from '@mcp-meter/contracts/snapshots';
import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import { BatchingUsageEmitter } from '@mcp-meter/ingest/producer';
import { Agent } from 'undici';
import { TokenVerifier } from './auth';
import type { ProxyConfig } from './config';
import { ControlPlaneLink } from './control-link';
import { EntitlementDirectory, RevocationDirectory, ServerDirectory } from './directory';
import { Gatekeeper } from './gatekeeper';
import { CallRounds } from './rounds';
import { type ProxyServer, startProxyServer } from './server';

export { type ProxyConfig, readProxyConfig } from './config';

/** The proxy with its emitter; closing stops intake, lets in-flight calls finish, then flushes usage. */
export async function startProxy(deps: {
  config: ProxyConfig;
  snapshots: SnapshotStore;
  /** Limit counters: Redis shared by every proxy, or (all-in-one) the control plane's memory store. */
  counters: CounterStore;
  publisher: UsagePublisher;
  logger: Logger;
  /** A worker's: the other workers' metrics pages (deploy/worker-metrics.ts). */
  siblingPages?: (() => Promise<string[]>) | undefined;
}): Promise<ProxyServer> {
  const { config, logger } = deps;
  const emitter = config.meteringEnabled
    ? new BatchingUsageEmitter(deps.publisher, {
        maxBatch: config.emitterMaxBatch,
        lingerMs: config.emitterLingerMs,
        maxQueued: config.emitterMaxQueued,
        retryDelayMs: 500,
        spillDir: config.spillDir,
        writeAhead: config.spoolEnabled,
        fsyncMs: config.spoolFsyncMs,
        logger,
      })
    : undefined;
  const limited = config.limitsEnabled && config.requireAuth;
  const controlPlane = new Agent({ connections: 16, keepAliveTimeout: 30_000 });
  const link = limited
    ? new ControlPlaneLink(config.controlPlaneUrl, internalToken(config.secretKey), controlPlane)
    : undefined;
  const limiter = limited
    ? new LeasedLimiter(
        deps.counters,
        { ...DEFAULT_LIMITER_OPTIONS, maxLease: config.limitMaxLease },
        // The spool keeps each record's lease charges until the lease is settled in the store.
        emitter,
      )
    : undefined;
  // A dead predecessor's open leases are settled at what its spool recorded, not left to expire
  // as fully spent: the allowance it had leased and not spent returns to the customer.
  if (limiter !== undefined && emitter !== undefined && emitter.inheritedCharges.length > 0) {
    limiter.settleLater(emitter.inheritedCharges);
    await limiter.settlePending();
    logger.info(
      { leases: emitter.inheritedCharges.length, unsettled: limiter.unsettled },
      'leases of a previous run settled at what it recorded',
    );
  }
  const gatekeeper =
    link !== undefined && limiter !== undefined
      ? new Gatekeeper(
          new EntitlementDirectory(deps.snapshots, config.snapshotTtlMs),
          limiter,
          link,
          config.limitsWhenUnavailable,
          { percent: config.limitOutageGracePercent, max: config.limitOutageGraceMax },
        )
      : undefined;
  // A purchase change may end a paywall; its remembered checkout session must not outlive it.
  if (link !== undefined)
    deps.snapshots.onChange((key) => key.includes(':entitlement:') && link.forgetPaywalls());
  const verifier = new TokenVerifier(
    deps.snapshots,
    60_000,
    new RevocationDirectory(deps.snapshots, config.snapshotTtlMs),
  );
  // Listening before the store is readable would answer the first calls with retry-shortly errors.
  if (!(await verifier.warm(10_000)))
    logger.warn('snapshot store not readable yet: starting anyway, calls retry until it is');
  // Calls a previous run served but never handed to the bus (a crash) are replayed first, so a
  // limit counter started from stored usage counts them: a restart never hands back allowance.
  if (emitter !== undefined && !(await emitter.recovered(15_000)))
    logger.warn('usage left by a previous run is not on the bus yet; starting anyway');
  const server = await startProxyServer({
    config,
    directory: new ServerDirectory(deps.snapshots, config.snapshotTtlMs),
    verifier,
    emitter,
    gatekeeper,
    link,
    limiter,
    // Multi-round calls hold their unit in the same shared store as the limit counters.
    rounds: gatekeeper === undefined ? undefined : new CallRounds(deps.counters),
    secretKey: config.secretKey,
    logger,
    siblingPages: deps.siblingPages,
  });
  return {
    ...server,
    async close() {
      await server.close();
      await gatekeeper?.close();
      // Unspent leases go back to the shared budget for the other proxies.
      await limiter?.close();
      await emitter?.close();
      await controlPlane.close();
    },
  };
}
