// Builds the publishable package of the SDK into sdk/dist: ES modules for Node 20+ and other
// fetch runtimes (openapi-fetch left as a dependency), declarations from the sources, and the
// package.json a provider installs. `npm run sdk:build`, then `npm pack ./sdk/dist`.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');
const source = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
await build({
  entryPoints: [join(here, 'src', 'index.ts'), join(here, 'src', 'webhooks.ts')],
  outdir: dist,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['openapi-fetch', 'node:*'],
  logLevel: 'warning',
});
execFileSync(
  process.execPath,
  [
    join(here, '..', 'node_modules', 'typescript', 'bin', 'tsc'),
    '--declaration',
    '--emitDeclarationOnly',
    '--outDir',
    dist,
    '--rootDir',
    join(here, 'src'),
    '--target',
    'ES2023',
    '--module',
    'NodeNext',
    '--moduleResolution',
    'NodeNext',
    '--strict',
    '--skipLibCheck',
    '--types',
    'node',
    join(here, 'src', 'index.ts'),
  ],
  { stdio: 'inherit' },
);
// The generated types are a declaration file already: shipped as they are.
copyFileSync(join(here, 'src', 'schema.d.ts'), join(dist, 'schema.d.ts'));
writeFileSync(
  join(dist, 'package.json'),
  `${JSON.stringify(
    {
      name: source.name,
      version: source.version,
      description: source.description,
      license: 'UNLICENSED',
      type: 'module',
      engines: { node: '>=20' },
      exports: {
        '.': { types: './index.d.ts', default: './index.js' },
        './webhooks': { types: './webhooks.d.ts', default: './webhooks.js' },
      },
      dependencies: source.dependencies,
    },
    null,
    2,
  )}\n`,
);
copyFileSync(join(here, '..', 'docs', 'sdk.md'), join(dist, 'README.md'));
process.stdout.write(`built ${dist}\n`);
