import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'mcpmeter-loader-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Type syntax on line 1, a named closure, and a throw on line 5: what the services' sources look like.
const FIXTURE = `const limit: number = 3;
export function outer(): () => number { const inner = (): number => limit; return inner; }
const fn = outer();
console.log(JSON.stringify({ name: fn.name, source: outer.toString(), value: fn() }));
throw new Error('from line 5');
`;

describe('deploy/loader.mjs, how npm start runs TypeScript', () => {
  it('compiles without keepNames wrappers, keeps names and maps stack traces to the .ts source', async () => {
    const file = join(dir, 'fixture.ts');
    writeFileSync(file, FIXTURE);
    const failure = await promisify(execFile)(process.execPath, ['--import', './deploy/loader.mjs', file], {
      cwd: root,
    }).then(
      () => undefined,
      (error: { stdout: string; stderr: string }) => error,
    );
    expect(failure).toBeDefined();
    const printed = JSON.parse(failure?.stdout.trim() ?? '{}') as {
      name: string;
      source: string;
      value: number;
    };
    expect(printed.value).toBe(3);
    expect(printed.name).toBe('inner'); // the engine names it; no wrapper needed
    expect(printed.source).not.toContain('__name');
    expect(failure?.stderr).toContain(`${file}:5`);
  });
});
