import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openUsageStore, type UsageStoreHandle } from '@mcp-meter/ingest';

/** Real ClickHouse (chdb) in a fresh directory; one per test process, removed on close. */
export async function openTestUsageStore(prefix: string): Promise<UsageStoreHandle & { dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), `mcpmeter-${prefix}-ch-`));
  const handle = await openUsageStore({
    url: undefined,
    user: undefined,
    password: undefined,
    chdbPath: dir,
    database: 'mcpmeter',
  });
  return {
    ...handle,
    dir,
    close: async () => {
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
