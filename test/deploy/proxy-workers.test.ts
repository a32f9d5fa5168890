/**
 * The supervisor's wait for a previous supervisor's worker (deploy/proxy-workers.ts): a worker
 * whose spool a live process still writes (a predecessor draining after its supervisor died)
 * starts only once that process is gone, so it never finds its spool in use and leaves it unsent.
 * Real processes: the workers are a small script that records its start, the predecessor a
 * sleeping Node process.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { superviseProxyWorkers } from '../../deploy/proxy-workers';
import { pollUntil } from '../helpers/poll';

/** A worker: notes its start beside its spool, then waits for SIGTERM or its supervisor's end. */
const WORKER = `
import { writeFileSync } from 'node:fs';
writeFileSync(process.env.PROXY_SPILL_DIR + '/started', String(process.pid));
const stop = () => process.exit(0);
process.on('SIGTERM', stop);
process.on('disconnect', stop);
setInterval(() => {}, 1000);
`;

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-workers-'));
  const spillDir = join(dir, 'spill');
  mkdirSync(join(spillDir, 'worker-1'), { recursive: true });
  const entry = join(dir, 'worker.mjs');
  writeFileSync(entry, WORKER);
  // A previous supervisor's worker 1, still draining: alive, and writing worker 1's spool.
  const predecessor: ChildProcess = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
    stdio: 'ignore',
  });
  writeFileSync(join(spillDir, 'worker-1', `spool-1-${predecessor.pid}-1.jsonl`), '');
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  cleanups.push(() => {
    predecessor.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const started = (index: number) =>
    existsSync(join(index === 0 ? spillDir : join(spillDir, `worker-${index}`), 'started'));
  /** Two workers under a new supervisor, once worker 0 (whose spool is free) has started. */
  const supervise = async () => {
    const workers = superviseProxyWorkers({
      count: 2,
      entry,
      execArgv: [],
      env: process.env,
      port: 0,
      spillDir,
      logger,
    });
    cleanups.push(() => void workers.stop());
    await pollUntil(
      async () => started(0),
      (up) => up,
      { timeoutMs: 10_000, what: 'worker 0' },
    );
    return workers;
  };
  return { predecessor, lines, started, supervise };
}

describe('proxy workers after a previous supervisor (deploy/proxy-workers.ts)', () => {
  it('starts a worker whose spool a live predecessor holds only once that predecessor is gone', async () => {
    const { predecessor, lines, started, supervise } = setUp();
    const workers = await supervise();
    // Worker 0's spool is free, worker 1's is not: worker 1 waits, and says why.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(started(1)).toBe(false);
    expect(workers.pids()[1]).toBeUndefined();
    expect(lines).toContainEqual(
      expect.objectContaining({
        worker: 1,
        pids: [predecessor.pid],
        msg: 'waiting for the previous proxy worker to stop',
      }),
    );
    predecessor.kill('SIGKILL');
    await pollUntil(
      async () => started(1),
      (up) => up,
      { timeoutMs: 10_000, what: 'worker 1' },
    );
    expect(workers.pids().every((pid) => pid !== undefined)).toBe(true);
    await workers.stop();
    expect(workers.pids()).toEqual([undefined, undefined]);
  });

  it('stops without starting a worker still waiting for its predecessor', async () => {
    const { started, supervise } = setUp();
    const workers = await supervise();
    await workers.stop();
    // The wait ends with the stop: worker 1 is not started after it.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(started(1)).toBe(false);
    expect(workers.pids()).toEqual([undefined, undefined]);
  });
});
