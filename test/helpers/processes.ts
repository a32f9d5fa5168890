import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pollUntil } from './poll';

export const root = resolve(import.meta.dirname, '..', '..');

export interface Service {
  child: ChildProcess;
  logFile: string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Spawns a command in its own process group with output to a log file (read it when a test fails). */
export function spawnService(
  command: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; logDir: string; name: string },
): Service {
  mkdirSync(options.logDir, { recursive: true });
  const logFile = join(options.logDir, `${options.name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(command, args, {
    cwd: root,
    env: options.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    logFile,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.pid === undefined) return child.exitCode;
      process.kill(-child.pid, signal);
      const timer = setTimeout(() => child.pid !== undefined && process.kill(-child.pid, 'SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Waits for 200 on /healthz; fails at once, with the service's log, if the process has exited. */
export async function waitHealthy(url: string, service: Service, timeoutMs = 90_000): Promise<void> {
  await pollUntil(
    async () => {
      if (service.child.exitCode !== null) {
        throw new ServiceExited(
          `${service.logFile} exited with ${service.child.exitCode}:\n${readFileSync(service.logFile, 'utf8').slice(-4000)}`,
        );
      }
      return (await fetch(`${url}/healthz`)).status;
    },
    (status) => status === 200,
    {
      timeoutMs,
      intervalMs: 250,
      what: `${url}/healthz`,
      rethrow: (error) => error instanceof ServiceExited,
    },
  );
}

class ServiceExited extends Error {}

/** Runs the admin CLI exactly as a user would and parses its JSON output. */
export function runAdmin<T = Record<string, unknown>>(args: string[], env: NodeJS.ProcessEnv): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      'npm',
      ['run', '-s', 'admin', '--', ...args],
      { cwd: root, env, timeout: 90_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`admin ${args.join(' ')} failed: ${stderr}`));
        else resolvePromise(JSON.parse(stdout) as T);
      },
    );
  });
}
