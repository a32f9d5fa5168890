import { describe, expect, it } from 'vitest';
import { retryAfterMs } from '../src/retry';

describe('Retry-After', () => {
  const now = Date.parse('2026-11-28T10:00:00Z');
  it('reads seconds and HTTP dates', () => {
    expect(retryAfterMs('1', now)).toBe(1000);
    expect(retryAfterMs(' 120 ', now)).toBe(120_000);
    expect(retryAfterMs('Sat, 28 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    // A date already past means now.
    expect(retryAfterMs('Sat, 28 Nov 2026 09:00:00 GMT', now)).toBe(0);
  });
  it('names nothing for what it cannot read', () => {
    for (const header of [null, '', '-1', '1.5', 'soon', '1e3'])
      expect(retryAfterMs(header, now), String(header)).toBeUndefined();
  });
});
