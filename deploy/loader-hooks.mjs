// Module hooks registered by loader.mjs, after tsx's, so their `load` runs first: the repository's
// .ts/.mts files are compiled here by esbuild (the compiler tsx uses) for Node 20, with inline
// source maps; every other URL (and resolution) goes on to tsx.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';

// Compiled files are kept by the hash of their source (and the options below), so a restart
// reads them instead of compiling again: a control plane starts about a second sooner.
const CACHE = fileURLToPath(new URL('../node_modules/.cache/mcp-meter-ts/', import.meta.url));
const OPTIONS = { loader: 'ts', format: 'esm', target: 'node20', sourcemap: 'inline' };
let cacheReady;

const TYPESCRIPT = /\.m?ts$/;

// Packages whose ES module builds are hundreds of files, each one a round trip to this hooks
// thread: their CommonJS builds load through require, which these hooks never see (TypeBox:
// 762 modules, Stripe: 558; about a second of a control plane's start). One build of each is
// ever loaded, since every import of them comes through here.
const COMMONJS_BUILDS = /^(@sinclair\/typebox|stripe)(\/|$)/;

export async function resolve(specifier, context, nextResolve) {
  if (!COMMONJS_BUILDS.test(specifier)) return nextResolve(specifier, context);
  const conditions = context.conditions.filter((c) => c !== 'import');
  return nextResolve(specifier, { ...context, conditions: [...conditions, 'require'] });
}

export async function load(url, context, nextLoad) {
  const path = url.startsWith('file:') ? fileURLToPath(url) : '';
  if (!TYPESCRIPT.test(path) || path.includes('/node_modules/')) return nextLoad(url, context);
  const source = await readFile(path, 'utf8');
  const key = createHash('sha256')
    .update(JSON.stringify(OPTIONS))
    .update(path)
    .update('\0')
    .update(source)
    .digest('hex');
  const cached = join(CACHE, `${key}.mjs`);
  try {
    return { format: 'module', source: await readFile(cached, 'utf8'), shortCircuit: true };
  } catch {}
  const { code } = await transform(source, { ...OPTIONS, sourcefile: path });
  try {
    cacheReady ??= mkdir(CACHE, { recursive: true });
    await cacheReady;
    // Written aside then renamed: a concurrent start never reads half a file.
    const partial = `${cached}.${process.pid}.tmp`;
    await writeFile(partial, code);
    await rename(partial, cached);
  } catch {}
  return { format: 'module', source: code, shortCircuit: true };
}
