import type { IncomingHttpHeaders } from 'node:http';
import { type LookupFunction, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, rootCertificates as tlsRootCertificates } from 'node:tls';

/**
 * The proxy's HTTP/1.1 client for origins: keep-alive connections per origin, one request at a
 * time on each, the answer pushed to a sink as it is read. It replaces undici on the hot path
 * (issue 28: the same hop cost 113 µs of CPU with undici's dispatcher, 85 µs with this shape),
 * and reads everything HTTP/1.1 frames an answer with: Content-Length, chunked transfer coding
 * (trailers skipped), close-delimited bodies, bodiless statuses, 1xx interim answers, and the
 * Keep-Alive timeout hint. Anything else (a malformed head, conflicting lengths, an upgrade) is
 * an error, never guessed at.
 */

export interface OriginRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | null;
}

export interface OriginSink {
  /** Status and headers arrived. */
  head(status: number, headers: IncomingHttpHeaders): void;
  /** A body chunk; false pauses the origin until the sink calls `resume`. */
  data(chunk: Buffer): boolean;
  /** The request was written to its connection (the origin has it before any later one). */
  written?(): void;
}

export interface OriginControl {
  abort(reason: Error): void;
  resume(): void;
}

export interface OriginClientOptions {
  connectTimeoutMs: number;
  /** From the request written to its answer's head. */
  headersTimeoutMs: number;
  /** The longest silence within an answer's body; 0: none (event streams). */
  idleTimeoutMs: number;
  /** How long an unused connection is kept. */
  keepAliveMs: number;
  /** Connections per origin; requests past it wait for one. */
  maxConnections: number;
  /** Resolves the origin's name (the SSRF guard checks the address here, at the dial). */
  lookup: LookupFunction;
  /** Certificates to trust for https origins besides the system's (tests). */
  ca?: string | undefined;
}

export type OriginErrorCode =
  | 'origin_connect_timeout'
  | 'origin_headers_timeout'
  | 'origin_body_timeout'
  | 'origin_protocol_error'
  | 'origin_closed';

export class OriginError extends Error {
  constructor(
    readonly code: OriginErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const MAX_HEAD_BYTES = 64 * 1024;
const HEAD_END = Buffer.from('\r\n\r\n');
const CRLF = Buffer.from('\r\n');
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/**
 * The head is written as Latin-1, a byte per character, so it may hold only ASCII: a character
 * past U+00FF would lose its high byte (U+010D U+010A would be `\r\n`, a second request).
 * Header values are visible ASCII, space and tab; the target visible ASCII.
 */
const BAD_VALUE = /[^\t\x20-\x7e]/;
/** Spaces, controls and anything past ASCII would break the request line (a path arrives percent-encoded). */
const UNSENDABLE_PATH = /[^\x21-\x7e]/;
/** Request headers this client writes itself. */
const OWN_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive']);

type BodyMode = 'none' | 'length' | 'chunked' | 'close';
type ChunkState = 'size' | 'data' | 'data-end' | 'trailers';

interface Exchange {
  request: OriginRequest;
  sink: OriginSink;
  resolve: () => void;
  reject: (error: Error) => void;
  done: boolean;
  /** The sink was told the request is written (once, however many times it is sent). */
  told: boolean;
  /**
   * Sends the request again on a new connection: the one it went out on proved that the origin
   * never read it. Absent once used (one resend), and for requests on a new connection.
   */
  resend: (() => void) | undefined;
}

/**
 * Errors of requests the origin never read: no byte of it reached the origin's application (the
 * dial failed, the connection was refused before anything was written, or TCP proved it unread).
 * Such a call did not run: it is not billed and gives its unit back.
 */
const unreadErrors = new WeakSet<Error>();

/** Whether `error` ended a request that the origin provably never read. */
export function originNeverRead(error: unknown): boolean {
  return error instanceof Error && unreadErrors.has(error);
}

function unread(error: Error): Error {
  unreadErrors.add(error);
  return error;
}

const CONTENT_LENGTH = /^\d{1,15}$/;
const BARE_LINE_END = /\r(?!\n)|(?<!\r)\n/;

/** Header names as origins spell them, lower-cased and checked once (bounded: origins repeat theirs). */
const headerNames = new Map<string, string>();

/** An answer's header name, lower-cased; throws when it is not an HTTP token. */
function headerName(raw: string): string {
  const known = headerNames.get(raw);
  if (known !== undefined) return known;
  const name = raw.toLowerCase();
  if (!TOKEN.test(name))
    throw new OriginError('origin_protocol_error', 'the answer has a malformed header name');
  if (headerNames.size < 512) headerNames.set(raw, name);
  return name;
}

/** The request's head and body as one buffer; throws on a header that cannot be sent. */
function encodeRequest(request: OriginRequest, host: string): Buffer {
  if (!TOKEN.test(request.method) || UNSENDABLE_PATH.test(request.path))
    throw new OriginError('origin_protocol_error', 'the request line cannot be sent');
  let head = `${request.method} ${request.path} HTTP/1.1\r\nhost: ${host}\r\n`;
  for (const name in request.headers) {
    const value = request.headers[name] as string;
    const lower = name.toLowerCase();
    if (OWN_HEADERS.has(lower)) continue;
    if (!TOKEN.test(name) || BAD_VALUE.test(value))
      throw new OriginError(
        'origin_protocol_error',
        `header ${JSON.stringify(name.slice(0, 100))} cannot be sent`,
      );
    head += `${name}: ${value}\r\n`;
  }
  const body = request.body;
  if (body !== null && body.length > 0) head += `content-length: ${body.length}\r\n\r\n`;
  else head += request.method === 'GET' || request.method === 'HEAD' ? '\r\n' : 'content-length: 0\r\n\r\n';
  if (body === null || body.length === 0) return Buffer.from(head, 'latin1');
  // Head and body in one allocation (from Buffer's pool when small), not one each and a third for
  // both. Latin-1 writes a byte for each character of the head.
  const encoded = Buffer.allocUnsafe(head.length + body.length);
  encoded.write(head, 0, 'latin1');
  encoded.set(body, head.length);
  return encoded;
}

/**
 * Where every plain (not TLS) origin connection reads into (Node's `onread`): a read lands here
 * and its bytes are copied out before the callback returns, so one buffer serves them all. A
 * socket read the usual way gets a fresh 64 KiB allocation from Node (trimmed to what was read)
 * and goes through the stream's push and its next-tick read-ahead: about a microsecond a call
 * more on the bench (issue 28).
 */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** The bytes a read left in READ_BUFFER, copied: what is parsed may be kept past the read. */
function readBytes(length: number): Buffer {
  const bytes = Buffer.allocUnsafe(length);
  READ_BUFFER.copy(bytes, 0, 0, length);
  return bytes;
}

/** One keep-alive connection: one exchange at a time, its answer parsed as it arrives. */
class Connection {
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
    private readonly pool: OriginPool,
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

/**
 * How often a pool looks for silences past their wait: a quarter of the shortest wait, within
 * 10 ms and 1 s, so a timeout comes at most half its length late (reuse after a Keep-Alive
 * timeout is checked exactly, when the connection is handed out).
 */
function sweepPeriod(options: OriginClientOptions): number {
  const waits = [options.headersTimeoutMs, options.idleTimeoutMs, options.keepAliveMs].filter((ms) => ms > 0);
  const shortest = waits.length === 0 ? 4_000 : Math.min(...waits);
  return Math.min(1_000, Math.max(10, Math.floor(shortest / 4)));
}

/** The connections to one origin. */
class OriginPool {
  private readonly idleConnections: Connection[] = [];
  private readonly waiting: Array<(connection: Connection | Error) => void> = [];
  private open = 0;
  private readonly tls: boolean;
  private readonly hostname: string;
  private readonly port: number;
  readonly hostHeader: string;
  /** Open connections, which the sweep looks at while there are any. */
  private readonly connections = new Set<Connection>();
  private sweep: NodeJS.Timeout | undefined;

  constructor(
    origin: string,
    readonly options: OriginClientOptions,
  ) {
    const url = new URL(origin);
    this.tls = url.protocol === 'https:';
    this.hostname = url.hostname.replace(/^\[|\]$/g, '');
    this.port = url.port === '' ? (this.tls ? 443 : 80) : Number(url.port);
    this.hostHeader = url.host;
  }

  acquire(use: (connection: Connection | Error) => void): void {
    for (;;) {
      const connection = this.idleConnections.pop();
      if (connection === undefined) break;
      if (connection.destroyed) continue;
      // Kept past its time (the sweep has not closed it yet): the origin may be closing it.
      if (performance.now() >= connection.keepUntil) {
        connection.destroy();
        continue;
      }
      use(connection);
      return;
    }
    if (this.open >= this.options.maxConnections) return void this.waiting.push(use);
    this.dial(use);
  }

  /**
   * A new connection for a request a stale one never delivered (it had taken this one's place
   * in the pool, so the dial stays within the limit).
   */
  redial(use: (connection: Connection | Error) => void): void {
    this.dial(use);
  }

  /** Takes a waiting request off the queue (its client went away before a connection freed). */
  cancel(use: (connection: Connection | Error) => void): void {
    const at = this.waiting.indexOf(use);
    if (at >= 0) this.waiting.splice(at, 1);
  }

  private dial(use: (connection: Connection | Error) => void): void {
    this.open++;
    const common = {
      host: this.hostname,
      port: this.port,
      lookup: this.options.lookup,
      noDelay: true,
      keepAlive: true,
      // The origin's FIN is the connection's to handle (onEnd): it may have to probe for a reset.
      allowHalfOpen: true,
    };
    // A plain connection's reads, once it is a Connection; bytes before that (an origin speaking
    // first) end it, as they would on a connection that had sent nothing.
    let reader: Connection | undefined;
    const socket = this.tls
      ? tlsConnect({
          ...common,
          servername: /^[\d.]+$|:/.test(this.hostname) ? undefined : this.hostname,
          ALPNProtocols: ['http/1.1'],
          ...(this.options.ca === undefined ? {} : { ca: [...tlsRootCertificates, this.options.ca] }),
        })
      : netConnect({
          ...common,
          onread: {
            buffer: READ_BUFFER,
            // True: reading goes on (a sink's pause goes through socket.pause()).
            callback: (length: number) => {
              if (reader === undefined) socket.destroy();
              else reader.onData(readBytes(length));
              return true;
            },
          },
        });
    const timer = setTimeout(
      () =>
        socket.destroy(
          new OriginError('origin_connect_timeout', 'the origin did not accept a connection in time'),
        ),
      this.options.connectTimeoutMs,
    );
    const failed = (error: Error) => {
      clearTimeout(timer);
      this.open--;
      use(error);
      this.dialForWaiting();
    };
    socket.once('error', failed);
    socket.once(this.tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      socket.off('error', failed);
      const connection = new Connection(this, socket, !this.tls);
      reader = connection;
      this.connections.add(connection);
      this.sweep ??= setInterval(() => this.look(), sweepPeriod(this.options)).unref();
      use(connection);
    });
  }

  /** A failed dial frees a place: a request waiting for one tries its own. */
  private dialForWaiting(): void {
    const next = this.waiting.shift();
    if (next !== undefined) this.dial(next);
  }

  release(connection: Connection): void {
    const next = this.waiting.shift();
    if (next !== undefined) {
      next(connection);
      return;
    }
    connection.idle();
    this.idleConnections.push(connection);
  }

  /** Times out the silences past their wait. */
  private look(): void {
    const now = performance.now();
    for (const connection of this.connections) connection.look(now);
  }

  forget(connection: Connection): void {
    this.connections.delete(connection);
    if (this.connections.size === 0 && this.sweep !== undefined) {
      clearInterval(this.sweep);
      this.sweep = undefined;
    }
    this.open--;
    const at = this.idleConnections.indexOf(connection);
    if (at >= 0) this.idleConnections.splice(at, 1);
    this.dialForWaiting();
  }

  close(): void {
    for (const use of this.waiting.splice(0)) use(new OriginError('origin_closed', 'the proxy is stopping'));
    for (const connection of this.idleConnections.splice(0)) connection.destroy();
  }
}

export class OriginClient {
  private readonly pools = new Map<string, OriginPool>();

  constructor(private readonly options: OriginClientOptions) {}

  /**
   * One request to `origin` (scheme, host and port), the answer pushed to `sink`. Resolves when
   * the answer has ended; rejects on connect, timeout or protocol errors, before or after the head.
   */
  request(
    origin: string,
    request: OriginRequest,
    sink: OriginSink,
    bind: (control: OriginControl) => void,
  ): Promise<void> {
    let pool = this.pools.get(origin);
    if (pool === undefined) {
      pool = new OriginPool(origin, this.options);
      this.pools.set(origin, pool);
    }
    const owner = pool;
    return new Promise((resolve, reject) => {
      let encoded: Buffer;
      try {
        encoded = encodeRequest(request, owner.hostHeader);
      } catch (error) {
        return reject(error);
      }
      let connection: Connection | undefined;
      const exchange: Exchange = {
        request,
        sink,
        resolve,
        reject,
        done: false,
        told: false,
        resend: () => {
          connection = undefined;
          owner.redial(use);
        },
      };
      const use = (got: Connection | Error) => {
        if (exchange.done) {
          if (!(got instanceof Error)) owner.release(got);
          return;
        }
        if (got instanceof Error) {
          exchange.done = true;
          // A dial that failed sent nothing.
          return reject(unread(got));
        }
        connection = got;
        got.start(exchange, encoded);
      };
      bind({
        abort: (reason) => {
          if (connection !== undefined) return connection.abort(exchange, reason);
          if (exchange.done) return;
          exchange.done = true;
          owner.cancel(use);
          reject(reason);
        },
        resume: () => connection?.resume(exchange),
      });
      owner.acquire(use);
    });
  }

  async close(): Promise<void> {
    for (const pool of this.pools.values()) pool.close();
    this.pools.clear();
  }
}
