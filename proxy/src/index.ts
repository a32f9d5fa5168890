import type { SnapshotStore } from '@mcp-meter/control-plane/snapshots';
import { BatchingUsageEmitter, type UsagePublisher } from '@mcp-meter/ingest';
import type { Logger } from '@mcp-meter/ingest/kit';
import { TokenVerifier } from './auth';
import type { ProxyConfig } from './config';
import { ServerDirectory } from './directory';
import { type ProxyServer, startProxyServer } from './server';

export { type ProxyConfig, readProxyConfig } from './config';

/** The proxy with its emitter; closing stops intake, lets in-flight calls finish, then flushes usage. */
export async function startProxy(deps: {
  config: ProxyConfig;
  snapshots: SnapshotStore;
  publisher: UsagePublisher;
  logger: Logger;
}): Promise<ProxyServer> {
  const { config, logger } = deps;
  const emitter = config.meteringEnabled
    ? new BatchingUsageEmitter(deps.publisher, {
        maxBatch: config.emitterMaxBatch,
        lingerMs: config.emitterLingerMs,
        maxQueued: config.emitterMaxQueued,
        retryDelayMs: 500,
        spillDir: config.spillDir,
        logger,
      })
    : undefined;
  const server = await startProxyServer({
    config,
    directory: new ServerDirectory(deps.snapshots, config.snapshotTtlMs),
    verifier: new TokenVerifier(deps.snapshots, 60_000),
    emitter,
    logger,
  });
  return {
    ...server,
    async close() {
      await server.close();
      await emitter?.close();
    },
  };
}
