import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadSecretKey, seal, unseal } from '@mcp-meter/contracts/snapshots';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'secret-test-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the deployment secret in DATA_DIR', () => {
  it('services starting together on an empty DATA_DIR all read the one secret that was written', async () => {
    const dataDir = join(scratch(), 'data');
    // Every process loads its code first, then spins until the same instant, so the creations overlap.
    const startAt = Date.now() + 2_000;
    const script = `import { loadSecretKey } from ${JSON.stringify(join(__dirname, '../src/snapshots/secrets.ts'))};
while (Date.now() < ${startAt});
process.stdout.write(loadSecretKey(undefined, ${JSON.stringify(dataDir)}).toString('hex'));`;
    const outputs = await Promise.all(
      Array.from({ length: 6 }, () =>
        run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]).then((r) => r.stdout),
      ),
    );
    const onDisk = readFileSync(join(dataDir, 'secret.key'), 'utf8');
    expect(onDisk).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(outputs)).toEqual(new Set([onDisk]));
    // No drafts left behind.
    expect(readdirSync(dataDir)).toEqual(['secret.key']);
  });

  it('refuses a malformed SECRET_KEY or secret file, and seals with the key it loaded', () => {
    expect(() => loadSecretKey('abc', scratch())).toThrow(/SECRET_KEY: expected 64 hexadecimal/);
    const key = loadSecretKey(undefined, scratch());
    expect(unseal(key, seal(key, 'origin-api-key'))).toBe('origin-api-key');
    expect(() => unseal(loadSecretKey(undefined, scratch()), seal(key, 'x'))).toThrow();
    const truncated = scratch();
    writeFileSync(join(truncated, 'secret.key'), 'abcd');
    expect(() => loadSecretKey(undefined, truncated)).toThrow(/not a 32-byte hex secret/);
  });
});
