// Module hooks registered by loader.mjs, after tsx's, so their `load` runs first: the repository's
// .ts/.mts files are compiled here by esbuild (the compiler tsx uses) for Node 20, with inline
// source maps; every other URL (and resolution) goes on to tsx. Two forms of the same hooks: the
// asynchronous ones for `module.register` (Node 20, off the main thread) and the synchronous ones
// for `module.registerHooks` (Node 22.15 and later, where tsx registers its own hooks that way,
// in the main thread, ahead of any registered off it).
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transform, transformSync } from 'esbuild';

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

function commonJsContext(specifier, context) {
  if (!COMMONJS_BUILDS.test(specifier)) return context;
  const conditions = context.conditions.filter((c) => c !== 'import');
  return { ...context, conditions: [...conditions, 'require'] };
}

/** The repository's TypeScript file at `url` (not a package's), or '' for anything else. */
function ownTypeScript(url) {
  const path = url.startsWith('file:') ? fileURLToPath(url) : '';
  return TYPESCRIPT.test(path) && !path.includes('/node_modules/') ? path : '';
}

function cacheFile(path, source) {
  const key = createHash('sha256')
    .update(JSON.stringify(OPTIONS))
    .update(path)
    .update('\0')
    .update(source)
    .digest('hex');
  return join(CACHE, `${key}.mjs`);
}

export async function resolve(specifier, context, nextResolve) {
  return nextResolve(specifier, commonJsContext(specifier, context));
}

export async function load(url, context, nextLoad) {
  const path = ownTypeScript(url);
  if (path === '') return nextLoad(url, context);
  const source = await readFile(path, 'utf8');
  const cached = cacheFile(path, source);
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

export function resolveSync(specifier, context, nextResolve) {
  return nextResolve(specifier, commonJsContext(specifier, context));
}

export function loadSync(url, context, nextLoad) {
  const path = ownTypeScript(url);
  if (path === '') return nextLoad(url, context);
  const source = readFileSync(path, 'utf8');
  const cached = cacheFile(path, source);
  try {
    return { format: 'module', source: readFileSync(cached, 'utf8'), shortCircuit: true };
  } catch {}
  const { code } = transformSync(source, { ...OPTIONS, sourcefile: path });
  try {
    mkdirSync(CACHE, { recursive: true });
    const partial = `${cached}.${process.pid}.tmp`;
    writeFileSync(partial, code);
    renameSync(partial, cached);
  } catch {}
  return { format: 'module', source: code, shortCircuit: true };
}
