// The console's build: console/ (React, Vite) made into static files under console/dist, which
// the control plane serves at /console. `npm start` (deploy/start.mjs) makes it when it is missing
// or older than a file of console/src; `npm run build` makes it with the services' build. Where
// Vite is not installed (the image, after its dev dependencies are pruned) the files built before
// are served as they are.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '..', '..');
const CONSOLE = join(root, 'console');
export const CONSOLE_DIST = join(CONSOLE, 'dist');

/** The newest modification time among the console's sources and build settings. */
function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  walk(join(CONSOLE, 'src'));
  for (const file of ['index.html', 'vite.config.ts', 'package.json'])
    newest = Math.max(newest, statSync(join(CONSOLE, file)).mtimeMs);
  // The API's generated types are the console's too.
  return Math.max(newest, statSync(join(root, 'sdk', 'src', 'schema.d.ts')).mtimeMs);
}

/** Whether console/dist is there and newer than every source. */
export function consoleUpToDate() {
  const index = join(CONSOLE_DIST, 'index.html');
  if (!existsSync(index)) return false;
  if (!existsSync(join(CONSOLE, 'src'))) return true;
  return statSync(index).mtimeMs >= newestSource();
}

/** Builds the console when it is missing or stale and Vite is at hand; answers where it is. */
export async function consoleBuilt({ force = false } = {}) {
  if (!force && consoleUpToDate()) return CONSOLE_DIST;
  let vite;
  try {
    vite = await import('vite');
  } catch {
    // No Vite (dev dependencies pruned): serve what was built, or say at /console that nothing was.
    return CONSOLE_DIST;
  }
  // React's production build whatever NODE_ENV the caller runs under (vitest sets `test`, and
  // Vite would then bundle React's development build, half as large again and slower).
  const nodeEnv = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    await vite.build({ configFile: join(CONSOLE, 'vite.config.ts'), logLevel: 'warn', mode: 'production' });
  } finally {
    if (nodeEnv === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = nodeEnv;
  }
  return CONSOLE_DIST;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await consoleBuilt({ force: process.argv.includes('--force') });
  process.stdout.write('built console/dist\n');
}
