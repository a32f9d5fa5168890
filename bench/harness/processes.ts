import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';

/**
 * How the benches and the end-to-end tests start a service: a process group of its own (so a
 * stop reaches everything it started), its output appended to `logFile`, and a stop that sends
 * `signal` to the group and a KILL after `graceMs`.
 */
export interface Spawned {
  child: ChildProcess;
  logFile: string;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
}

/** Whether any process of the process group `pgid` is still running. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

export function spawnGroup(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; logFile: string },
): Spawned {
  mkdirSync(dirname(options.logFile), { recursive: true });
  const log = createWriteStream(options.logFile, { flags: 'a' });
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    logFile: options.logFile,
    async stop(signal = 'SIGTERM', graceMs = 30_000) {
      const pid = child.pid;
      if (child.exitCode !== null || pid === undefined) return child.exitCode;
      process.kill(-pid, signal);
      const timer = setTimeout(() => {
        if (groupAlive(pid)) process.kill(-pid, 'SIGKILL');
      }, graceMs);
      const code = await exited;
      // The leader (npm, a shell) may exit before what it started has: wait for the whole group,
      // so that nothing is still writing into a directory the caller removes next.
      while (groupAlive(pid)) await new Promise((resolve) => setTimeout(resolve, 50));
      clearTimeout(timer);
      return code;
    },
  };
}

/**
 * The processes of a bench run: what it starts (each logged to a file of the run's directory,
 * in a process group of its own, by name for CPU accounting), the infrastructure it starts on
 * free loopback ports (deploy/infra.sh), the API calls it makes, and the stop that ends them all.
 */
export class BenchProcesses {
  readonly children: ChildProcess[] = [];
  /** The bench's processes by pid: the name each was started with (its CPU group). */
  readonly named = new Map<number, string>();
  /** How each process `spawnLogged` started is stopped alone (`stopLogged`). */
  private readonly spawned = new Map<ChildProcess, Spawned>();
  private stopInfra = () => {};

  constructor(
    /** The repository's root, where every process runs. */
    readonly root: string,
    /** The run's directory: logs, data, scripts; removed at the end. */
    readonly work: string,
  ) {}

  spawnLogged(name: string, command: string, argv: string[], env: NodeJS.ProcessEnv): ChildProcess {
    const spawned = spawnGroup(command, argv, {
      cwd: this.root,
      env,
      logFile: join(this.work, `${name}.log`),
    });
    const { child } = spawned;
    this.spawned.set(child, spawned);
    this.children.push(child);
    if (child.pid !== undefined) this.named.set(child.pid, name);
    return child;
  }

  /** Stops one process `spawnLogged` started (its group: TERM, KILL after 10 s) and forgets its name. */
  async stopLogged(child: ChildProcess): Promise<void> {
    if (child.pid !== undefined) this.named.delete(child.pid);
    await this.spawned.get(child)?.stop('SIGTERM', 10_000);
    this.spawned.delete(child);
  }

  /**
   * PostgreSQL, Redis and Kafka on free loopback ports, with their data in the run's directory:
   * their URLs (DATABASE_URL, REDIS_URL, KAFKA_BROKERS). Stopped by `shutdown`.
   */
  async startInfra(): Promise<Record<string, string>> {
    const ports = {
      REDIS_PORT: String(await freePort()),
      KAFKA_PORT: String(await freePort()),
      KAFKA_CONTROLLER_PORT: String(await freePort()),
      PG_PORT: String(await freePort()),
    };
    const env = { ...process.env, STACK_DIR: join(this.work, 'stack'), ...ports };
    const infra = join(this.root, 'deploy', 'infra.sh');
    this.stopInfra = () => execFileSync('bash', [infra, 'all', 'stop'], { stdio: 'inherit', env });
    execFileSync('bash', [infra, 'all', 'start'], { stdio: 'inherit', env, timeout: 300_000 });
    return Object.fromEntries(
      execFileSync('bash', [infra, 'all', 'env'], { env, encoding: 'utf8' })
        .trim()
        .split('\n')
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
  }

  /** A provider made with the admin CLI on `env`'s database: its sandbox key. */
  admin(env: NodeJS.ProcessEnv, name = 'Bench'): Promise<{ sandboxKey: string }> {
    return adminProvider(this.root, env, name);
  }

  /** Ends every process (TERM, then KILL after 3 s), the infrastructure, and the run's directory. */
  async shutdown(): Promise<void> {
    const signal = (name: NodeJS.Signals) => {
      for (const child of this.children) {
        if (child.pid !== undefined && child.exitCode === null) {
          try {
            process.kill(-child.pid, name);
          } catch {}
        }
      }
    };
    signal('SIGTERM');
    await new Promise((r) => setTimeout(r, 3000));
    signal('SIGKILL');
    try {
      this.stopInfra();
    } catch {}
    rmSync(this.work, { recursive: true, force: true });
  }
}

/** Runs the admin CLI exactly as a user would (`npm run admin -- …`) and parses its JSON output. */
export function runAdmin<T = Record<string, unknown>>(
  root: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<T> {
  return new Promise((resolve, reject) => {
    execFile(
      'npm',
      ['run', '-s', 'admin', '--', ...args],
      { cwd: root, env, timeout: 90_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`admin ${args.join(' ')} failed: ${stderr}`));
        else resolve(JSON.parse(stdout) as T);
      },
    );
  });
}

/** A provider made with the admin CLI on `env`'s database: its sandbox key. */
export const adminProvider = (root: string, env: NodeJS.ProcessEnv, name: string) =>
  runAdmin<{ sandboxKey: string }>(root, ['provider', 'create', '--name', name], env);

/** The first chunk a child writes to stdout (the bench's helpers print their port there). */
export const firstLine = (child: ChildProcess) =>
  new Promise<string>((done) => child.stdout?.once('data', (chunk: Buffer) => done(chunk.toString('utf8'))));

/**
 * Waits until `url` answers 200, at most `seconds`; with `service`, fails at once (with the end
 * of its log) if that process exits first.
 */
export async function waitFor(url: string, seconds = 120, service?: Spawned): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    if (service !== undefined && service.child.exitCode !== null)
      throw new Error(
        `${service.logFile} exited with ${service.child.exitCode}:\n${readFileSync(service.logFile, 'utf8').slice(-4000)}`,
      );
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${url} not ready within ${seconds} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** One call of the control plane's API with a key; a non-2xx answer throws with its body. */
export async function api<T>(
  base: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  // A kept-alive connection the service closed between two calls fails the first write: once more.
  const send = () =>
    fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const response = await send().catch(send);
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}
