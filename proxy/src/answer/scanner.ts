import type { CallAnswer, ToolCall } from '../calls';
import { CR, idKey, JsonRpcDocument, LF } from './json-document';

export type { CallAnswer };

const NEWLINE = Buffer.from('\n');
// SSE line states.
const LINE_START = 0;
const DATA_SPACE = 1;
const DATA = 2;
const SKIP_LINE = 3;

/**
 * Finds the origin's answers to the calls a request carried, in a JSON answer or an SSE stream
 * (each event's `data` one JSON-RPC message or batch), as the answer streams through. Nothing of
 * the answer is kept, so there is no size past which an answer goes unread: a tool error at the
 * end of a large result, or a result after many megabytes of progress events, is still seen.
 */
export class AnswerScanner {
  private readonly watched = new Set<string>();
  private readonly answers = new Map<string, CallAnswer>();
  private readonly document: JsonRpcDocument;
  private readonly sse: boolean;
  private lineState = LINE_START;
  private head = '';
  private pendingCr = false;
  private eventHasData = false;
  /** Positions of the next LF and CR in the chunk being read (-1: none left in it; -2: not looked for yet). */
  private nextLf = -1;
  private nextCr = -1;

  constructor(contentType: string, calls: readonly ToolCall[]) {
    let idCapBytes = 0;
    for (const call of calls) {
      this.watched.add(idKey(call.id));
      // Each UTF-16 unit is at most six bytes of JSON text (\uXXXX).
      if (typeof call.id === 'string') idCapBytes = Math.max(idCapBytes, call.id.length * 6);
    }
    this.document = new JsonRpcDocument((id) => this.watched.has(idKey(id)), idCapBytes);
    this.sse = contentType.toLowerCase().includes('text/event-stream');
  }

  /** The response to `call`, the first one when the origin sent several. */
  answerTo(call: ToolCall): CallAnswer | undefined {
    return this.answers.get(idKey(call.id));
  }

  /**
   * The response to `call` as soon as it is known: in an SSE stream when its event ends, in a
   * JSON answer when the document's value is complete (before the answer is).
   */
  answerSoFar(call: ToolCall): CallAnswer | undefined {
    return this.answers.get(idKey(call.id)) ?? (this.sse ? undefined : this.document.settledAnswer(call.id));
  }

  write(chunk: Buffer): void {
    if (this.watched.size === 0) return;
    if (!this.sse) {
      this.document.feed(chunk, 0, chunk.length);
      return;
    }
    this.nextLf = -2;
    this.nextCr = -2;
    let i = 0;
    while (i < chunk.length) i = this.readLine(chunk, i);
  }

  /** The answer ended: a JSON document, or the SSE stream's last event without its blank line, is read. */
  end(): void {
    if (this.sse && !this.eventHasData) return;
    this.document.finish(this.report);
    this.eventHasData = false;
  }

  private readonly report = (id: string | number, answer: CallAnswer) => {
    const key = idKey(id);
    if (!this.answers.has(key)) this.answers.set(key, answer);
  };

  /** Where the current SSE line ends in the chunk (the first CR or LF from `from`), or -1. */
  private lineEnd(chunk: Buffer, from: number): number {
    if (this.nextLf !== -1 && this.nextLf < from) this.nextLf = chunk.indexOf(LF, from);
    if (this.nextCr !== -1 && this.nextCr < from) this.nextCr = chunk.indexOf(CR, from);
    if (this.nextLf === -1) return this.nextCr;
    if (this.nextCr === -1) return this.nextLf;
    return Math.min(this.nextLf, this.nextCr);
  }

  private readLine(chunk: Buffer, start: number): number {
    let i = start;
    if (this.pendingCr) {
      this.pendingCr = false;
      if (chunk[i] === LF) return i + 1;
    }
    if (this.lineState === DATA || this.lineState === SKIP_LINE) {
      const end = this.lineEnd(chunk, i);
      const stop = end === -1 ? chunk.length : end;
      if (this.lineState === DATA) this.document.feed(chunk, i, stop);
      if (end === -1) return stop;
      this.lineEnded(chunk, end);
      return end + 1;
    }
    const c = chunk[i] as number;
    if (c === LF || c === CR) {
      if (this.lineState === LINE_START) {
        if (this.head === '') this.dispatch();
        else if (this.head === 'data') this.dataLine();
      }
      this.lineEnded(chunk, i);
      return i + 1;
    }
    if (this.lineState === DATA_SPACE) {
      this.lineState = DATA;
      return c === 0x20 ? i + 1 : i;
    }
    // LINE_START: the field name, up to the colon of `data:`.
    this.head += String.fromCharCode(c);
    i++;
    if (this.head === 'data:') {
      this.dataLine();
      this.lineState = DATA_SPACE;
    } else if (!'data:'.startsWith(this.head)) {
      this.lineState = SKIP_LINE;
    }
    return i;
  }

  /** A `data` line begins: lines of one event are joined with a newline. */
  private dataLine(): void {
    if (this.eventHasData) this.document.feed(NEWLINE, 0, 1);
    this.eventHasData = true;
  }

  private lineEnded(chunk: Buffer, at: number): void {
    if (chunk[at] === CR) this.pendingCr = true;
    this.lineState = LINE_START;
    this.head = '';
  }

  /** A blank line: the event is complete. */
  private dispatch(): void {
    if (!this.eventHasData) return;
    this.document.finish(this.report);
    this.eventHasData = false;
  }
}
