import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, createWriteStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { NODE_FLAGS } from '../../deploy/node-flags';

/**
 * One run of the fault matrix: its options, its directory, the services it starts (from their
 * build, as `npm start` runs them) and the infrastructure stacks it starts, so that a stop by a
 * signal can end them all.
 */

export const root = resolve(import.meta.dirname, '..', '..');
export const { values: args } = parseArgs({
  options: {
    only: { type: 'string', default: '' },
    'outage-seconds': { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    'results-dir': {
      type: 'string',
      default: join(resolve(import.meta.dirname, '..', '..'), 'bench', 'results'),
    },
  },
});
export const OUTAGE_SECONDS = Number(args['outage-seconds']);
export const CLIENTS = Number(args.clients);
export const log = (line: string) => process.stderr.write(`[faults] ${line}\n`);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const work = mkdtempSync(join(tmpdir(), 'mcpmeter-faults-'));
chmodSync(work, 0o755);
// The services as `npm start` runs them: from their build (deploy/build.mjs, made before the first start).
export const SERVE = [...NODE_FLAGS, 'deploy/start.mjs'];
/** Issue 32: the API answers within this long of a restart, under load. */
export const API_BACK_SECONDS = 5;

export interface Proc {
  child: ChildProcess;
  name: string;
  exited: Promise<number | null>;
}
export const procs = new Set<Proc>();
/** The infra.sh stacks this run started (their servers outlive it unless stopped). */
export const startedInfra = new Set<NodeJS.ProcessEnv>();

export function startProc(name: string, env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, SERVE, {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const file = createWriteStream(join(work, `${name}.log`), { flags: 'a' });
  child.stdout?.pipe(file);
  child.stderr?.pipe(file);
  const proc: Proc = {
    child,
    name,
    exited: new Promise((done) => child.once('exit', (code) => done(code))),
  };
  procs.add(proc);
  void proc.exited.then(() => procs.delete(proc));
  return proc;
}

export async function stopProc(proc: Proc, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.pid === undefined) return;
  // The node process only (not its group): a SIGKILL leaves what it started, as a real crash does.
  proc.child.kill(signal);
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 30_000);
  await proc.exited;
  clearTimeout(timer);
}

export async function healthy(url: string, proc: Proc, seconds = 120): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited: see ${work}/${proc.name}.log`);
    try {
      if ((await fetch(`${url}/healthz`)).status === 200) return (Date.now() - started) / 1000;
    } catch {}
    if (Date.now() - started > seconds * 1000) throw new Error(`${url} not healthy in ${seconds} s`);
    await sleep(100);
  }
}

/**
 * deploy/infra.sh, without blocking this process: the origin and the client loops live here, and
 * a synchronous wait of seconds would stall calls in flight (a fault of the harness, not the system).
 */
export async function infra(
  env: NodeJS.ProcessEnv,
  component: string,
  verb: 'start' | 'stop',
): Promise<void> {
  // stdio ignored: the servers it starts keep no pipe of ours open.
  const child = spawn('bash', [join(root, 'deploy', 'infra.sh'), component, verb], {
    env,
    stdio: 'ignore',
    timeout: 180_000,
  });
  const code = await new Promise<number | null>((done) => child.once('exit', done));
  if (code !== 0) throw new Error(`infra.sh ${component} ${verb} exited with ${code}`);
}
