// Module hooks registered by loader.mjs, after tsx's, so their `load` runs first: the repository's
// .ts/.mts files are compiled here by esbuild (the compiler tsx uses) for Node 20, with inline
// source maps; every other URL (and resolution) goes on to tsx.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';

const TYPESCRIPT = /\.m?ts$/;

export async function load(url, context, nextLoad) {
  const path = url.startsWith('file:') ? fileURLToPath(url) : '';
  if (!TYPESCRIPT.test(path) || path.includes('/node_modules/')) return nextLoad(url, context);
  const { code } = await transform(await readFile(path, 'utf8'), {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline',
    sourcefile: path,
  });
  return { format: 'module', source: code, shortCircuit: true };
}
