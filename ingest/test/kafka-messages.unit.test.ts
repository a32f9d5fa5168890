import { callRecord, recordJson, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { describe, expect, it } from 'vitest';
import { toMessages } from '../src/kafka-bus';

const meter = (providerId: string, environment: 'sandbox' | 'live') => ({
  providerId,
  environment,
  meterRef: 'requests',
  meterName: 'requests',
});
const call = (providerId: string, customer: string, environment: 'sandbox' | 'live' = 'sandbox') =>
  callRecord(meter(providerId, environment), customer, '2026-11-26T10:00:00.000Z', {
    tool: 'add 😀 "quoted" \u0000',
    outcome: 'success',
    server: 'srv_1',
    latencyMs: 1.5,
    productId: 'prd_1',
    admitted: true,
  });

describe('usage records as Kafka messages', () => {
  it('carries each record as JSON.stringify would write it, made once per record', () => {
    const records: UsageRecord[] = [
      ...Array.from({ length: 3 }, () => call('prv_a', 'cus_1')),
      call('prv_a', 'cus_2'),
      ...Array.from({ length: 2 }, () => call('prv_b', 'cus_1', 'live')),
    ];
    const byValue = toMessages('ns', records).flatMap(({ topic, messages }) =>
      messages.map((m) => ({ topic, key: m.key, value: JSON.parse(m.value) })),
    );
    expect(byValue).toEqual(
      expect.arrayContaining([
        {
          topic: expect.stringContaining('sandbox'),
          key: 'prv_a:cus_1',
          value: { events: records.slice(0, 3) },
        },
        { topic: expect.stringContaining('sandbox'), key: 'prv_a:cus_2', value: records[3] },
        { topic: expect.stringContaining('live'), key: 'prv_b:cus_1', value: { events: records.slice(4) } },
      ]),
    );
    expect(byValue).toHaveLength(3);
    const texts = toMessages('ns', records).flatMap(({ messages }) => messages.map((m) => m.value));
    expect(texts).toContain(JSON.stringify({ events: records.slice(0, 3) }));
    expect(texts).toContain(JSON.stringify(records[3]));
    expect(recordJson(records[0] as UsageRecord)).toBe(JSON.stringify(records[0]));
  });

  it("keeps a record's JSON on it out of sight: a changed copy gets its own, a frozen record one too", () => {
    const record = call('prv_a', 'cus_1');
    const keys = Object.keys(record);
    const text = recordJson(record);
    expect(recordJson(record)).toBe(text);
    expect(Object.keys(record)).toEqual(keys);
    expect(JSON.stringify(record)).toBe(text);
    const changed = { ...record, value: 5 };
    expect(recordJson(changed)).toBe(JSON.stringify(changed));
    expect(recordJson(Object.freeze({ ...record }))).toBe(text);
  });
});
