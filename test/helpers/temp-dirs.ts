import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';

/**
 * A maker of temporary directories named `mcpmeter-<prefix>-…`, each removed after the test that
 * made it. Call at a test file's top level (it registers the file's `afterEach`).
 */
export function tempDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), `mcpmeter-${prefix}-`));
    dirs.push(dir);
    return dir;
  };
}
