// The admin CLI from the services' build (deploy/build.mjs): what `npm run admin --` runs from the
// TypeScript sources, for installations without dev dependencies (the container image):
//   node deploy/admin.mjs provider create --name "Acme Tools"
import { dirname, join } from 'node:path';
import { built } from './build.mjs';

await import(join(dirname(await built()), 'admin.js'));
