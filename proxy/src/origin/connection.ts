import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { BARE_LINE_END, CONTENT_LENGTH, headerName } from './answer-head';
import { OriginError, unread } from './errors';
import type { Exchange, OriginClientOptions } from './types';

const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');
type BodyMode = 'none' | 'length' | 'chunked' | 'close';
type ChunkState = 'size' | 'data' | 'data-end' | 'trailers';

/** What a connection needs of the pool it belongs to. */
export interface ConnectionOwner {
  readonly options: OriginClientOptions;
  /** The connection answered and may carry another request. */
  release(connection: Connection): void;
  /** The connection closed. */
  forget(connection: Connection): void;
}

/** One keep-alive connection: one exchange at a time, its answer parsed as it arrives. */
export class Connection {
  exchange: Exchange | undefined;
  /** Bytes not parsed yet (a head or a chunk-size line split across reads). */
  private pending: Buffer | undefined;
  private headDone = false;
  private mode: BodyMode = 'none';
  private remaining = 0;
  private chunkState: ChunkState = 'size';
  private reusable = false;
  private paused = false;
  /** The Keep-Alive timeout the origin announced, in ms (0: none). */
  private keepAliveHint = 0;
  /**
   * The silence this connection may keep (ms; 0: none), judged by the pool's sweep rather than a
   * socket timer: Node re-arms a socket's timer on every read and write and makes a new one on
   * every setTimeout (three a request here), about 4 µs of CPU a request on the bench (issue 28).
   */
  private waitMs = 0;
  /** Bytes came, or the wait was set, since the sweep last looked: the silence starts over. */
  private stirred = false;
  private quietSince = 0;
  /** While idle in the pool: when it must no longer be reused (performance.now() ms). */
  keepUntil = 0;
  /** Requests sent on this connection, the current one included. */
  private sent = 0;
  /** Bytes of the current exchange's answer have arrived. */
  private answered = false;
  /** The origin ended its side (FIN): the connection carries no further request. */
  ended = false;
  private readonly socket: Socket;

  /** `readsOwn`: the socket reads into READ_BUFFER and its pool hands each read to `onData`. */
  /** A plain TCP socket (not TLS), read through the pool's buffer. */
  private readonly plain: boolean;

  constructor(
    private readonly pool: ConnectionOwner,
    socket: Socket,
    readsOwn: boolean,
  ) {
    this.socket = socket;
    this.plain = readsOwn;
    if (!readsOwn) socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error: Error) => this.fail(error));
    socket.on('end', () => this.onEnd());
    socket.on('close', () => this.onClose());
  }

  get destroyed(): boolean {
    return this.socket.destroyed || this.ended;
  }

  /** Sends the exchange's request; the answer arrives through onData. */
  start(exchange: Exchange, encoded: Buffer): void {
    this.exchange = exchange;
    this.headDone = false;
    this.answered = false;
    this.pending = undefined;
    this.paused = false;
    this.sent++;
    this.wait(this.pool.options.headersTimeoutMs);
    this.socket.write(encoded);
    // A write the kernel refused at once (the origin reset the connection while it sat idle)
    // sent no byte of the request: node:net's stream marks itself errored synchronously then.
    if (this.socket.errored !== null) {
      this.unsent(this.socket.errored);
      return;
    }
    if (!exchange.told) {
      exchange.told = true;
      exchange.sink.written?.();
    }
  }

  /**
   * The request on this connection was never read by the origin: sent again on a new connection
   * when it came on a reused one (an origin closing idle connections races every client that
   * reuses them), else failed as unread. The connection goes.
   */
  private unsent(cause: Error): void {
    const exchange = this.exchange;
    this.socket.destroy();
    if (exchange === undefined || exchange.done) return;
    this.exchange = undefined;
    const again = this.sent > 1 ? exchange.resend : undefined;
    if (again !== undefined) {
      exchange.resend = undefined;
      again();
      return;
    }
    exchange.done = true;
    exchange.reject(unread(cause));
  }

  /**
   * The origin ended its side. Idle: the connection is stale. With a request in flight and no
   * byte of its answer: when the origin closed before that request reached it, its TCP reset the
   * request (FIN, then RST); a probe (an empty line, which HTTP/1.1 lets precede a request) finds
   * the reset at once. No reset: the origin may have read the request, so it fails as closed.
   */
  private onEnd(): void {
    this.ended = true;
    const exchange = this.exchange;
    // Only a plain socket that has not ended its own side: a write there reaches the kernel as
    // it is (TLS would wrap it in a record; an ended stream refuses it without asking).
    if (
      exchange === undefined ||
      exchange.done ||
      this.answered ||
      this.sent < 2 ||
      !this.plain ||
      this.socket.writableEnded
    ) {
      this.socket.destroy();
      return;
    }
    this.socket.write(CRLF);
    if (this.socket.errored !== null) this.unsent(this.socket.errored);
    else this.socket.destroy();
  }

  /** Ends `exchange` (if it is still this connection's) and the connection with it. */
  abort(exchange: Exchange, reason: Error): void {
    if (this.exchange !== exchange || exchange.done) return;
    this.finish(reason);
    this.socket.destroy();
  }

  /** Reads again after the sink paused `exchange`. */
  resume(exchange: Exchange): void {
    if (this.exchange !== exchange || !this.paused) return;
    this.paused = false;
    this.wait(this.pool.options.idleTimeoutMs);
    this.socket.resume();
  }

  idle(): void {
    const keepMs =
      this.keepAliveHint > 0
        ? Math.min(this.pool.options.keepAliveMs, this.keepAliveHint)
        : this.pool.options.keepAliveMs;
    // Checked exactly when the pool hands it out again; the sweep only closes it eventually.
    this.keepUntil = performance.now() + keepMs;
    this.wait(keepMs);
  }

  /** From now on, `ms` of silence ends the exchange (or closes the idle connection); 0: none. */
  private wait(ms: number): void {
    this.waitMs = ms;
    this.stirred = true;
  }

  /** The pool's sweep: a silence longer than the wait times out. */
  look(now: number): void {
    if (this.waitMs === 0) return;
    if (this.stirred) {
      this.stirred = false;
      this.quietSince = now;
    } else if (now - this.quietSince >= this.waitMs) {
      this.waitMs = 0;
      this.onTimeout();
    }
  }

  destroy(): void {
    this.socket.destroy();
  }

  private onTimeout(): void {
    const exchange = this.exchange;
    if (exchange === undefined || exchange.done) {
      this.socket.destroy(); // unused for too long
      return;
    }
    if (this.paused) return; // the client is slow, not the origin
    this.finish(
      this.headDone
        ? new OriginError('origin_body_timeout', 'the origin went silent within its answer')
        : new OriginError('origin_headers_timeout', 'the origin did not answer in time'),
    );
    this.socket.destroy();
  }

  private onClose(): void {
    const exchange = this.exchange;
    if (exchange !== undefined && !exchange.done) {
      if (this.headDone && this.mode === 'close') this.complete();
      else
        this.finish(
          new OriginError('origin_closed', 'the origin closed the connection before its answer ended'),
        );
    }
    this.pool.forget(this);
  }

  private fail(error: Error): void {
    const code = (error as NodeJS.ErrnoException).code;
    // A reset before any byte of the answer: the origin's TCP threw the request away unread
    // (closed with it unread, or closed before it came). Only an abortive close right after
    // reading a whole request would look the same, which HTTP servers do not do.
    if (!this.answered && (code === 'ECONNRESET' || code === 'EPIPE')) {
      this.unsent(error);
      return;
    }
    if (this.exchange !== undefined && !this.exchange.done) this.finish(error);
    this.socket.destroy();
  }

  /** Ends the exchange with an error, or (no error) as answered. */
  private finish(error: Error | undefined): void {
    const exchange = this.exchange;
    if (exchange === undefined || exchange.done) return;
    exchange.done = true;
    this.exchange = undefined;
    if (error === undefined) exchange.resolve();
    else exchange.reject(error);
  }

  /** The answer ended: the exchange resolves, and the connection goes back to the pool or away. */
  private complete(): void {
    const leftover = this.pending !== undefined && this.pending.length > 0;
    this.pending = undefined;
    this.finish(undefined);
    if (this.paused) {
      // The sink's pause was for this answer, which has ended: the next one is read at once.
      this.paused = false;
      this.socket.resume();
    }
    if (this.reusable && !leftover && !this.socket.destroyed) this.pool.release(this);
    else this.socket.destroy();
  }

  onData(chunk: Buffer): void {
    this.stirred = true;
    this.answered = true;
    const exchange = this.exchange;
    if (exchange === undefined || exchange.done) {
      // Bytes with no request waiting: the origin is not speaking HTTP/1.1 keep-alive with us.
      this.socket.destroy();
      return;
    }
    let data = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk]);
    this.pending = undefined;
    try {
      if (!this.headDone) {
        const rest = this.readHead(data, exchange);
        if (rest === undefined) return;
        data = rest;
        if (this.mode === 'none') {
          this.pending = rest.length > 0 ? rest : undefined;
          this.complete();
          return;
        }
      }
      this.readBody(data, exchange);
    } catch (error) {
      this.fail(error instanceof Error ? error : new Error(String(error)));
    }
  }

  /** Parses heads (skipping 1xx ones) from `data`; the bytes after the final head, or undefined for more. */
  private readHead(data: Buffer, exchange: Exchange): Buffer | undefined {
    for (;;) {
      const end = data.indexOf(HEAD_END);
      if (end < 0) {
        if (data.length > MAX_HEAD_BYTES)
          throw new OriginError('origin_protocol_error', 'the answer head is too large');
        this.pending = data;
        return undefined;
      }
      const head = data.toString('latin1', 0, end);
      // Lines end in CRLF: a bare CR or LF is where two parsers of one head part ways.
      if (BARE_LINE_END.test(head))
        throw new OriginError('origin_protocol_error', 'the answer head has a bare CR or LF');
      const statusEnd = head.indexOf('\r\n');
      const match = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: |$)/.exec(
        statusEnd < 0 ? head : head.slice(0, statusEnd),
      );
      if (match === null)
        throw new OriginError('origin_protocol_error', 'the answer has no HTTP/1.x status line');
      const status = Number(match[2]);
      data = data.subarray(end + 4);
      if (status === 101) throw new OriginError('origin_protocol_error', 'the origin switched protocols');
      if (status < 200) continue; // 100 Continue, 103 Early Hints: the final answer follows
      const headers: IncomingHttpHeaders = {};
      // Line by line through the head, without cutting it into lines first.
      for (let at = statusEnd < 0 ? head.length : statusEnd + 2; at < head.length; ) {
        let stop = head.indexOf('\r\n', at);
        if (stop < 0) stop = head.length;
        const colon = head.indexOf(':', at);
        if (colon <= at || colon > stop)
          throw new OriginError('origin_protocol_error', 'the answer has a malformed header line');
        const name = headerName(head.slice(at, colon));
        const value = head.slice(colon + 1, stop).trim();
        at = stop + 2;
        const known = headers[name];
        if (known === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
        else if (Array.isArray(known)) known.push(value);
        else headers[name] = [known, value];
      }
      this.frame(status, match[1] === '1', headers, exchange.request.method);
      this.headDone = true;
      this.wait(this.pool.options.idleTimeoutMs);
      exchange.sink.head(status, headers);
      return data;
    }
  }

  /** How the body is delimited, and whether the connection can carry another request after it. */
  private frame(status: number, http11: boolean, headers: IncomingHttpHeaders, method: string): void {
    const connection = String(headers.connection ?? '').toLowerCase();
    this.reusable = http11 ? !connection.includes('close') : connection.includes('keep-alive');
    const keepAlive = headers['keep-alive'];
    const hint = keepAlive === undefined ? null : /timeout=(\d+)/i.exec(String(keepAlive));
    // A second short of what the origin announced, so it never closes a connection being reused.
    this.keepAliveHint = hint === null ? 0 : Math.max(0, Number(hint[1]) * 1000 - 1000);
    if (this.keepAliveHint === 0 && hint !== null) this.reusable = false;
    const coding = headers['transfer-encoding'];
    const length = headers['content-length'];
    if (method === 'HEAD' || status === 204 || status === 304) {
      this.mode = 'none';
    } else if (coding !== undefined) {
      // Both framings at once (RFC 9112 §6.3): the mark of a smuggled answer; never guessed at.
      if (length !== undefined)
        throw new OriginError(
          'origin_protocol_error',
          'the answer has both Transfer-Encoding and Content-Length',
        );
      const codings = String(coding).toLowerCase().split(',');
      if (codings.at(-1)?.trim() !== 'chunked') {
        this.mode = 'close';
        this.reusable = false;
      } else {
        this.mode = 'chunked';
        this.chunkState = 'size';
      }
    } else if (typeof length === 'string' && CONTENT_LENGTH.test(length)) {
      // One plain length, as nearly every answer has it.
      this.remaining = Number(length);
      this.mode = this.remaining === 0 ? 'none' : 'length';
    } else if (length !== undefined) {
      const values = new Set(
        String(length)
          .split(',')
          .map((v) => v.trim()),
      );
      const [only] = values;
      if (values.size !== 1 || only === undefined || !CONTENT_LENGTH.test(only))
        throw new OriginError('origin_protocol_error', 'the answer has an invalid Content-Length');
      this.remaining = Number(only);
      this.mode = this.remaining === 0 ? 'none' : 'length';
    } else {
      this.mode = 'close';
      this.reusable = false;
    }
  }

  private deliver(exchange: Exchange, bytes: Buffer): void {
    if (bytes.length === 0) return;
    if (!exchange.sink.data(bytes) && !this.paused) {
      this.paused = true;
      this.wait(0);
      this.socket.pause();
    }
  }

  private readBody(data: Buffer, exchange: Exchange): void {
    if (this.mode === 'close') {
      this.deliver(exchange, data);
      return;
    }
    if (this.mode === 'length') {
      if (data.length < this.remaining) {
        this.remaining -= data.length;
        this.deliver(exchange, data);
        return;
      }
      const last = data.subarray(0, this.remaining);
      this.pending = data.length > this.remaining ? data.subarray(this.remaining) : undefined;
      this.remaining = 0;
      this.deliver(exchange, last);
      if (!exchange.done) this.complete();
      return;
    }
    this.readChunked(data, exchange);
  }

  private readChunked(data: Buffer, exchange: Exchange): void {
    let at = 0;
    while (at < data.length) {
      if (this.chunkState === 'data') {
        const take = Math.min(this.remaining, data.length - at);
        this.deliver(exchange, data.subarray(at, at + take));
        if (exchange.done) return;
        at += take;
        this.remaining -= take;
        if (this.remaining === 0) this.chunkState = 'data-end';
        continue;
      }
      const eol = data.indexOf(CRLF, at);
      if (eol < 0) {
        if (data.length - at > 4096)
          throw new OriginError('origin_protocol_error', 'a chunk line is too long');
        this.pending = data.subarray(at);
        return;
      }
      const line = data.toString('latin1', at, eol);
      at = eol + 2;
      if (this.chunkState === 'data-end') {
        if (line !== '') throw new OriginError('origin_protocol_error', 'a chunk does not end with CRLF');
        this.chunkState = 'size';
      } else if (this.chunkState === 'size') {
        const size = /^([0-9a-fA-F]{1,12})(?:[ \t]*;.*)?$/.exec(line);
        if (size === null) throw new OriginError('origin_protocol_error', 'a chunk size is malformed');
        this.remaining = Number.parseInt(size[1] as string, 16);
        this.chunkState = this.remaining === 0 ? 'trailers' : 'data';
      } else if (line === '') {
        // The blank line after the last chunk (and any trailers, which are not passed on).
        this.pending = at < data.length ? data.subarray(at) : undefined;
        this.complete();
        return;
      }
    }
  }
}
