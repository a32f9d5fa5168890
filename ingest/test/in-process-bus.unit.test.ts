import { createLogger } from '@mcp-meter/contracts/kit';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { describe, expect, it, vi } from 'vitest';
import { usageRecord } from '../../test/helpers/usage-records';
import { InProcessUsageBus, PUBLISH_LINGER_MS } from '../src/in-process-bus';

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

  it('writes a whole batch at once, also one published during a write; a part of one lingers', async () => {
    vi.useFakeTimers();
    try {
      const bus = new InProcessUsageBus({ batchSize: 3, flushIntervalMs: 10_000, retryDelayMs: 5, logger });
      const writes: number[] = [];
      let release = () => {};
      await bus.start(async (records) => {
        writes.push(records.length);
        // The first write holds until released: publishes meanwhile queue behind it.
        if (writes.length === 1) await new Promise<void>((resolve) => (release = resolve));
      });
      const done: string[] = [];
      const first = bus.publish([record(), record(), record()]).then(() => done.push('first'));
      await vi.advanceTimersByTimeAsync(0);
      expect(writes).toEqual([3]);
      const second = bus.publish([record(), record(), record()]).then(() => done.push('second'));
      release();
      // No time passes: a whole batch does not wait the linger, however many came before it.
      await vi.advanceTimersByTimeAsync(0);
      expect(writes).toEqual([3, 3]);
      expect(done).toEqual(['first', 'second']);
      await Promise.all([first, second]);
      const part = bus.publish([record()]).then(() => done.push('part'));
      await vi.advanceTimersByTimeAsync(PUBLISH_LINGER_MS - 10);
      expect(writes).toEqual([3, 3]);
      await vi.advanceTimersByTimeAsync(20);
      expect(writes).toEqual([3, 3, 1]);
      await part;
      await bus.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('does not write back to back while the store fails, even with a whole batch waiting', async () => {
    vi.useFakeTimers();
    try {
      const bus = new InProcessUsageBus({ batchSize: 2, flushIntervalMs: 10_000, retryDelayMs: 5, logger });
      let attempts = 0;
      let failing = true;
      await bus.start(async () => {
        attempts++;
        // Bounded, so that a bus retrying in a loop fails this test rather than hanging it.
        if (failing && attempts < 50) throw new Error('store down');
      });
      const published = bus.publish([record(), record(), record(), record()]);
      await vi.advanceTimersByTimeAsync(0);
      expect(attempts).toBe(1);
      // A retry a linger later, not a loop.
      await vi.advanceTimersByTimeAsync(PUBLISH_LINGER_MS - 1);
      expect(attempts).toBe(1);
      await vi.advanceTimersByTimeAsync(2);
      expect(attempts).toBe(2);
      failing = false;
      await vi.advanceTimersByTimeAsync(PUBLISH_LINGER_MS + 1);
      await published;
      expect(attempts).toBe(4);
      await bus.stop();
    } finally {
      vi.useRealTimers();
    }
  });
});
