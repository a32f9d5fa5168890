import type { UsageRecord } from '@mcp-meter/contracts/usage-record';

const texts = new WeakMap<UsageRecord, string>();

/**
 * A usage record's JSON, made once: the emitter writes it to its spool and the bus publishes the
 * same text, where each used to serialize the record itself. A record is not changed once
 * emitted; the text lives as long as the record object does.
 */
export function recordJson(record: UsageRecord): string {
  let text = texts.get(record);
  if (text === undefined) {
    text = JSON.stringify(record);
    texts.set(record, text);
  }
  return text;
}
