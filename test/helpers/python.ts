import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A Python virtual environment with exact PyPI packages, made once per machine under
 * ~/.cache/mcp-meter (MCPMETER_CACHE), as bench/api-fuzz.sh makes schemathesis's. Answers the
 * environment's python. Needs python3 with venv (.ci/run installs python3-venv) and PyPI.
 */
export async function pythonWith(name: string, packages: string[]): Promise<string> {
  const cache = process.env.MCPMETER_CACHE ?? join(homedir(), '.cache', 'mcp-meter');
  const venv = join(cache, name);
  const python = join(venv, 'bin', 'python');
  const marker = join(venv, '.installed');
  if (existsSync(marker)) return python;
  mkdirSync(cache, { recursive: true });
  rmSync(venv, { recursive: true, force: true });
  await run('python3', ['-m', 'venv', venv]);
  await run(join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', ...packages], {
    timeout: 600_000,
  });
  await run('touch', [marker]);
  return python;
}
