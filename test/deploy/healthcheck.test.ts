import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startListeningControlPlane, type TestControlPlane } from '../helpers/control-plane';

/** deploy/healthcheck.mjs, the containers' health check, against a running control plane. */
const script = join(import.meta.dirname, '..', '..', 'deploy', 'healthcheck.mjs');
const check = (env: NodeJS.ProcessEnv) =>
  new Promise<number>((resolve) =>
    execFile(
      process.execPath,
      [script],
      { env: { PATH: process.env.PATH, ...env }, timeout: 20_000 },
      (error) => resolve(error === null ? 0 : typeof error.code === 'number' ? error.code : 1),
    ),
  );

describe('the container health check', () => {
  let harness: TestControlPlane;
  let port: number;
  beforeAll(async () => {
    ({ harness, port } = await startListeningControlPlane({ bodyLimitBytes: 64 * 1024 }));
  });
  afterAll(() => harness?.close());

  it("asks /healthz of the service the container runs, and passes ingest's process alone when it has no port", async () => {
    const closed = String(await freePort());
    // The all-in-one and the control plane answer on PORT.
    expect(await check({ PORT: String(port) })).toBe(0);
    expect(await check({ SERVICES: 'control-plane', PORT: String(port) })).toBe(0);
    expect(await check({ SERVICES: 'control-plane', PORT: closed })).toBe(1);
    // A proxy on PROXY_PORT (here the control plane's, which answers /healthz the same way).
    expect(await check({ SERVICES: 'proxy', PORT: closed, PROXY_PORT: String(port) })).toBe(0);
    expect(await check({ SERVICES: 'proxy', PORT: String(port), PROXY_PORT: closed })).toBe(1);
    // Ingest alone serves no HTTP, unless INGEST_METRICS_PORT is set (its /healthz answers there).
    expect(await check({ SERVICES: 'ingest', PORT: closed })).toBe(0);
    expect(await check({ SERVICES: 'ingest', PORT: closed, INGEST_METRICS_PORT: String(port) })).toBe(0);
    expect(await check({ SERVICES: 'ingest', PORT: String(port), INGEST_METRICS_PORT: closed })).toBe(1);
  });
});
