import { createRequire } from 'node:module';
import { crc32c } from '@node-rs/crc32';

/**
 * kafkajs 2.2.4 checksums every record batch it produces with CRC-32C written in JavaScript, a
 * byte at a time: 2.3% of the metered proxy's CPU in a profile of the benchmark, where
 * @node-rs/crc32's SIMD implementation computes the same checksum about ten times faster. The
 * module kafkajs takes it from is loaded into the require cache now, and its export replaced
 * with the native one (same contract: a Buffer in, an unsigned 32-bit checksum out). kafkajs
 * requires its produce request, and with it that module, only at the first produce, so the
 * replacement is in place however the imports were ordered. The broker verifies every batch's
 * checksum, so a wrong one would fail every produce (the tests produce through a real broker).
 */
const require = createRequire(import.meta.url);
const file = require.resolve('kafkajs/src/protocol/recordBatch/crc32C/index.js');
require(file);
const cached = require.cache[file];

export const kafkaChecksum = (buffer: Buffer): number => crc32c(buffer) >>> 0;

if (cached !== undefined) cached.exports = kafkaChecksum;
