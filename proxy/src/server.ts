import type * as UWS from 'uWebSockets.js';
import type { Logger } from '@mcp-meter/contracts/kit';
import type { LeasedLimiter } from '@mcp-meter/contracts/limits';
import { gauge } from '@mcp-meter/contracts/metrics';
import type { UsageEmitter } from '@mcp-meter/ingest/producer';
import type { TokenVerifier } from './auth';
import type { ProxyConfig } from './config';
import type { ControlPlaneLink } from './control-link';
import type { ServerDirectory } from './directory';
import type { Gatekeeper } from './gatekeeper';
import { CallGate } from './gating';
import type { Exchange } from './http-io';
import { InFlight } from './in-flight';
import { receive } from './intake';
import { Meter } from './metering';
import { labelWorker, mergePages, ProxyMetrics } from './metrics-page';
import { originClients } from './origin/clients';
import { OriginFailureLog } from './origin/failure-log';
import { OriginKeys } from './origin/target';
import { PaywallAsks } from './paywall/ask';
import { PaywallOffers } from './paywall/offer';
import { PaywallStates } from './paywall/state';
import { forward } from './pipeline';
import type { CallRounds } from './rounds';
import { SessionOrder } from './session-order';
import { RecentSessions } from './sessions';
import uWS from './uws';

/**
 * The proxy's HTTP server: what its requests share, wired once (origin clients, session order,
 * paywall asks and states, gating, metering, metrics), the listening socket, and the stop. A
 * request's own steps are each in a file of their own: intake.ts reads it, pipeline.ts takes it
 * through admission.ts, gating.ts and relay.ts.
 */

export interface ProxyServerDeps {
  config: ProxyConfig;
  directory: ServerDirectory;
  emitter: UsageEmitter | undefined;
  verifier: TokenVerifier;
  /** Absent: no gating or limits (every call is forwarded and metered). */
  gatekeeper: Gatekeeper | undefined;
  link: ControlPlaneLink | undefined;
  limiter: LeasedLimiter | undefined;
  /** Holds of multi-round calls (absent without gating: nothing is spent, so nothing is held). */
  rounds?: CallRounds | undefined;
  secretKey: Buffer;
  logger: Logger;
  /** A worker's: the other workers' metrics pages, for a page with every worker's series. */
  siblingPages?: (() => Promise<string[]>) | undefined;
}

export interface ProxyServer {
  port: number;
  url: string;
  /** This process's metrics page, its series labelled with its worker number if it is one. */
  metricsPage(): string;
  close(): Promise<void>;
}

export async function startProxyServer(deps: ProxyServerDeps): Promise<ProxyServer> {
  const { config, directory, emitter, verifier, gatekeeper, link, logger } = deps;
  const { origins, streams, literalProblemOf } = originClients(config);
  const metrics = new ProxyMetrics();
  const states = new PaywallStates(deps.secretKey);
  /** Exchanges being served (the in-flight gauge), so a stop can wait for them or end them. */
  const live = new InFlight<Exchange>();
  let stopping = false;
  const stop = (exchange: Exchange) => {
    exchange.stopped = true;
    exchange.origin?.abort(new Error('proxy stopping'));
  };
  const shared = {
    config,
    directory,
    verifier,
    gatekeeper,
    logger,
    emitter,
    rounds: deps.rounds,
    metrics,
    states,
    origins,
    streams,
    literalProblemOf,
    /** Each session's requests reach the origin in the order they arrived (session-order.ts). */
    order: new SessionOrder(),
    live,
    // Sessions whose client declared URL elicitation at initialize (MCP 2025-11-25), by the
    // Mcp-Session-Id the origin gave them: their paywall is a -32042 URL elicitation.
    urlElicitationSessions: new RecentSessions(100_000),
    asks: new PaywallAsks(),
    gate: new CallGate(new PaywallOffers({ link, logger, states })),
    meter: new Meter({ emitter, metrics }),
    originKeys: new OriginKeys(deps.secretKey),
    originFailureLog: new OriginFailureLog(logger),
  };
  // A worker's page says which worker it is: each worker counts its own calls.
  const workerLine =
    config.workerIndex === undefined
      ? ''
      : gauge('mcpmeter_proxy_worker', 'This worker’s number among PROXY_WORKERS', config.workerIndex);
  const ownPage = () =>
    workerLine +
    metrics.render({ gatekeeper, limiter: deps.limiter, directory, link, emitter, inflight: live.size });
  // A worker's series carry its number, and its page has its siblings' too (deploy/worker-metrics.ts).
  const workerIndex = config.workerIndex;
  const siblingPages = deps.siblingPages;
  const labelledPage = workerIndex === undefined ? ownPage : () => labelWorker(ownPage(), workerIndex);
  const renderMetrics =
    siblingPages === undefined
      ? labelledPage
      : async () => mergePages([labelledPage(), ...(await siblingPages())]);
  const intake = {
    ...shared,
    stopping: () => stopping,
    // A worker names itself, so a supervisor and its tests can tell the workers apart.
    healthy: JSON.stringify(
      config.workerIndex === undefined
        ? { status: 'ok' }
        : { status: 'ok', worker: config.workerIndex, pid: process.pid },
    ),
    renderMetrics,
    forward: (exchange: Exchange, request: Parameters<typeof forward>[2]) =>
      forward(shared, exchange, request),
  };
  const app = uWS.App().any('/*', (res, req) => receive(intake, res, req));

  const socket = await new Promise<UWS.us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (listenSocket) => {
      if (listenSocket === false)
        reject(new Error(`proxy could not listen on ${config.host}:${config.port}`));
      else resolve(listenSocket);
    });
  });
  const port = uWS.us_socket_local_port(socket as unknown as UWS.us_socket);

  return {
    port,
    url: `http://${config.host}:${port}`,
    metricsPage: labelledPage,
    async close() {
      stopping = true;
      uWS.us_listen_socket_close(socket);
      // Standalone streams never end by themselves: ended now, their clients reconnect elsewhere.
      for (const exchange of live.list()) if (exchange.standalone) stop(exchange);
      // Calls in flight finish (and are metered) before the process moves on; bounded in time,
      // after which what is left is cancelled (and metered as cancelled).
      const deadline = Date.now() + 10_000;
      while (live.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      for (const exchange of live.list()) stop(exchange);
      const grace = Date.now() + 2_000;
      while (live.size > 0 && Date.now() < grace) await new Promise((resolve) => setTimeout(resolve, 20));
      // Still here: a client that never finished sending its body. Its connection is closed.
      for (const exchange of live.list()) {
        if (exchange.aborted) continue;
        try {
          exchange.res.close();
        } catch {
          // already answered
        }
      }
      await Promise.all([origins.close(), streams.close()]);
      metrics.close();
    },
  };
}
