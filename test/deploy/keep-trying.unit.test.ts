import { describe, expect, it } from 'vitest';
import { backoffMs, keepTrying } from '../../deploy/keep-trying';

describe('keepTrying (deploy/keep-trying.ts)', () => {
  it('tries again after each failure until the attempt succeeds, telling each failure', async () => {
    let calls = 0;
    const told: Array<[string, number]> = [];
    const result = await keepTrying(
      async () => {
        calls++;
        if (calls < 3) throw new Error(`not yet ${calls}`);
        return 'running';
      },
      { delayMs: () => 1, stopped: () => false, failed: (e, n) => void told.push([(e as Error).message, n]) },
    );
    expect(result).toBe('running');
    expect(calls).toBe(3);
    expect(told).toEqual([
      ['not yet 1', 1],
      ['not yet 2', 2],
    ]);
  });

  it('gives up once the service is stopping, without another attempt', async () => {
    let calls = 0;
    let stopping = false;
    const result = await keepTrying(
      async () => {
        calls++;
        throw new Error('down');
      },
      {
        delayMs: () => 1,
        stopped: () => stopping,
        failed: (_e, n) => {
          if (n === 2) stopping = true;
        },
      },
    );
    expect(result).toBeUndefined();
    expect(calls).toBe(2);
  });

  it('waits half a second after the first failure, doubling up to 30 s', () => {
    expect([1, 2, 3, 7, 8, 20].map(backoffMs)).toEqual([500, 1_000, 2_000, 30_000, 30_000, 30_000]);
  });
});
