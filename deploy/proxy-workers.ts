/**
 * Proxy workers (PROXY_WORKERS, issue 65): that many proxy processes on one port, which the
 * kernel shares among them (uWebSockets.js listens with SO_REUSEPORT), each with its own event
 * loop, origin pools and spool, sharing Redis (snapshots, limit counters) and Kafka with every
 * other proxy. The supervisor serves nothing itself: it starts the workers, starts again one that
 * dies (its replacement replays its spool and settles its leases, as any restarted proxy does),
 * and on SIGTERM lets each drain. A worker whose supervisor is gone (its IPC channel closed)
 * drains and stops too, so no worker outlives it holding the port.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Logger, processAlive } from '@mcp-meter/contracts/kit';
import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import { BatchingUsageEmitter } from '@mcp-meter/ingest/producer';
import { relayMetricPages } from './worker-metrics';

/** Deaths within this window count towards the slower restart below. */
const CRASH_WINDOW_MS = 60_000;
const RESTART_DELAY_MS = 500;
/** A worker dying this often within the window is started again only after SLOW_RESTART_MS. */
const CRASHES_BEFORE_SLOW = 5;
const SLOW_RESTART_MS = 10_000;
/** How long the workers have to drain and flush on SIGTERM before they are killed. */
const DRAIN_TIMEOUT_MS = 30_000;
/** How long a new supervisor's workers wait for a previous one's to finish draining: its drain and flush. */
const PREDECESSOR_WAIT_MS = DRAIN_TIMEOUT_MS + 15_000;

/**
 * Worker `index`'s spool: worker 0 keeps the proxy's own (a single proxy's spool carries over to
 * workers), the others one beside it each, so every spool has one writer.
 */
export const workerSpillDir = (spillDir: string, index: number): string =>
  index === 0 ? spillDir : join(spillDir, `worker-${index}`);

export interface ProxyWorkers {
  /** Each worker's process id, by worker number (undefined while one is being started again). */
  pids(): Array<number | undefined>;
  /** Sends SIGTERM to every worker and waits until all have drained and exited. */
  stop(): Promise<void>;
}

export function superviseProxyWorkers(options: {
  count: number;
  /** The service's entry point and the Node flags it runs with: each worker runs the same. */
  entry: string;
  execArgv: string[];
  env: NodeJS.ProcessEnv;
  port: number;
  spillDir: string;
  logger: Logger;
  /** Called with each worker as it starts: what serves it over its IPC channel (worker-stores.ts). */
  serve?: (worker: ChildProcess) => void;
}): ProxyWorkers {
  const { count, logger } = options;
  const workers: Array<ChildProcess | undefined> = new Array(count).fill(undefined);
  const deaths: number[][] = Array.from({ length: count }, () => []);
  let stopping = false;
  const startedAt = Date.now();
  warnOfOrphanSpools(options.spillDir, count, logger);

  const start = (index: number) => {
    // A predecessor still draining (its supervisor died before this one started) keeps its spool:
    // this worker would find it in use and never send it. It starts once they are gone, or once
    // this supervisor has waited PREDECESSOR_WAIT_MS since it started.
    const dir = workerSpillDir(options.spillDir, index);
    const waiting = predecessorsIn(dir);
    const left = PREDECESSOR_WAIT_MS - (Date.now() - startedAt);
    if (waiting.length === 0 || left <= 0) return launch(index);
    logger.warn({ worker: index, pids: waiting }, 'waiting for the previous proxy worker to stop');
    void predecessorsGone(dir, left, () => stopping).then(() => {
      if (!stopping) launch(index);
    });
  };
  const launch = (index: number) => {
    const child = spawn(process.execPath, [...options.execArgv, options.entry], {
      env: {
        ...options.env,
        SERVICES: 'proxy',
        PROXY_PORT: String(options.port),
        PROXY_WORKERS: '1',
        PROXY_WORKER_INDEX: String(index),
        PROXY_SPILL_DIR: workerSpillDir(options.spillDir, index),
      },
      // The IPC channel tells a worker its supervisor is gone.
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    workers[index] = child;
    options.serve?.(child);
    relayMetricPages(child, () => workers.filter((w): w is ChildProcess => w !== undefined));
    child.on('exit', (code, signal) => {
      if (workers[index] === child) workers[index] = undefined;
      if (stopping) return;
      const now = Date.now();
      const recent = [...(deaths[index] ?? []).filter((t) => now - t < CRASH_WINDOW_MS), now];
      deaths[index] = recent;
      const delay = recent.length >= CRASHES_BEFORE_SLOW ? SLOW_RESTART_MS : RESTART_DELAY_MS;
      logger.error(
        { worker: index, code, signal, restartInMs: delay },
        'proxy worker exited; starting it again',
      );
      setTimeout(() => {
        if (!stopping) start(index);
      }, delay).unref();
    });
  };
  for (let i = 0; i < count; i++) start(i);
  logger.info({ workers: count, port: options.port }, 'proxy workers started');

  return {
    pids: () => workers.map((w) => w?.pid),
    async stop() {
      stopping = true;
      const live = workers.filter((w): w is ChildProcess => w !== undefined && w.exitCode === null);
      await Promise.all(
        live.map(
          (child) =>
            new Promise<void>((resolve) => {
              const kill = setTimeout(() => child.kill('SIGKILL'), DRAIN_TIMEOUT_MS);
              child.once('exit', () => {
                clearTimeout(kill);
                resolve();
              });
              child.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}

/**
 * Waits until no process but this one has spool files in `dir` (a previous supervisor's worker
 * still draining), at most `ms` or until `givenUp` says so; true when none is left.
 */
export async function predecessorsGone(
  dir: string,
  ms = PREDECESSOR_WAIT_MS,
  givenUp: () => boolean = () => false,
): Promise<boolean> {
  const until = Date.now() + ms;
  while (predecessorsIn(dir).length > 0) {
    if (Date.now() >= until || givenUp()) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

/**
 * Sends what the workers of a previous run left in their spools (a crash of this process, whose
 * memory held the limit counters) to the bus, before any worker takes a call: the counters here
 * start from stored usage, so a restart never hands back allowance. Each worker's spool waits
 * for the previous worker to stop writing it.
 */
export async function replayWorkerSpools(
  spillDir: string,
  publisher: UsagePublisher,
  logger: Logger,
): Promise<void> {
  if (!existsSync(spillDir)) return;
  const dirs = [
    spillDir,
    ...readdirSync(spillDir)
      .filter((entry) => /^worker-\d+$/.test(entry))
      .map((entry) => join(spillDir, entry)),
  ];
  for (const dir of dirs) {
    if (!(await predecessorsGone(dir)))
      logger.warn({ spool: dir }, 'a previous proxy worker still holds its spool; its usage is sent later');
    const replay = new BatchingUsageEmitter(publisher, {
      maxBatch: 1_000,
      lingerMs: 0,
      maxQueued: 100_000,
      retryDelayMs: 500,
      spillDir: dir,
      logger,
    });
    if (!(await replay.recovered(15_000)))
      logger.warn({ spool: dir }, 'usage left by a previous run is not on the bus yet; starting anyway');
    await replay.close();
  }
}

/**
 * The live processes other than this one with spool or spill files in `dir`: a previous
 * supervisor's worker that is still draining. Files of dead processes are the next worker's to
 * send.
 */
export function predecessorsIn(dir: string): number[] {
  if (!existsSync(dir)) return [];
  const pids = new Set<number>();
  for (const file of readdirSync(dir)) {
    const pid = Number(/^(?:spool|spill)-\d+-(\d+)-\d+\.jsonl$/.exec(file)?.[1]);
    if (Number.isInteger(pid) && pid !== process.pid && processAlive(pid)) pids.add(pid);
  }
  return [...pids];
}

/** A spool of a worker number above the count (PROXY_WORKERS lowered) waits until that worker runs again. */
function warnOfOrphanSpools(spillDir: string, count: number, logger: Logger): void {
  if (!existsSync(spillDir)) return;
  for (const entry of readdirSync(spillDir)) {
    const index = /^worker-(\d+)$/.exec(entry)?.[1];
    if (index === undefined || Number(index) < count) continue;
    if (readdirSync(join(spillDir, entry)).length > 0)
      logger.warn(
        { spool: join(spillDir, entry) },
        `a spool of worker ${index} is left: it is sent when PROXY_WORKERS is above ${index} again`,
      );
  }
}
