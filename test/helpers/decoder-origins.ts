import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { root } from './processes';

const run = promisify(execFile);

/** What a decoder origin ran (tool calls by name) and every request line it was sent. */
export interface DecoderReport {
  ran: Record<string, number>;
  lines: string[];
}

export interface DecoderOrigin {
  name: string;
  url: string;
  report(): Promise<DecoderReport>;
  close(): Promise<void>;
}

/** Starts `command`, which prints its port on its first line; answers the origin. */
async function startPrinted(name: string, command: string, args: string[]): Promise<DecoderOrigin> {
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.once('line', (line) => resolve(Number(line.trim())));
    child.once('exit', (code) => reject(new Error(`${name} origin exited with ${code} before listening`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    name,
    url,
    async report() {
      return (await (await fetch(`${url}/__report`)).json()) as DecoderReport;
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * An origin that decodes with Go's encoding/json (test/origins/go), built once per machine with
 * the Go toolchain into the cache (standard library only: nothing is downloaded).
 */
export async function startGoOrigin(): Promise<DecoderOrigin> {
  const cache = process.env.MCPMETER_CACHE ?? join(homedir(), '.cache', 'mcp-meter');
  mkdirSync(cache, { recursive: true });
  const binary = join(cache, 'go-decoder-origin');
  // Built every run (seconds once Go's build cache is warm), so a change to the source is taken.
  await run('go', ['build', '-o', binary, '.'], {
    cwd: join(root, 'test', 'origins', 'go'),
    timeout: 300_000,
    env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
  });
  if (!existsSync(binary)) throw new Error('the Go origin did not build');
  return startPrinted('go', binary, ['0']);
}

/** An origin that decodes with Python's json module (test/origins/python_origin.py). */
export function startPythonOrigin(): Promise<DecoderOrigin> {
  return startPrinted('python', 'python3', [join(root, 'test', 'origins', 'python_origin.py'), '0']);
}
