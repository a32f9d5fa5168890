import { buildUsageRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';

/** A valid record of one unit on a sandbox requests meter, as a producer would publish it. */
export function usageRecord(options: { id?: string; customerRef?: string } = {}): UsageRecord {
  const built = buildUsageRecord(
    {
      customerRef: options.customerRef ?? 'cus_1',
      value: 1,
      ...(options.id === undefined ? {} : { id: options.id }),
    },
    {
      providerId: 'prv_x',
      environment: 'sandbox',
      meterRef: 'mtr_x',
      meterName: 'requests',
      now: new Date(),
    },
  );
  if (built.record === undefined) throw new Error(JSON.stringify(built.errors));
  return built.record;
}
