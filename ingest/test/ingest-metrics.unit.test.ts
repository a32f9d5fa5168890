import { afterEach, describe, expect, it, vi } from 'vitest';
import { GROUP_LAG_EVERY_MS, IngestMetrics } from '../src/ingest-metrics';

const groupLag = (page: string) => /^mcpmeter_ingest_kafka_group_lag_messages (\S+)$/m.exec(page)?.[1];

/** Lets the reading a render started settle. */
const settle = () => vi.advanceTimersByTimeAsync(0);

describe("the ingest page's group lag, read from Kafka in the background of scrapes", () => {
  afterEach(() => vi.useRealTimers());

  it('shows the last reading, reads again only once it is old, and leaves the page when a read fails', async () => {
    vi.useFakeTimers();
    const answers: Array<number | Error> = [7, 3, new Error('broker down'), 0];
    const read = vi.fn(async () => {
      const next = answers.shift();
      if (next instanceof Error) throw next;
      return next ?? Number.NaN;
    });
    const metrics = new IngestMetrics();
    metrics.followGroup(read);
    // The first scrape starts the first reading and shows nothing yet.
    expect(groupLag(metrics.render())).toBeUndefined();
    await settle();
    expect(groupLag(metrics.render())).toBe('7');
    expect(groupLag(metrics.render())).toBe('7');
    expect(read).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(GROUP_LAG_EVERY_MS);
    expect(groupLag(metrics.render())).toBe('7');
    await settle();
    expect(groupLag(metrics.render())).toBe('3');
    // Kafka does not answer: the figure goes, rather than stand for Kafka's.
    await vi.advanceTimersByTimeAsync(GROUP_LAG_EVERY_MS);
    metrics.render();
    await settle();
    expect(groupLag(metrics.render())).toBeUndefined();
    await vi.advanceTimersByTimeAsync(GROUP_LAG_EVERY_MS);
    metrics.render();
    await settle();
    expect(groupLag(metrics.render())).toBe('0');
    expect(read).toHaveBeenCalledTimes(4);
  });

  it('gives up on a reading that hangs, and tries again later', async () => {
    vi.useFakeTimers();
    let calls = 0;
    const metrics = new IngestMetrics();
    metrics.followGroup(() => {
      calls++;
      return calls === 1 ? Promise.resolve(5) : new Promise<number>(() => {});
    });
    metrics.render();
    await settle();
    expect(groupLag(metrics.render())).toBe('5');
    await vi.advanceTimersByTimeAsync(GROUP_LAG_EVERY_MS);
    metrics.render();
    // The hung reading is given up after its timeout: the stale 5 leaves the page.
    await vi.advanceTimersByTimeAsync(6_000);
    expect(groupLag(metrics.render())).toBeUndefined();
    await vi.advanceTimersByTimeAsync(GROUP_LAG_EVERY_MS);
    metrics.render();
    expect(calls).toBe(3);
  });
});
