import { describe, expect, it } from 'vitest';
import { bucketsOf, instantOf, isTimeZone } from '../src/modules/analytics/calendar';

/** Calendar buckets in a time zone: the starts the usage store buckets records by. */
describe('bucketsOf', () => {
  it('starts local hours where the zone’s clock says, at any offset', () => {
    // Kathmandu is UTC+5:45: its hours start at :15 UTC.
    const kathmandu = bucketsOf(
      new Date('2026-01-01T00:00:00Z'),
      new Date('2026-01-01T03:00:00Z'),
      'hour',
      'Asia/Kathmandu',
      100,
    );
    expect(kathmandu?.map((b) => b.start)).toEqual([
      '2025-12-31T23:15:00.000Z',
      '2026-01-01T00:15:00.000Z',
      '2026-01-01T01:15:00.000Z',
      '2026-01-01T02:15:00.000Z',
    ]);
    expect(kathmandu?.[1]?.label).toBe('2026-01-01T06:00');
    // Lord Howe moves its clock by half an hour (02:00 becomes 02:30 on 5 October 2025): an hour
    // starts where its local minutes and seconds are zero, so the half hour after the change is
    // a bucket of its own, as the usage store buckets it.
    const howe = bucketsOf(
      new Date('2025-10-04T14:00:00Z'),
      new Date('2025-10-04T17:00:00Z'),
      'hour',
      'Australia/Lord_Howe',
      100,
    );
    expect(howe?.map((b) => b.start)).toEqual([
      '2025-10-04T13:30:00.000Z',
      '2025-10-04T14:30:00.000Z',
      '2025-10-04T15:00:00.000Z',
      '2025-10-04T16:00:00.000Z',
    ]);
  });

  it('lays out days, weeks from Monday and months, and stops past the limit', () => {
    const weeks = bucketsOf(
      new Date('2026-03-01T00:00:00Z'),
      new Date('2026-03-20T00:00:00Z'),
      'week',
      'UTC',
      100,
    );
    expect(weeks?.map((b) => b.label)).toEqual(['2026-02-23', '2026-03-02', '2026-03-09', '2026-03-16']);
    const months = bucketsOf(
      new Date('2026-01-31T12:00:00Z'),
      new Date('2026-04-01T00:00:00Z'),
      'month',
      'UTC',
      100,
    );
    expect(months?.map((b) => b.label)).toEqual(['2026-01-01', '2026-02-01', '2026-03-01']);
    expect(
      bucketsOf(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-11T00:00:00Z'), 'day', 'UTC', 10),
    ).toHaveLength(10);
    expect(
      bucketsOf(new Date('2026-01-01T00:00:00Z'), new Date('2026-01-11T00:00:01Z'), 'day', 'UTC', 10),
    ).toBeUndefined();
  });

  it('finds the instant of a local time, and knows the zones', () => {
    expect(new Date(instantOf('Europe/Paris', 2026, 3, 29)).toISOString()).toBe('2026-03-28T23:00:00.000Z');
    expect(new Date(instantOf('Europe/Paris', 2026, 3, 30)).toISOString()).toBe('2026-03-29T22:00:00.000Z');
    expect(new Date(instantOf('America/Sao_Paulo', 2026, 7, 1)).toISOString()).toBe(
      '2026-07-01T03:00:00.000Z',
    );
    expect(isTimeZone('Europe/Paris')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
    expect(isTimeZone('europe/paris')).toBe(false);
  });
});
