import { closeSync, fsyncSync, openSync, readdirSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { parseBusRecord, type UsageRecord } from '@mcp-meter/contracts/usage-record';
import { nextSequence } from './spool';

/**
 * A spill file's text: usage records as JSON lines, appended (and fsync'd) by the emitter while
 * the bus is away, read back a piece at a time when it returns.
 */

/** A new spill file's name: unique within this process, later than the files before it. */
export const newSpillFile = (dir: string) =>
  join(dir, `spill-${Date.now()}-${process.pid}-${nextSequence()}.jsonl`);

/** The spill files in `dir`, in the order of their names (replays go oldest first). */
export const spillFilesIn = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith('spill-') && f.endsWith('.jsonl'))
    .sort()
    .map((f) => join(dir, f));

/** How much of a spill file a replay reads at a time. */
const REPLAY_READ_BYTES = 256 * 1024;

/**
 * The records of a spill file, `batch` at a time, read a piece at a time: a replay after a long
 * outage (a file of millions of records) holds neither the file in memory nor the event loop
 * for more than a batch's parsing. A line that is not a record (a write cut short by a crash)
 * is skipped.
 */
export async function* spilledBatches(file: string, batch: number): AsyncGenerator<UsageRecord[]> {
  const handle = await open(file, 'r');
  try {
    const buffer = Buffer.allocUnsafe(REPLAY_READ_BYTES);
    const decoder = new StringDecoder('utf8');
    let partial = '';
    let records: UsageRecord[] = [];
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      const text = partial + (bytesRead === 0 ? decoder.end() : decoder.write(buffer.subarray(0, bytesRead)));
      const lines = text.split('\n');
      // The last piece has no newline yet, unless the file ended: it waits for the next read.
      partial = bytesRead === 0 ? '' : (lines.pop() ?? '');
      for (const line of lines) {
        const record = line === '' ? undefined : parseBusRecord(line);
        if (record !== undefined) records.push(record);
        if (records.length >= batch) {
          yield records;
          records = [];
        }
      }
      if (bytesRead === 0) break;
    }
    if (records.length > 0) yield records;
  } finally {
    await handle.close();
  }
}

/** Appends `text` to `file` and has it on disk (fsync'd) before returning. */
export function appendDurablySync(file: string, text: string): void {
  const fd = openSync(file, 'a');
  try {
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Appends `text` to `file` and has it on disk (fsync'd) before settling. */
export async function appendDurably(file: string, text: string): Promise<void> {
  const handle = await open(file, 'a');
  try {
    await handle.appendFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}
