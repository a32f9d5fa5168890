import { createLogger } from '@mcp-meter/contracts/kit';
import type { UsagePublisher } from '@mcp-meter/contracts/usage';
import type { UsageRecord } from '@mcp-meter/contracts/usage-record';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BatchingUsageEmitter } from '../src/emitter';

// Unit tests of the emitter's batching logic: the publisher is a recorder, the clock is fake.

const record = (i: number): UsageRecord => ({
  id: `rec_${i}`,
  providerId: 'prv_1',
  environment: 'sandbox',
  meterRef: 'mtr_1',
  meterName: 'requests',
  customerRef: 'cus_1',
  value: 1,
  timestamp: new Date(0).toISOString(),
  properties: {},
});

/** Records every publish; each takes `publishMs` of fake time. */
function recordingPublisher(publishMs: number) {
  const batches: Array<{ at: number; ids: string[] }> = [];
  const publisher: UsagePublisher = {
    async close() {},
    async publish(records) {
      batches.push({ at: performance.now(), ids: records.map((r) => r.id) });
      await new Promise((resolve) => setTimeout(resolve, publishMs));
    },
  };
  return { publisher, batches };
}

const options = { maxBatch: 1000, lingerMs: 100, maxQueued: 100_000, retryDelayMs: 50 };

describe('BatchingUsageEmitter batching', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('publishes once the oldest record has lingered, with everything emitted meanwhile', async () => {
    const { publisher, batches } = recordingPublisher(0);
    const emitter = new BatchingUsageEmitter(publisher, {
      ...options,
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    const start = performance.now();
    for (let i = 0; i < 10; i++) {
      emitter.emit(record(i));
      await vi.advanceTimersByTimeAsync(5);
    }
    await vi.advanceTimersByTimeAsync(49); // 99 ms after the first record
    expect(batches).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches).toHaveLength(1);
    expect(batches[0]?.ids).toHaveLength(10);
    expect((batches[0]?.at ?? 0) - start).toBe(100);
  });

  it('does not publish back to back under steady load: one publish per linger', async () => {
    // Publishes take 20 ms; a record arrives every millisecond for 1 s.
    const { publisher, batches } = recordingPublisher(20);
    const emitter = new BatchingUsageEmitter(publisher, {
      ...options,
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    for (let i = 0; i < 1000; i++) {
      emitter.emit(record(i));
      await vi.advanceTimersByTimeAsync(1);
    }
    const flushed = emitter.flush();
    await vi.advanceTimersByTimeAsync(200);
    await flushed;
    // Back to back would be one publish per 20 ms (about 50); lingering gives one per 100 ms.
    expect(batches.length).toBeGreaterThanOrEqual(10);
    expect(batches.length).toBeLessThanOrEqual(11);
    for (let i = 1; i < batches.length - 1; i++) {
      expect((batches[i]?.at ?? 0) - (batches[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(100);
    }
    const ids = batches.flatMap((b) => b.ids);
    expect(ids).toEqual(Array.from({ length: 1000 }, (_, i) => `rec_${i}`));
    expect(emitter.stats()).toMatchObject({ emitted: 1000, published: 1000, queued: 0 });
  });

  it('publishes a full batch at once, without lingering', async () => {
    const { publisher, batches } = recordingPublisher(0);
    const emitter = new BatchingUsageEmitter(publisher, {
      ...options,
      maxBatch: 50,
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    for (let i = 0; i < 120; i++) emitter.emit(record(i));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches.map((b) => b.ids.length)).toEqual([50, 50]);
    await vi.advanceTimersByTimeAsync(100);
    expect(batches.map((b) => b.ids.length)).toEqual([50, 50, 20]);
  });

  it("publishes at least a bus's whole batch at once, where the bus names one", async () => {
    const { publisher, batches } = recordingPublisher(0);
    const emitter = new BatchingUsageEmitter(
      { ...publisher, wholeBatch: 80 },
      { ...options, maxBatch: 50, logger: createLogger({ level: 'silent', name: 'test' }) },
    );
    for (let i = 0; i < 120; i++) emitter.emit(record(i));
    await vi.advanceTimersByTimeAsync(0);
    expect(batches.map((b) => b.ids.length)).toEqual([80]);
    await vi.advanceTimersByTimeAsync(100);
    expect(batches.map((b) => b.ids.length)).toEqual([80, 40]);
  });

  it('flush publishes everything without lingering, also while a publish is in flight', async () => {
    const { publisher, batches } = recordingPublisher(20);
    const emitter = new BatchingUsageEmitter(publisher, {
      ...options,
      logger: createLogger({ level: 'silent', name: 'test' }),
    });
    emitter.emit(record(0));
    await vi.advanceTimersByTimeAsync(100); // first publish starts, in flight for 20 ms
    expect(batches).toHaveLength(1);
    emitter.emit(record(1));
    emitter.emit(record(2));
    const flushed = emitter.flush();
    await vi.advanceTimersByTimeAsync(40);
    await flushed;
    expect(batches.map((b) => b.ids)).toEqual([['rec_0'], ['rec_1', 'rec_2']]);
    // The second publish followed the first at once, not a linger later.
    expect((batches[1]?.at ?? 0) - (batches[0]?.at ?? 0)).toBe(20);
    expect(emitter.stats()).toMatchObject({ published: 3, queued: 0 });
  });
});
