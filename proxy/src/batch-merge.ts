/**
 * Splices the proxy's own answers (refused calls of a batch) into the origin's JSON answer as it
 * streams past, so nothing is held but the answer's last significant byte and the white space
 * after it: `[a, b]` becomes `[a, b, r1, r2]`, a lone object `{…}` (the origin answered the one
 * request left) becomes `[{…}, r1, r2]`, and an empty or unreadable answer becomes `[r1, r2]`.
 */
export class BatchMerger {
  private mode: 'start' | 'array' | 'object' | 'discard' = 'start';
  /** The bytes from the last significant byte on, held until more (or the end) comes. */
  private held: Buffer = Buffer.alloc(0);
  /** An element of the origin's array was passed on (so a comma goes before ours). */
  private element = false;

  constructor(private readonly extra: readonly unknown[]) {}

  /** The bytes to send now for this chunk of the origin's answer (possibly none). */
  write(chunk: Buffer): Buffer {
    let data = chunk;
    if (this.mode === 'start') {
      const first = firstSignificant(data);
      if (first === -1) return EMPTY;
      const byte = data[first];
      if (byte === OPEN_ARRAY) {
        this.mode = 'array';
        data = data.subarray(first + 1);
        return Buffer.concat([OPEN, this.pass(data)]);
      }
      if (byte === OPEN_OBJECT) {
        this.mode = 'object';
        this.element = true;
        return Buffer.concat([OPEN, this.pass(data.subarray(first))]);
      }
      this.mode = 'discard';
    }
    if (this.mode === 'discard') return EMPTY;
    return this.pass(data);
  }

  /** The bytes that close the merged answer. */
  end(): Buffer {
    const ours = this.extra.map((answer) => JSON.stringify(answer)).join(',');
    if (this.mode === 'start' || this.mode === 'discard') return Buffer.from(`[${ours}]`);
    const held = this.held;
    const last = lastSignificant(held);
    // An array's closing bracket is replaced by ours; an object's last byte is kept.
    const keep = this.mode === 'array' ? held.subarray(0, Math.max(last, 0)) : held.subarray(0, last + 1);
    if (this.mode === 'array' && firstSignificant(keep) !== -1) this.element = true;
    const joint = this.element && ours !== '' ? ',' : '';
    return Buffer.concat([keep, Buffer.from(`${joint}${ours}]`)]);
  }

  /** Passes everything before the last significant byte; holds that byte and what follows it. */
  private pass(data: Buffer): Buffer {
    const last = lastSignificant(data);
    if (last === -1) {
      this.held = Buffer.concat([this.held, data]);
      return EMPTY;
    }
    const out = Buffer.concat([this.held, data.subarray(0, last)]);
    this.held = Buffer.from(data.subarray(last));
    if (!this.element && firstSignificant(out) !== -1) this.element = true;
    return out;
  }
}

const EMPTY = Buffer.alloc(0);
const OPEN = Buffer.from('[');
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const isSpace = (byte: number | undefined) =>
  byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;

function firstSignificant(data: Buffer): number {
  for (let i = 0; i < data.length; i++) if (!isSpace(data[i])) return i;
  return -1;
}

function lastSignificant(data: Buffer): number {
  for (let i = data.length - 1; i >= 0; i--) if (!isSpace(data[i])) return i;
  return -1;
}
