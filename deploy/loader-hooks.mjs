// Module hooks registered by loader.mjs, after tsx's, so their `load` runs first: a .ts/.mts file
// is compiled here by esbuild (the compiler tsx uses) with the repository's settings and source
// maps, and nothing else changes; every other URL goes on to tsx.
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
    tsconfigRaw: { compilerOptions: { target: 'ES2023', verbatimModuleSyntax: false } },
  });
  return { format: 'module', source: code, shortCircuit: true };
}
