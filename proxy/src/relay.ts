import type { IncomingHttpHeaders } from 'node:http';
import { type Logger, UnsafeUrlError } from '@mcp-meter/contracts/kit';
import type { UsageEmitter } from '@mcp-meter/ingest/producer';
import type { Admitted } from './admission';
import { AnswerScanner } from './answer/scanner';
import { BatchMerger } from './batch-merge';
import type { ProxyConfig } from './config';
import type { Gatekeeper } from './gatekeeper';
import type { CallGate, GatedRequest } from './gating';
import { type Exchange, sseEvent, statusLine, writeChunk, writeCors, writeHead } from './http-io';
import type { ProxyRequest } from './intake';
import { outcomeOf, sessionHeader } from './jsonrpc';
import type { ProxyMetrics } from './metrics-page';
import type { OriginClient } from './origin/client';
import { originNeverRead } from './origin/errors';
import type { OriginFailureLog } from './origin/failure-log';
import { OriginCredentialsRefused, originFailure } from './origin/failures';
import { type OriginKeys, originTarget } from './origin/target';
import type { OriginControl, OriginSink } from './origin/types';
import { refuse } from './refusals';
import { awaitTurn, type SessionOrder, type Ticket } from './session-order';
import { type RecentSessions, sessionOf } from './sessions';

const SSE_OPENING = Buffer.from(':\n');

/** What relaying uses, shared by every request. */
export interface RelayDeps {
  config: ProxyConfig;
  /** Calls and the rest: a bounded keep-alive pool per origin. */
  origins: OriginClient;
  /** Streams that last as long as their client listens: a pool of their own. */
  streams: OriginClient;
  /** The SSRF guard's verdict on an origin URL with a literal address (undefined: allowed). */
  literalProblemOf: (originUrl: string) => string | undefined;
  order: SessionOrder;
  metrics: ProxyMetrics;
  logger: Logger;
  emitter: UsageEmitter | undefined;
  urlElicitationSessions: RecentSessions;
  originKeys: OriginKeys;
  gate: CallGate;
  gatekeeper: Gatekeeper | undefined;
  /** Warnings of failed origin requests, at most one a second per server and kind. */
  originFailureLog: OriginFailureLog;
}

/**
 * Relaying one request: it is sent to the origin (in its session's order), and the answer
 * streams back to the client while its calls' outcomes are read from it (AnswerScanner); a
 * batch's refused calls join the answer; the last byte waits for the calls' records to be on
 * disk. Every way the request can end (answered, its client gone, the proxy stopping, the
 * origin failing) settles the request's tally once. One object per request: the origin client
 * pushes the answer's head and body into it (it is the request's OriginSink).
 */
export class Relay implements OriginSink {
  private status = 0;
  private upstreamHeaders: IncomingHttpHeaders = {};
  /** Reads the calls' outcomes from the answer as it passes (absent without calls). */
  private scanner: AnswerScanner | undefined;
  private expectedLength = -1;
  /** The client's answer has ended (it came whole in one chunk). */
  private ended = false;
  /** The origin refused the proxy's credentials (401, 407): its answer is not passed on. */
  private refusedCredentials = false;
  /** A batch with refused calls answered as JSON: their answers are spliced into the origin's. */
  private merger: BatchMerger | undefined;
  /** The whole answer, when it came in one chunk and waits for the spool. */
  private whole: Buffer | undefined;
  /** A JSON answer to a call asked inside its own event stream: sent as one event at its end. */
  private wrapped: Buffer[] | undefined;
  /** Whether the answer to the call of `gated.hold` was seen far enough to know if it asks for input. */
  private holdSettled: boolean;
  /** The hold being kept while the answer's chunk that asked for input waits. */
  private holding: Promise<void> | undefined;
  /**
   * A metered answer's last byte waits until the calls' records are in the spool, so a crash
   * can never leave a served call unrecorded (issue 32); the wait is the rest of this turn.
   */
  private readonly spooling: boolean;

  constructor(
    private readonly deps: RelayDeps,
    private readonly exchange: Exchange,
    private readonly request: ProxyRequest,
    private readonly admitted: Admitted,
    private readonly gated: GatedRequest,
  ) {
    this.holdSettled = gated.hold === undefined;
    this.spooling = deps.emitter !== undefined && admitted.calls.length > 0;
  }

  /** Sends the request to the origin and its answer to the client; resolves when both are done. */
  async run(): Promise<void> {
    const { deps, exchange, request } = this;
    const { server, calls } = this.admitted;
    const headers = request.headers;
    // A session's end (DELETE) forgets what its client declared.
    if (request.method === 'DELETE') deps.urlElicitationSessions.delete(sessionOf(headers));
    const auth = deps.originKeys.of(server);
    if (auth !== null) headers[auth.header] = auth.value;
    const sent = performance.now();
    deps.metrics.own.observe((sent - request.arrived) / 1000);
    try {
      const literalProblem = deps.literalProblemOf(server.originUrl);
      if (literalProblem !== undefined) throw new UnsafeUrlError(literalProblem);
      const target = originTarget(server.originUrl, request.route.rest, request.query);
      // Only a request with an earlier one of its session still on its way waits (no await else).
      // A session's GET stream starts at once (nothing before it is needed for it), and a session's
      // first calls wait briefly for that stream when its client just said it is initialized.
      if (request.ticket?.turn !== undefined && !exchange.standalone)
        await awaitTurn(request.ticket, deps.config.originConnectTimeoutMs);
      const streamReady = calls.length > 0 ? deps.order.streamReady(request.ticket) : undefined;
      if (streamReady !== undefined) await streamReady;
      const body = this.gated.body;
      await (exchange.standalone ? deps.streams : deps.origins).request(
        target.origin,
        { method: request.method, path: target.path, headers, body: body.length > 0 ? body : null },
        this,
        (control: OriginControl) => {
          exchange.origin = control;
          if (exchange.aborted) control.abort(new Error('client went away'));
          else if (exchange.stopped) control.abort(new Error('proxy stopping'));
        },
      );
      // The answer may have ended while its last chunk waited for a multi-round hold.
      if (this.holding !== undefined) await this.holding;
      if (exchange.aborted) return this.settleCancelled();
      if (this.refusedCredentials) throw new OriginCredentialsRefused(this.status);
      const answered = performance.now();
      deps.metrics.origin.observe((answered - sent) / 1000);
      await this.finish();
      const answering = performance.now() - answered;
      deps.metrics.answer.observe(answering / 1000);
      deps.metrics.added.observe((sent - request.arrived + answering) / 1000);
    } catch (error) {
      await this.failed(error);
    }
  }

  /** The request was written to its origin connection: the next of its session may go. */
  written(): void {
    const ticket = this.request.ticket;
    // A standalone GET has started once answered (head), not once written.
    if (ticket === undefined || this.exchange.standalone) return;
    this.deps.order.written(ticket as Ticket, this.admitted.parsed);
  }

  head(statusCode: number, h: IncomingHttpHeaders): void {
    const { exchange, request } = this;
    const { calls } = this.admitted;
    request.ticket?.done();
    if (exchange.standalone) this.deps.order.streamOpened(request.ticket);
    this.status = statusCode;
    this.refusedCredentials = statusCode === 401 || statusCode === 407;
    this.upstreamHeaders = h;
    const contentType = String(h['content-type'] ?? '');
    const stream = contentType.includes('text/event-stream');
    if (exchange.eventStream === true && !stream) this.wrapped = [];
    const mergeJson = this.gated.extra.length > 0 && !stream;
    if (mergeJson) this.merger = new BatchMerger(this.gated.extra);
    const length = h['content-length'];
    this.expectedLength = typeof length === 'string' ? Number(length) : -1;
    if (calls.length > 0)
      this.scanner = new AnswerScanner(mergeJson ? 'application/json' : contentType, calls);
    const session = h['mcp-session-id'];
    if (this.admitted.declaresElicitation && statusCode < 300 && typeof session === 'string')
      this.deps.urlElicitationSessions.add(session);
    if (!mergeJson && !this.refusedCredentials && !exchange.aborted && !exchange.headersSent && stream) {
      // An event stream may stay silent for long (a GET stream, a slow tool): its head goes
      // now. uWS sends the head's closing blank line only with a first body write, so that
      // write is an SSE comment line, which every SSE reader skips.
      exchange.res.cork(() => {
        writeHead(exchange, statusCode, h);
        exchange.res.write(SSE_OPENING);
      });
    }
  }

  data(chunk: Buffer): boolean {
    const { exchange } = this;
    if (exchange.aborted || this.refusedCredentials) return true;
    this.scanner?.write(chunk);
    const out = this.merger === undefined ? chunk : this.merger.write(chunk);
    const hold = this.gated.hold;
    if (!this.holdSettled && hold !== undefined) {
      const answer = this.scanner?.answerSoFar(hold.of);
      if (answer !== undefined) {
        this.holdSettled = true;
        if (answer.inputRequired) {
          // Paused until the hold is kept, then this chunk goes and the origin resumes.
          this.holding = hold
            .keep(this.gated.tally.facts.get(hold.of), answer.requestState ?? null)
            .then(() => {
              if (!exchange.aborted && this.send(out)) exchange.origin?.resume();
            });
          return false;
        }
      }
    }
    return this.send(out);
  }

  /**
   * The answer's status and headers: the origin's, except for a merged batch, which is the
   * proxy's own JSON (200, with the origin's session id). Call inside cork.
   */
  private readonly writeAnswerHead = () => {
    const { exchange } = this;
    if (this.merger === undefined) return writeHead(exchange, this.status, this.upstreamHeaders);
    exchange.res.writeStatus(statusLine(200)).writeHeader('content-type', 'application/json');
    for (const [name, value] of Object.entries(sessionHeader(this.upstreamHeaders)))
      exchange.res.writeHeader(name, value);
    writeCors(exchange);
    exchange.headersSent = true;
  };

  /** Passes a piece of the answer on; false when the client is slow (the origin resumes when it drains). */
  private send(out: Buffer): boolean {
    const { exchange } = this;
    if (out.length === 0) return true;
    if (this.wrapped !== undefined) return this.wrapped.push(out) > 0;
    // The whole answer in its first chunk (most JSON answers): one write, with a length.
    const complete = out.length === this.expectedLength && this.gated.extra.length === 0;
    if (complete && this.spooling) {
      this.whole = out;
      return true;
    }
    let accepted = true;
    exchange.res.cork(() => {
      if (!exchange.headersSent) this.writeAnswerHead();
      if (complete) {
        exchange.res.end(out);
        this.ended = true;
      } else accepted = exchange.res.write(out);
    });
    if (!accepted) {
      // The client reads slower than the origin writes: pause the origin until it drains.
      exchange.res.onWritable(() => {
        exchange.origin?.resume();
        return true;
      });
    }
    return accepted;
  }

  /** The origin's answer has ended: the refused calls' answers join it, the calls are recorded, the client's answer ends. */
  private async finish(): Promise<void> {
    const { exchange, merger, scanner } = this;
    if (merger !== undefined) {
      // The merged array's closing bytes: the refused calls' answers and the bracket.
      const waiting = writeChunk(exchange, merger.end(), this.writeAnswerHead);
      if (waiting !== undefined) await waiting;
    }
    // Refused calls of a batch answered as a stream arrive as events after the origin's.
    else
      for (const answer of this.gated.extra) {
        const waiting = writeChunk(
          exchange,
          Buffer.from(`event: message\ndata: ${JSON.stringify(answer)}\n\n`),
          this.writeAnswerHead,
        );
        if (waiting !== undefined) await waiting;
      }
    this.deps.metrics.requests.incLabel('code', merger === undefined ? this.status : 200);
    scanner?.end();
    this.gated.tally.settleAs((call) => outcomeOf(this.status, scanner?.answerTo(call)));
    const { emitter } = this.deps;
    if (this.spooling && emitter !== undefined) {
      const spooled = emitter.spooled();
      if (spooled !== undefined) await spooled;
    }
    if (!exchange.aborted && !this.ended) {
      exchange.res.cork(() => {
        if (!exchange.headersSent) this.writeAnswerHead();
        if (this.wrapped !== undefined) exchange.res.end(sseEvent(Buffer.concat(this.wrapped)));
        else if (this.whole === undefined) exchange.res.end();
        else exchange.res.end(this.whole);
      });
    }
  }

  /**
   * The client went away (and the origin request was cancelled with it). Each call that
   * reached the origin may have run there and was counted against the limit, so it is
   * recorded: with the origin's outcome if its answer had arrived, else as a cancelled error.
   * One that left before a byte was written gave its unit back first (refused, never billed).
   */
  private settleCancelled(): void {
    const { scanner } = this;
    const { tally } = this.gated;
    scanner?.end();
    tally.settle((call) => {
      // Calls refused here (a paywall in a batch) keep their outcome; they never left.
      const forwarded = tally.facts.get(call)?.outcome === undefined;
      const answer = scanner?.answerTo(call);
      const answered = answer !== undefined;
      return {
        ...tally.factsOf(call, () => (answered ? outcomeOf(this.status, answer) : 'error')),
        cancelled: forwarded && !answered,
      };
    });
  }

  /** The request failed: at the origin, or ended by its client or a stopping proxy. */
  private async failed(error: unknown): Promise<void> {
    const { deps, exchange } = this;
    const { server, calls, singleId } = this.admitted;
    const { tally } = this.gated;
    // A call the origin never read did not run, whoever ended it: its unit and credits go back.
    if (originNeverRead(error))
      await deps.gate.unspend(deps.gatekeeper, calls, tally.facts).catch((failed: unknown) => {
        deps.logger.warn({ err: failed, server: server.serverId }, 'units of unread calls not given back');
      });
    if (exchange.aborted) return this.settleCancelled();
    if (exchange.stopped) {
      // Cancelled by the stop: recorded like a client leaving; the client is told to retry.
      this.settleCancelled();
      if (exchange.headersSent) exchange.res.cork(() => exchange.res.end());
      else refuse(exchange, 'proxy_stopping', singleId);
      return;
    }
    const failure = originFailure(error);
    deps.metrics.originFailures.incLabel('code', failure);
    deps.originFailureLog.failed(server.serverId, failure, error);
    tally.settleAs(() => 'upstream_error');
    if (exchange.headersSent && exchange.eventStream !== true) exchange.res.cork(() => exchange.res.end());
    else refuse(exchange, failure, singleId);
  }
}
