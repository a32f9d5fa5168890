import {
  buildUsageRecord,
  callRecord,
  fractionDigits,
  parseBusRecord,
  recordTimestamp,
} from '@mcp-meter/contracts/usage-record';
import { describe, expect, it } from 'vitest';

const now = new Date('2026-11-22T12:00:00.000Z');
const context = {
  providerId: 'prv_1',
  environment: 'sandbox' as const,
  meterRef: 'mtr_1',
  meterName: 'requests',
  now,
};

describe('the usage record contract', () => {
  it('defaults value to 1, time to now, properties to {} and generates an id', () => {
    const { record } = buildUsageRecord({ customerRef: 'cus_1' }, context);
    expect(record).toMatchObject({
      value: 1,
      timestamp: now.toISOString(),
      properties: {},
      customerRef: 'cus_1',
      environment: 'sandbox',
    });
    expect(record?.id).toMatch(/^rec_[0-9a-z]{26}$/);
  });

  it('keeps a client id so a resend is the same record', () => {
    expect(buildUsageRecord({ customerRef: 'c', id: 'order-1' }, context).record?.id).toBe('order-1');
  });

  it('says when the sender chose the id (only such a record can come again under another time), through the bus too', () => {
    const given = buildUsageRecord({ customerRef: 'c', id: 'order-1' }, context).record;
    const made = buildUsageRecord({ customerRef: 'c' }, context).record;
    expect(given?.idGiven).toBe(true);
    expect(made !== undefined && 'idGiven' in made).toBe(false);
    expect(parseBusRecord(JSON.stringify(given))?.idGiven).toBe(true);
    expect(parseBusRecord(JSON.stringify(made))).not.toHaveProperty('idGiven');
    // Anything but true is no claim: read as an id made here.
    expect(parseBusRecord(JSON.stringify({ ...made, idGiven: 'yes' }))).not.toHaveProperty('idGiven');
  });

  it.each([
    [{ customerRef: 'c', value: 0.1 }, true],
    [{ customerRef: 'c', value: 1e15 }, true],
    [{ customerRef: 'c', value: 1e15 + 2 }, false],
    [{ customerRef: 'c', value: 1.0000000001 }, false],
    [{ customerRef: 'c', value: Number.NaN }, false],
    [{ customerRef: 'c', value: -0.5 }, false],
    [{ customerRef: 'c', timestamp: '2026-11-22T12:04:59Z' }, true],
    [{ customerRef: 'c', timestamp: '2026-11-22T12:05:01Z' }, false],
    [{ customerRef: 'c', timestamp: '2026-10-18T12:00:01Z' }, true],
    [{ customerRef: 'c', timestamp: '2026-10-18T11:59:59Z' }, false],
    [{ customerRef: 'c', timestamp: 1_700_000_000 }, false],
    [{ customerRef: 'c\u0000' }, false],
    [{ customerRef: 'x'.repeat(256) }, false],
    [{ customerRef: 'c', properties: { a: { b: { c: 1 } } } }, true],
    [{ customerRef: 'c', properties: { a: { b: { c: { d: 1 } } } } }, false],
    [{ customerRef: 'c', properties: { big: 'x'.repeat(5000) } }, false],
    [{ customerRef: 'c', id: 'ok:id-1.2_3' }, true],
    [{ customerRef: 'c', id: 'no/slash' }, false],
  ])('%j is accepted: %s', (input, ok) => {
    const result = buildUsageRecord(input, context);
    expect(result.errors === undefined).toBe(ok);
  });

  it('reports every bad field with its path, prefixed for bulk records', () => {
    const { errors } = buildUsageRecord(
      { customerRef: '', value: 'x', properties: 3 },
      context,
      '/records/4',
    );
    expect(errors?.map((e) => e.path)).toEqual([
      '/records/4/customerRef',
      '/records/4/value',
      '/records/4/properties',
    ]);
  });

  it('counts fraction digits the way an exact decimal would', () => {
    expect(fractionDigits(1)).toBe(0);
    expect(fractionDigits(0.125)).toBe(3);
    // Below 1e-6 JavaScript writes numbers in exponent form; the digits are counted all the same.
    expect(fractionDigits(1e-7)).toBe(7);
    expect(fractionDigits(1.5e-8)).toBe(9);
    expect(fractionDigits(1e-10)).toBe(10);
    expect(fractionDigits(1e21)).toBe(0);
  });

  it('accepts values with up to nine decimal places however small, and refuses a tenth', () => {
    const withValue = (value: number) => buildUsageRecord({ customerRef: 'c', value }, context);
    expect(withValue(1e-7).record?.value).toBe(1e-7);
    expect(withValue(1.5e-8).record?.value).toBe(1.5e-8);
    expect(withValue(1e-9).record?.value).toBe(1e-9);
    expect(withValue(1e-10).errors).toEqual([
      { path: '/value', message: 'must have at most 9 decimal places' },
    ]);
    expect(withValue(1.5e-9).errors?.[0]?.path).toBe('/value');
  });

  it('reads back only well-formed records from the bus', () => {
    const { record } = buildUsageRecord({ customerRef: 'c' }, context);
    expect(parseBusRecord(JSON.stringify(record))).toEqual(record);
    expect(parseBusRecord('{"id":1}')).toBeUndefined();
    expect(parseBusRecord('not json')).toBeUndefined();
    expect(parseBusRecord(JSON.stringify({ ...record, environment: 'prod' }))).toBeUndefined();
    // What ClickHouse could not take would fail its whole batch on every retry: refused here.
    for (const bad of [
      { timestamp: '2026-11-02 03:04:05' },
      { timestamp: 'yesterday' },
      { timestamp: '2026-11-02T03:04:05.678Z", "x' },
      { value: -1 },
      { value: 1e16 },
      { value: 0.0000000001 },
    ]) {
      expect(parseBusRecord(JSON.stringify({ ...record, ...bad }))).toBeUndefined();
    }
    expect(parseBusRecord(JSON.stringify({ ...record, value: 1e15 }))?.value).toBe(1e15);
  });
});

describe('ids', () => {
  it('sort in creation order, also within one millisecond', async () => {
    const { ulid } = await import('../src/kit/ids');
    const ids = Array.from({ length: 5000 }, () => ulid(1_800_000_000_000));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ulid(1_800_000_000_001) > (ids.at(-1) ?? '')).toBe(true);
  });

  it('write the time as the ULID specification does', async () => {
    const { ulid } = await import('../src/kit/ids');
    // The specification's example: 1469918176385 ms is 01ARYZ6S41 (written lower-case here).
    expect(ulid(1_469_918_176_385).slice(0, 10)).toBe('01aryz6s41');
    expect(ulid(0).slice(0, 10)).toBe('0000000000');
    expect(ulid(2 ** 48 - 1).slice(0, 10)).toBe('7zzzzzzzzz');
  });

  it('draws fresh randomness for every millisecond, across refills of its random pool', async () => {
    const { ulid } = await import('../src/kit/ids');
    const ids = Array.from({ length: 2000 }, (_, i) => ulid(1_900_000_000_000 + i));
    for (const id of ids) expect(id).toMatch(/^[0-9a-hjkmnp-tv-z]{10}[0-9a-h][0-9a-hjkmnp-tv-z]{15}$/);
    expect(new Set(ids.map((id) => id.slice(10))).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('give random tokens from the same pool, never overlapping one another or an id', async () => {
    const { randomToken, ulid } = await import('../src/kit/ids');
    // Across several refills of the 4 KiB pool, interleaved with ids drawing from it.
    const tokens = Array.from({ length: 3000 }, (_, i) => {
      if (i % 3 === 0) ulid(2_000_000_000_000 + i);
      return randomToken(6);
    });
    for (const token of tokens) expect(token).toMatch(/^[A-Za-z0-9_-]{8}$/);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(randomToken(32)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('the usage record of a gated call', () => {
  const meter = {
    providerId: 'prv_1',
    environment: 'sandbox' as const,
    meterRef: 'mtr_1',
    meterName: 'requests',
  };
  it('carries value 1 and the call facts, admitted and cancelled only when true', () => {
    const proxied = callRecord(meter, 'cus_1', '2026-11-24T10:00:00.000Z', {
      tool: 'add',
      outcome: 'error',
      server: 'mcp_1',
      latencyMs: 1.5,
      productId: 'prd_1',
      admitted: true,
      cancelled: true,
    });
    expect(proxied).toMatchObject({
      ...meter,
      customerRef: 'cus_1',
      value: 1,
      id: expect.stringMatching(/^rec_/),
    });
    expect(Object.entries(proxied.properties)).toEqual([
      ['tool', 'add'],
      ['outcome', 'error'],
      ['server', 'mcp_1'],
      ['latencyMs', 1.5],
      ['productId', 'prd_1'],
      ['admitted', true],
      ['cancelled', true],
    ]);
    const refused = callRecord(meter, 'cus_1', '2026-11-24T10:00:00.000Z', {
      source: 'sdk.limits',
      outcome: 'paywall',
      productId: null,
      admitted: false,
    });
    expect(refused.properties).toEqual({ source: 'sdk.limits', outcome: 'paywall' });
    // What the bus carries reads back the same.
    expect(parseBusRecord(JSON.stringify(proxied))).toEqual(proxied);
  });

  it('has one timestamp text per millisecond', () => {
    const at = Date.UTC(2026, 10, 27, 13, 0, 0, 123);
    expect(recordTimestamp(at)).toBe('2026-11-27T13:00:00.123Z');
    expect(recordTimestamp(at + 1)).toBe('2026-11-27T13:00:00.124Z');
    expect(recordTimestamp(at)).toBe('2026-11-27T13:00:00.123Z');
  });
});
