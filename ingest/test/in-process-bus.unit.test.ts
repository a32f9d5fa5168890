import { createLogger } from '@mcp-meter/contracts/kit';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { describe, expect, it } from 'vitest';
import { usageRecord } from '../../test/helpers/usage-records';
import { InProcessUsageBus } from '../src/in-process-bus';

const logger = createLogger({ level: 'silent', name: 'bus-test' });
const record = (): UsageRecord => usageRecord({ customerRef: 'c' });

describe('the in-process bus as the ingest watermark', () => {
  it('is settled only once every record accepted before the call is written', async () => {
    const bus = new InProcessUsageBus({ batchSize: 100, flushIntervalMs: 10_000, retryDelayMs: 5, logger });
    const written: UsageRecord[] = [];
    let failing = true;
    // Nothing consumes yet: nothing accepted can be stored, and its publish has not resolved.
    let firstWritten = false;
    const first = bus.publish([record()]).then(() => {
      firstWritten = true;
    });
    expect(await bus.settled(20)).toBe(false);
    await bus.start(async (records) => {
      if (failing) throw new Error('store down');
      written.push(...records);
    });
    // A failing store holds the watermark back.
    expect(await bus.settled(30)).toBe(false);
    expect(written).toHaveLength(0);
    expect(firstWritten).toBe(false);
    failing = false;
    // A publish resolves once its records are written, like a Kafka acknowledgement.
    await bus.publish([record(), record()]);
    expect(written).toHaveLength(3);
    await first;
    expect(await bus.settled(1_000)).toBe(true);
    await bus.stop();
  });

  it('is settled at once when nothing was accepted', async () => {
    const bus = new InProcessUsageBus({ batchSize: 100, flushIntervalMs: 10_000, retryDelayMs: 5, logger });
    await bus.start(async () => {});
    expect(await bus.settled(0)).toBe(true);
    await bus.stop();
  });
});
