import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';

/**
 * The bench's tools in C (bench/load/*.c), as their tests run them: built with the machine's C
 * compiler (as bench/load/install.sh builds them) into the test's own directory.
 */
export function buildBenchTool(name: 'open-load' | 'origin' | 'relay', dir: string): string {
  const binary = join(dir, name);
  execFileSync('cc', [
    '-O2',
    '-o',
    binary,
    join(import.meta.dirname, '..', '..', 'bench', 'load', `${name}.c`),
  ]);
  return binary;
}

/** Starts a tool that prints `{"port":N}` once listening (the relay, the origin): it and its port. */
export async function startListening(
  binary: string,
  args: string[],
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const first = await new Promise<string>((resolve) =>
    child.stdout?.once('data', (chunk: Buffer) => resolve(chunk.toString('utf8'))),
  );
  return { child, port: (JSON.parse(first) as { port: number }).port };
}
