/**
 * `npm run stack`: real PostgreSQL, Redis and Kafka on loopback (deploy/infra.sh), and the
 * services as separate processes: control plane + ingest (which owns the embedded chdb) in one,
 * the proxy in another. Ctrl-C stops the services; `bash deploy/infra.sh all stop` stops the servers.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { NODE_FLAGS } from './node-flags';

const root = resolve(import.meta.dirname, '..');
const infra = join(root, 'deploy', 'infra.sh');
const dataDir = resolve(process.env.DATA_DIR ?? join(root, 'data', 'stack-services'));

execFileSync('bash', [infra, 'all', 'start'], { stdio: 'inherit' });
const infraEnv = Object.fromEntries(
  execFileSync('bash', [infra, 'all', 'env'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
);

const base = { ...process.env, ...infraEnv, DATA_DIR: dataDir };
// Built once here, so the two processes do not both find the build out of date.
execFileSync(process.execPath, [join(root, 'deploy', 'build.mjs')], { stdio: 'inherit' });
const serve = [...NODE_FLAGS, join(root, 'deploy', 'start.mjs')];
const children: ChildProcess[] = [
  spawn(process.execPath, serve, { env: { ...base, SERVICES: 'control-plane,ingest' }, stdio: 'inherit' }),
  spawn(process.execPath, serve, { env: { ...base, SERVICES: 'proxy' }, stdio: 'inherit' }),
];

let stopping = false;
const stop = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  for (const child of children) child.kill(signal);
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
for (const child of children) {
  child.on('exit', (code) => {
    if (!stopping && code !== 0) {
      console.error(`a service exited with code ${code}; stopping the stack`);
      stop('SIGTERM');
    }
    if (children.every((c) => c.exitCode !== null || c.signalCode !== null)) process.exit(code ?? 0);
  });
}
