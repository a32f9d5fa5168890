// How the services run: `node deploy/start.mjs` (what `npm start` does) starts deploy/serve.ts
// from its build (deploy/build.mjs), made first when the source changed since the last one.
// Stack traces name the bundle's files; NODE_OPTIONS=--enable-source-maps maps them back to the
// TypeScript source (it adds a few hundred milliseconds to a start).
import { built } from './build.mjs';
import { consoleBuilt } from './console-build.mjs';

// The console's static files (console/dist), made first when missing or older than their source.
await consoleBuilt();
await import(await built());
