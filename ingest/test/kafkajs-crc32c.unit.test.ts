import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { kafkaChecksum } from '../src/kafkajs-crc32c';

const require = createRequire(import.meta.url);
/** kafkajs's own JavaScript CRC-32C, which the native one replaces. */
const javascript: (buffer: Buffer) => number = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C.js');

describe('kafkajs record-batch checksum', () => {
  it("is the native CRC-32C, equal to kafkajs's own for every size", () => {
    for (const size of [0, 1, 7, 8, 9, 63, 64, 65, 1000, 4096, 100_003]) {
      const bytes = randomBytes(size);
      expect(kafkaChecksum(bytes)).toBe(javascript(bytes));
    }
    // The check value of CRC-32C (RFC 3720, B.4).
    expect(kafkaChecksum(Buffer.from('123456789'))).toBe(0xe3069283);
  });

  it('is what kafkajs takes when it loads its produce request', () => {
    const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0');
    expect(RecordBatch).toBeTypeOf('function');
    expect(require('kafkajs/src/protocol/recordBatch/crc32C/index.js')).toBe(kafkaChecksum);
  });
});
