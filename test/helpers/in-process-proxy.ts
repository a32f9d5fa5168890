import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, readEnv } from '@mcp-meter/contracts/kit';
import { MemoryCounterStore } from '@mcp-meter/contracts/limits';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { TEST_SECRET_KEY, type TestControlPlane } from './control-plane';

/**
 * The proxy in the test's process, on the control plane harness's snapshots and bus, as the
 * all-in-one service runs it: limit counters in memory, its own spool directory (removed on
 * close), talking to the control plane at `controlPlaneUrl`.
 */
export async function startInProcessProxy(harness: TestControlPlane, controlPlaneUrl: string, name: string) {
  await harness.controlPlane.tokens.publish();
  const spill = mkdtempSync(join(tmpdir(), `mcpmeter-${name}-`));
  const env = readEnv({
    PROXY_PORT: '0',
    PROXY_WORKERS: '1',
    CONTROL_PLANE_URL: controlPlaneUrl,
    SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    PROXY_SPILL_DIR: spill,
    EMITTER_LINGER_MS: '5',
  });
  const proxy = await startProxy({
    config: env.done({ proxy: readProxyConfig(env) }).proxy,
    snapshots: harness.snapshots,
    counters: new MemoryCounterStore(),
    publisher: harness.bus,
    logger: createLogger({ level: 'silent', name }),
  });
  return {
    url: proxy.url,
    async close() {
      await proxy.close();
      rmSync(spill, { recursive: true, force: true });
    },
  };
}
