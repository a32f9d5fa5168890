// The Kafka producer thread run from source (tests, `npm run stack`): on Node 20 tsx registers its
// module hooks in the main thread only, and a worker thread inherits none, so the thread registers
// them itself before loading its TypeScript. A process started from the build runs the build's
// own entry instead (deploy/build.mjs: kafka-producer-thread.js).
import { register } from 'tsx/esm/api';

register();
await import('./producer-thread-entry.ts');
