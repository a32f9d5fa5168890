import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * MCP Inspector's CLI (`@modelcontextprotocol/inspector`, v2), installed once per machine by
 * test/inspector/install.sh, on the conformance runner's Node 22: a client nobody here wrote.
 */
export async function inspectorCli() {
  const script = join(import.meta.dirname, '..', 'inspector', 'install.sh');
  const { stdout } = await run('bash', [script], { timeout: 600_000 });
  const dir = stdout.trim().split('\n').at(-1) as string;
  const node = join(dir, 'node');
  const launcher = join(
    dir,
    'node_modules',
    '@modelcontextprotocol',
    'inspector',
    'clients',
    'launcher',
    'build',
    'index.js',
  );

  /** What runs the CLI here, in place of `npx @modelcontextprotocol/inspector` in a command. */
  const command = `'${node}' '${launcher}'`;

  /**
   * One CLI run against the MCP server at `url` (Streamable HTTP): `method` with its options,
   * the token as a bearer header. Resolves to what it printed as JSON, with its exit code.
   */
  return Object.assign(
    async (
      url: string,
      token: string,
      method: string,
      options: string[] = [],
    ): Promise<{ code: number; output: Record<string, unknown>; stderr: string }> => {
      const args = [
        launcher,
        '--cli',
        url,
        '--transport',
        'http',
        '--header',
        `Authorization: Bearer ${token}`,
      ];
      const outcome = await run(node, [...args, '--method', method, ...options], { timeout: 60_000 }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error: { code?: number; stdout?: string; stderr?: string }) => {
          if (typeof error.stdout !== 'string' || typeof error.code !== 'number') throw error;
          return { code: error.code, stdout: error.stdout, stderr: error.stderr ?? '' };
        },
      );
      // A run that failed may print its error as JSON, or only a message on stderr.
      const printed = outcome.stdout.trim();
      return {
        code: outcome.code,
        output: printed === '' ? {} : (JSON.parse(printed) as Record<string, unknown>),
        stderr: outcome.stderr,
      };
    },
    { command },
  );
}
