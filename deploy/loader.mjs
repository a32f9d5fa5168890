// How the services run TypeScript: `node --import ./deploy/loader.mjs deploy/serve.ts`.
// tsx's ES module hooks resolve modules (extensionless and workspace imports; its CommonJS
// require hook is left out: nothing here requires TypeScript, and it slowed every require); the
// hooks in loader-hooks.mjs compile this repository's .ts files without tsx's `keepNames`, which
// wraps every named closure in a call that redefines its `name`: 4.7% of the proxy's CPU per call
// in a profile of the full path (issue 5 notes). Where Node has `module.registerHooks` (22.15 and
// later) tsx registers its hooks in the main thread, which run ahead of any `module.register`ed
// ones, so ours are registered the same way, after tsx's, to run first.
import * as nodeModule from 'node:module';
import 'tsx/esm';

if (typeof nodeModule.registerHooks === 'function') {
  const { resolveSync, loadSync } = await import('./loader-hooks.mjs');
  nodeModule.registerHooks({ resolve: resolveSync, load: loadSync });
} else {
  nodeModule.register('./loader-hooks.mjs', import.meta.url);
}
