import type { CallAnswer } from '../calls';

/**
 * One JSON-RPC answer (a message or a batch) read incrementally, byte by byte, as it streams:
 * the answers to the calls the scanner watches, found without keeping the document.
 */

/** Calls are matched to responses by id; 7 and "7" are different ids. */
export const idKey = (id: string | number) => (typeof id === 'number' ? `n${id}` : `s${id}`);

const ARRAY = 0;
const OBJECT = 1;

// Scanner states.
const VALUE = 0;
const FIRST_VALUE = 1;
const FIRST_KEY = 2;
const KEY = 3;
const COLON = 4;
const AFTER = 5;
const STRING = 6;
const LITERAL = 7;
const DONE = 8;
const BROKEN = 9;

// What a string or literal being read is for.
const IGNORED = 0;
const ID = 1;
const IS_ERROR = 2;
const TRACKED_KEY = 3;
const RESULT_TYPE = 4;
const REQUEST_STATE = 5;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
export const LF = 0x0a;
export const CR = 0x0d;
/** Longer keys are none of the keys read below, even fully \u-escaped. */
const KEY_CAP_BYTES = 64;
/** Longer literals are numbers no call id can equal (ids come from the request, as JSON numbers). */
const LITERAL_CAP = 400;
/** An origin's `requestState` longer than this (as JSON text) is not read: its retry is a new call. */
const STATE_CAP_BYTES = 65_536;
/** `resultType` values are short words. */
const RESULT_TYPE_CAP_BYTES = 64;
const MAX_DEPTH = 10_000;

const KEYS = ['id', 'result', 'error', 'method', 'isError', 'resultType', 'requestState'];
/** A key (without escapes) read in place: one of the keys that matter, or '' for any other. */
function keyIn(buf: Buffer, from: number, to: number): string {
  const length = to - from;
  for (const key of KEYS) {
    if (key.length !== length) continue;
    let k = 0;
    while (k < length && buf[from + k] === key.charCodeAt(k)) k++;
    if (k === length) return key;
  }
  return '';
}
const isSpace = (c: number) => c === 0x20 || c === LF || c === CR || c === 0x09;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
// Where a literal being read stands: in true/false/null, or in JSON's number grammar
// -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?, named by what was read last.
const WORD = 0;
const MINUS = 1;
const ZERO = 2;
const INTEGER = 3;
const POINT = 4;
const FRACTION = 5;
const EXPONENT_MARK = 6;
const EXPONENT_SIGN = 7;
const EXPONENT = 8;
const INVALID = 9;
/** Bytes a JSON number or true/false/null is made of. */
const isLiteralByte = (c: number) =>
  (c >= 0x30 && c <= 0x39) ||
  (c >= 0x61 && c <= 0x7a) ||
  (c >= 0x41 && c <= 0x5a) ||
  c === 0x2b ||
  c === 0x2d ||
  c === 0x2e;

/**
 * Reads one JSON document (a JSON-RPC message or batch) in pieces, as it streams past, and reports
 * the responses to the calls it is told to watch, once the document turns out to be well-formed
 * JSON. It keeps no copy of the document: long strings are skipped with a native byte search, so
 * an answer of any size costs a pass over its structure and constant memory. Structure, literals
 * and the strings it reads (ids, keys) are checked as JSON.parse would; the bytes inside other
 * strings are not.
 */
export class JsonRpcDocument {
  private state = VALUE;
  private readonly stack: number[] = [];
  /** Depth of the message object being read (1 alone, 2 in a batch), or -1. */
  private messageDepth = -1;
  /** Depth of that message's `result` object, or -1. */
  private resultDepth = -1;
  private messageKey = '';
  private resultKey = '';
  private id: string | number | undefined;
  private hasResult = false;
  private hasError = false;
  private hasMethod = false;
  private toolError = false;
  /** The result's `resultType` and `requestState` (MCP 2026-07-28 multi-round calls). */
  private resultType: string | undefined;
  private requestState: string | undefined;
  /** What the string or literal being read is for. */
  private role = IGNORED;
  private stringIsKey = false;
  /** A run of backslashes at the end of the last piece of the string being read. */
  private backslashes = 0;
  private parts: Buffer[] = [];
  private partsBytes = 0;
  private partsCap = 0;
  private overflow = false;
  private literal = '';
  private literalState = WORD;
  private word = '';
  private wordAt = 0;
  private readonly pending: Array<{ id: string | number; answer: CallAnswer }> = [];

  constructor(
    private readonly wants: (id: string | number) => boolean,
    /** The longest a watched string id can be as JSON text, escapes included. */
    private readonly idCapBytes: number,
  ) {}

  feed(buf: Buffer, start: number, end: number): void {
    let i = start;
    while (i < end) {
      const state = this.state;
      if (state === STRING) {
        i = this.readString(buf, i, end);
        continue;
      }
      if (state === LITERAL) {
        let j = i;
        while (j < end && isLiteralByte(buf[j] as number)) j++;
        this.readLiteral(buf, i, j);
        i = j;
        if (j < end) this.endLiteral();
        continue;
      }
      if (state === BROKEN) return;
      const c = buf[i++] as number;
      if (isSpace(c)) continue;
      this.structural(c);
    }
  }

  /**
   * The response to `id` once the document's value is complete (only whitespace may follow),
   * before `finish`: what the proxy needs to act on before the answer's last bytes go out.
   */
  settledAnswer(id: string | number): CallAnswer | undefined {
    if (this.state !== DONE) return undefined;
    return this.pending.find((p) => p.id === id)?.answer;
  }

  /** The document ended: true when it was well-formed, and then its responses are reported. */
  finish(report: (id: string | number, answer: CallAnswer) => void): boolean {
    if (this.state === LITERAL && this.stack.length === 0) this.endLiteral();
    const complete = this.state === DONE;
    if (complete) for (const { id, answer } of this.pending) report(id, answer);
    this.pending.length = 0;
    this.stack.length = 0;
    this.state = VALUE;
    this.messageDepth = -1;
    this.resultDepth = -1;
    return complete;
  }

  private structural(c: number): void {
    switch (this.state) {
      case VALUE:
        this.startValue(c);
        return;
      case FIRST_VALUE:
        if (c === 0x5d) this.close(ARRAY);
        else this.startValue(c);
        return;
      case FIRST_KEY:
        if (c === 0x7d) this.close(OBJECT);
        else this.startKey(c);
        return;
      case KEY:
        this.startKey(c);
        return;
      case COLON:
        this.state = c === 0x3a ? VALUE : BROKEN;
        return;
      case AFTER:
        if (c === 0x2c) this.state = this.stack.at(-1) === OBJECT ? KEY : VALUE;
        else if (c === 0x7d) this.close(OBJECT);
        else if (c === 0x5d) this.close(ARRAY);
        else this.state = BROKEN;
        return;
      default:
        // Anything but whitespace after the document's value.
        this.state = BROKEN;
    }
  }

  private startKey(c: number): void {
    if (c !== QUOTE) {
      this.state = BROKEN;
      return;
    }
    const depth = this.stack.length;
    this.beginString(true, depth === this.messageDepth || depth === this.resultDepth ? TRACKED_KEY : IGNORED);
  }

  private startValue(c: number): void {
    const depth = this.stack.length;
    const inMessage = depth === this.messageDepth;
    const inResult = depth === this.resultDepth;
    const key = inMessage ? this.messageKey : inResult ? this.resultKey : '';
    if (inMessage) {
      if (key === 'id') this.id = undefined;
      else if (key === 'result') {
        // A repeated key replaces the earlier value, as in JSON.parse.
        this.hasResult = true;
        this.toolError = false;
        this.resultType = undefined;
        this.requestState = undefined;
      } else if (key === 'error') this.hasError = true;
      else if (key === 'method') this.hasMethod = true;
    } else if (inResult && key === 'isError') this.toolError = false;

    if (c === 0x7b || c === 0x5b) {
      if (depth >= MAX_DEPTH) {
        this.state = BROKEN;
        return;
      }
      const messageLevel = depth === 0 || (depth === 1 && this.stack[0] === ARRAY);
      this.stack.push(c === 0x7b ? OBJECT : ARRAY);
      if (c === 0x5b) {
        this.state = FIRST_VALUE;
        return;
      }
      if (messageLevel) {
        this.messageDepth = depth + 1;
        this.messageKey = '';
        this.id = undefined;
        this.hasResult = false;
        this.hasError = false;
        this.hasMethod = false;
        this.toolError = false;
        this.resultType = undefined;
        this.requestState = undefined;
      } else if (inMessage && key === 'result') {
        this.resultDepth = depth + 1;
        this.resultKey = '';
      }
      this.state = FIRST_KEY;
    } else if (c === QUOTE) {
      this.beginString(
        false,
        inMessage && key === 'id'
          ? ID
          : inResult && key === 'resultType'
            ? RESULT_TYPE
            : inResult && key === 'requestState'
              ? REQUEST_STATE
              : IGNORED,
      );
    } else if (isLiteralByte(c)) {
      this.role = inMessage && key === 'id' ? ID : inResult && key === 'isError' ? IS_ERROR : IGNORED;
      this.literal = this.role === IGNORED ? '' : String.fromCharCode(c);
      this.word = c === 0x74 ? 'true' : c === 0x66 ? 'false' : c === 0x6e ? 'null' : '';
      this.wordAt = 0;
      this.literalState =
        this.word !== '' ? WORD : c === 0x2d ? MINUS : c === 0x30 ? ZERO : isDigit(c) ? INTEGER : INVALID;
      this.state = LITERAL;
    } else {
      this.state = BROKEN;
    }
  }

  private beginString(isKey: boolean, role: number): void {
    this.state = STRING;
    this.stringIsKey = isKey;
    this.role = role;
    this.backslashes = 0;
    this.partsBytes = 0;
    this.partsCap = isKey
      ? KEY_CAP_BYTES
      : role === REQUEST_STATE
        ? STATE_CAP_BYTES
        : role === RESULT_TYPE
          ? RESULT_TYPE_CAP_BYTES
          : this.idCapBytes;
    this.overflow = false;
  }

  private keep(buf: Buffer, from: number, to: number): void {
    if (this.role === IGNORED || this.overflow || to <= from) return;
    this.partsBytes += to - from;
    if (this.partsBytes > this.partsCap) this.overflow = true;
    else this.parts.push(Buffer.from(buf.subarray(from, to)));
  }

  /** Reads string bytes up to its closing quote (returns the index after it) or the end of the piece. */
  private readString(buf: Buffer, start: number, end: number): number {
    let i = start;
    for (;;) {
      const quote = buf.indexOf(QUOTE, i);
      if (quote === -1 || quote >= end) {
        this.keep(buf, start, end);
        let k = end - 1;
        while (k >= i && buf[k] === BACKSLASH) k--;
        this.backslashes = k < i ? this.backslashes + (end - i) : end - 1 - k;
        return end;
      }
      let k = quote - 1;
      while (k >= i && buf[k] === BACKSLASH) k--;
      const run = k < i ? this.backslashes + (quote - i) : quote - 1 - k;
      if (run % 2 === 1) {
        // An escaped quote: still inside the string.
        this.backslashes = 0;
        i = quote + 1;
        continue;
      }
      if (this.role !== IGNORED) {
        // Most strings start and end in one piece: read in place, nothing copied.
        if (this.partsBytes === 0) this.endString(this.textOf(buf, start, quote));
        else {
          this.keep(buf, start, quote);
          this.endString(
            this.overflow ? undefined : this.textOf(Buffer.concat(this.parts), 0, this.partsBytes),
          );
        }
      } else this.endString(undefined);
      return quote + 1;
    }
  }

  /** The string in `buf[from, to)` as JSON.parse reads it; undefined if too long or not valid JSON. */
  private textOf(buf: Buffer, from: number, to: number): string | undefined {
    if (to - from > this.partsCap) return undefined;
    let plain = true;
    for (let k = from; k < to; k++) {
      const b = buf[k] as number;
      if (b === BACKSLASH || b < 0x20) {
        plain = false;
        break;
      }
    }
    if (plain && this.stringIsKey) return keyIn(buf, from, to);
    const raw = buf.toString('utf8', from, to);
    if (plain) return raw;
    try {
      return JSON.parse(`"${raw}"`) as string;
    } catch {
      return undefined;
    }
  }

  private endString(text: string | undefined): void {
    const role = this.role;
    if (this.parts.length > 0) this.parts = [];
    if (this.stringIsKey) {
      if (role === TRACKED_KEY) {
        const key = text ?? '';
        if (this.stack.length === this.messageDepth) this.messageKey = key;
        else this.resultKey = key;
      }
      this.state = COLON;
      return;
    }
    if (role === ID) this.id = text;
    else if (role === RESULT_TYPE) this.resultType = text;
    else if (role === REQUEST_STATE) this.requestState = text;
    this.valueDone();
  }

  /**
   * Literal bytes `buf[from, to)`, checked byte by byte with nothing allocated; the text is kept
   * only for an id or `isError`. The first byte set the state (startValue).
   */
  private readLiteral(buf: Buffer, from: number, to: number): void {
    if (this.role !== IGNORED && this.literal.length < LITERAL_CAP)
      this.literal += buf.toString('latin1', from, Math.min(to, from + LITERAL_CAP - this.literal.length));
    let state = this.literalState;
    for (let k = from; k < to && state !== INVALID; k++) {
      const c = buf[k] as number;
      switch (state) {
        case WORD:
          if (this.word.charCodeAt(++this.wordAt) !== c) state = INVALID;
          break;
        case MINUS:
          state = c === 0x30 ? ZERO : isDigit(c) ? INTEGER : INVALID;
          break;
        case ZERO:
        case INTEGER:
        case FRACTION:
          if (isDigit(c) && state !== ZERO) break;
          state =
            c === 0x2e && state !== FRACTION ? POINT : c === 0x65 || c === 0x45 ? EXPONENT_MARK : INVALID;
          break;
        case POINT:
          state = isDigit(c) ? FRACTION : INVALID;
          break;
        case EXPONENT_MARK:
          state = c === 0x2b || c === 0x2d ? EXPONENT_SIGN : isDigit(c) ? EXPONENT : INVALID;
          break;
        case EXPONENT_SIGN:
        case EXPONENT:
          state = isDigit(c) ? EXPONENT : INVALID;
          break;
      }
    }
    this.literalState = state;
  }

  private endLiteral(): void {
    const state = this.literalState;
    const isWord = state === WORD;
    const valid = isWord
      ? this.wordAt === this.word.length - 1
      : state === ZERO || state === INTEGER || state === FRACTION || state === EXPONENT;
    if (!valid) {
      this.state = BROKEN;
      return;
    }
    if (this.role === ID)
      this.id = !isWord && this.literal.length < LITERAL_CAP ? Number(this.literal) : undefined;
    else if (this.role === IS_ERROR) this.toolError = this.word === 'true';
    this.valueDone();
  }

  private close(type: number): void {
    const depth = this.stack.length;
    if (this.stack[depth - 1] !== type) {
      this.state = BROKEN;
      return;
    }
    if (depth === this.resultDepth) this.resultDepth = -1;
    if (depth === this.messageDepth) {
      this.messageDepth = -1;
      const id = this.id;
      // A response has an id and a result or error; a request from the server (same id space
      // on its side, so it may reuse a call's id) has a method.
      if (
        id !== undefined &&
        (this.hasResult || this.hasError) &&
        !this.hasMethod &&
        this.wants(id) &&
        !this.pending.some((p) => p.id === id)
      ) {
        this.pending.push({
          id,
          answer: {
            error: this.hasError,
            toolError: this.toolError,
            inputRequired: this.hasResult && !this.hasError && this.resultType === 'input_required',
            ...(this.hasResult && !this.hasError && this.resultType === 'task' ? { task: true } : {}),
            ...(this.requestState === undefined ? {} : { requestState: this.requestState }),
          },
        });
      }
    }
    this.stack.pop();
    this.valueDone();
  }

  private valueDone(): void {
    this.state = this.stack.length === 0 ? DONE : AFTER;
  }
}
