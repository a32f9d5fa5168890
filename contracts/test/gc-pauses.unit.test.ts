import { describe, expect, it } from 'vitest';
import { GcPauses } from '../src/metrics';

describe('the garbage-collection pause metrics', () => {
  it('count pauses by kind, add up their time, and keep the longest until the next render', async () => {
    const pauses = new GcPauses('test_gc');
    try {
      expect(pauses.render()).not.toMatch(/test_gc_pauses_total\{/);
      // Garbage enough for the young generation to be collected several times over, made again
      // until the observer (which hears of pauses in a later turn) has heard of one: on a busy
      // machine one round's pauses may not have been reported 50 ms later.
      let page = '';
      for (let round = 0; round < 40 && !/test_gc_pauses_total\{kind="minor"\}/.test(page); round++) {
        let held: Array<{ i: number; text: string }> = [];
        for (let i = 0; i < 300_000; i++) {
          held.push({ i, text: `item ${i}` });
          if (held.length === 1_000) held = [];
        }
        expect(held.length).toBe(0);
        await new Promise((resolve) => setTimeout(resolve, 50));
        page = pauses.render();
      }
      const count = Number(/test_gc_pauses_total\{kind="minor"\} (\d+)/.exec(page)?.[1]);
      const seconds = Number(/test_gc_pause_seconds_total\{kind="minor"\} ([\d.e+-]+)/.exec(page)?.[1]);
      const longest = Number(/test_gc_pause_max_seconds\{kind="minor"\} ([\d.e+-]+)/.exec(page)?.[1]);
      expect(count).toBeGreaterThan(0);
      expect(seconds).toBeGreaterThan(0);
      expect(longest).toBeGreaterThan(0);
      expect(longest).toBeLessThanOrEqual(seconds);
      // The counters go on; the longest pause starts again with each render.
      const next = pauses.render();
      expect(Number(/test_gc_pauses_total\{kind="minor"\} (\d+)/.exec(next)?.[1])).toBeGreaterThanOrEqual(
        count,
      );
      expect(next).toMatch(/# TYPE test_gc_pause_max_seconds gauge/);
    } finally {
      pauses.close();
    }
  });
});
