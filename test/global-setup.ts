import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import type { TestProject } from 'vitest/node';

export interface Infra {
  redisUrl: string;
  kafkaBrokers: string;
  databaseUrl: string;
  /** Base for per-test databases on the same server (append a database name). */
  postgresServerUrl: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    infra: Infra;
  }
}

const root = resolve(import.meta.dirname, '..');

/** Real PostgreSQL, Redis and Kafka on free loopback ports, once for the whole run. */
export default async function setup(project: TestProject) {
  const stackDir = mkdtempSync(join(tmpdir(), 'mcpmeter-test-'));
  const env = {
    ...process.env,
    STACK_DIR: stackDir,
    REDIS_PORT: String(await freePort()),
    KAFKA_PORT: String(await freePort()),
    KAFKA_CONTROLLER_PORT: String(await freePort()),
    PG_PORT: String(await freePort()),
  };
  const infra = join(root, 'deploy', 'infra.sh');
  // The services' build (deploy/build.mjs), made once here: tests that spawn them start it.
  execFileSync(process.execPath, [join(root, 'deploy', 'build.mjs')], { stdio: 'inherit', timeout: 120_000 });
  // The console's static files (console/dist), served at /console by every control plane.
  execFileSync(process.execPath, [join(root, 'deploy', 'console-build.mjs')], {
    stdio: 'inherit',
    timeout: 180_000,
  });
  try {
    execFileSync('bash', [infra, 'all', 'start'], { env, stdio: 'inherit', timeout: 200_000 });
  } catch (error) {
    // Whatever did start is stopped: a failed setup leaves no server running.
    execFileSync('bash', [infra, 'all', 'stop'], { env, stdio: 'inherit', timeout: 120_000 });
    throw error;
  }
  const urls = Object.fromEntries(
    execFileSync('bash', [infra, 'all', 'env'], { env, encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  const databaseUrl = urls.DATABASE_URL ?? '';
  project.provide('infra', {
    redisUrl: urls.REDIS_URL ?? '',
    kafkaBrokers: urls.KAFKA_BROKERS ?? '',
    databaseUrl,
    postgresServerUrl: databaseUrl.slice(0, databaseUrl.lastIndexOf('/') + 1),
  });
  return () => {
    execFileSync('bash', [infra, 'all', 'stop'], { env, stdio: 'inherit', timeout: 120_000 });
    rmSync(stackDir, { recursive: true, force: true });
  };
}
