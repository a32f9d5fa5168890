import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestUsageStore } from '../../test/helpers/usage-store';
import { buildUsageRecord, type UsageRecord } from '../src/record';

/** The ClickHouse usage store (chdb in-process, one session shared by every query). */
let store: Awaited<ReturnType<typeof openTestUsageStore>>;
beforeAll(async () => {
  store = await openTestUsageStore('store');
});
afterAll(async () => {
  await store?.close();
});

const records = (customerRef: string, count: number, value: number): UsageRecord[] =>
  Array.from({ length: count }, () => {
    const built = buildUsageRecord(
      { customerRef, value },
      {
        providerId: 'prv_store',
        environment: 'sandbox',
        meterRef: 'mtr_s',
        meterName: 'requests',
        now: new Date(),
      },
    );
    if (built.record === undefined) throw new Error(JSON.stringify(built.errors));
    return built.record;
  });
const total = (customerRef: string) =>
  store.store.total({
    providerId: 'prv_store',
    environment: 'sandbox',
    meterRef: 'mtr_s',
    customerRef,
    from: new Date(0),
    to: new Date(Date.now() + 60_000),
  });

describe('usage store insert deduplication', () => {
  it('drops a replayed batch by its token, and never lets that token swallow a later insert', async () => {
    const first = records('tokened', 10, 1);
    await store.store.insert(first, 'token-a');
    // A different batch under the same token is a replay by definition: dropped whole.
    await store.store.insert(records('tokened', 5, 1), 'token-a');
    expect(await total('tokened')).toEqual({ total: 10, records: 10 });

    // An insert without a token right after: chdb keeps settings on its session, so a token
    // still set from the previous insert would drop these rows without an error.
    await store.store.insert(records('plain', 7, 2));
    expect(await total('plain')).toEqual({ total: 14, records: 7 });

    // Records resent without a token still count once, by their ids.
    await store.store.insert(first);
    expect(await total('tokened')).toEqual({ total: 10, records: 10 });
  });
});
