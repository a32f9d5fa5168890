import uWS from 'uWebSockets.js';
import type { IncomingHttpHeaders } from 'node:http';
import { type Logger, UnsafeUrlError } from '@mcp-meter/contracts/kit';
import type { LeasedLimiter } from '@mcp-meter/contracts/limits';
import type { AccessTokenClaims } from '@mcp-meter/contracts/snapshots';
import type { UsageEmitter } from '@mcp-meter/ingest/producer';
import { AnswerScanner } from './answer/scanner';
import { TokenVerifier } from './auth';
import { BatchMerger } from './batch-merge';
import { CallDesk, type CallFacts, withoutCalls } from './call-desk';
import type { ProxyConfig } from './config';
import type { ControlPlaneLink } from './control-link';
import { type ServerDirectory, SnapshotUnavailableError } from './directory';
import { bearerChallenge, metadataRouteOf, resourceUrlOf, serveResourceMetadata } from './discovery';
import { eraOf, headerMismatch } from './era';
import type { Gatekeeper } from './gatekeeper';
import {
  answerPreflight,
  type Exchange,
  hopHeadersIn,
  respond,
  sseEvent,
  statusLine,
  writeChunk,
  writeCors,
  writeHead,
} from './http-io';
import { InFlight } from './in-flight';
import { forwardableHeaders, targetSendable } from './intake';
import {
  CHECKOUT_INPUT,
  declaresUrlElicitation,
  INVALID_PARAMS,
  jsonRpcError,
  outcomeOf,
  sessionHeader,
  type ToolCall,
  type ToolOutcome,
  toolCallsIn,
} from './jsonrpc';
import { ProxyMetrics, serveMetrics } from './metrics-page';
import { originNeverRead } from './origin/client';
import { originClients } from './origin/clients';
import { OriginCredentialsRefused, originFailure } from './origin/failures';
import { OriginKeys, originTarget } from './origin/target';
import { askInCall, asksInCall, checkoutOf, PaywallAsks } from './paywall-ask';
import { argumentsDigest, PaywallStates, STATE_PROBLEMS } from './paywall-state';
import { admittedAfterPayment, waitForPayment } from './paywall-wait';
import { refuse } from './refusals';
import { type BodyReading, readJsonBody } from './request-body';
import type { CallRounds } from './rounds';
import { type Route, routeOf } from './routing';
import { awaitTurn, SessionOrder, type Ticket } from './session-order';
import { RecentSessions, sessionOf } from './sessions';

/** How long a session's later requests wait for the origin to answer its standalone GET's head. */
const STANDALONE_HEAD_WAIT_MS = 500;

export interface ProxyServerDeps {
  config: ProxyConfig;
  directory: ServerDirectory;
  emitter: UsageEmitter | undefined;
  verifier: TokenVerifier;
  /** Absent: no gating or limits (every call is forwarded and metered). */
  gatekeeper: Gatekeeper | undefined;
  link: ControlPlaneLink | undefined;
  limiter: LeasedLimiter | undefined;
  /** Holds of multi-round calls (absent without gating: nothing is spent, so nothing is held). */
  rounds?: CallRounds | undefined;
  secretKey: Buffer;
  logger: Logger;
}

export interface ProxyServer {
  port: number;
  url: string;
  close(): Promise<void>;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** The id of a single JSON-RPC request, which an error answer must carry; null otherwise. */
const idOf = (parsed: unknown): string | number | null =>
  isObject(parsed) && (typeof parsed.id === 'string' || typeof parsed.id === 'number') ? parsed.id : null;

const EMPTY = Buffer.alloc(0);
const SSE_OPENING = Buffer.from(':\n');
const NO_BODY: BodyReading = { ok: true, parsed: {} };

export async function startProxyServer(deps: ProxyServerDeps): Promise<ProxyServer> {
  const { config, directory, emitter, verifier, gatekeeper, link, logger, rounds } = deps;
  const { origins, streams, literalProblemOf } = originClients(config);
  /** Each session's requests reach the origin in the order they arrived (session-order.ts). */
  const order = new SessionOrder();
  /** Exchanges being served (the in-flight gauge), so a stop can wait for them or end them. */
  const live = new InFlight<Exchange>();
  // Sessions whose client declared URL elicitation at initialize (MCP 2025-11-25), by the
  // Mcp-Session-Id the origin gave them: their paywall is a -32042 URL elicitation.
  const urlElicitationSessions = new RecentSessions(100_000);
  const asks = new PaywallAsks();
  let stopping = false;
  const stop = (exchange: Exchange) => {
    exchange.stopped = true;
    exchange.origin?.abort(new Error('proxy stopping'));
  };
  const metrics = new ProxyMetrics();
  const states = new PaywallStates(deps.secretKey);
  const desk = new CallDesk({ emitter, link, metrics, logger, states });
  const originKeys = new OriginKeys(deps.secretKey);

  /** Whether the MCP server on this subdomain lets pages from `pageOrigin` call it. */
  async function originAllowed(subdomain: string, pageOrigin: string): Promise<boolean> {
    const server = await directory.lookup(subdomain);
    return server?.allowedOrigins?.includes(pageOrigin) === true;
  }

  /**
   * One request's way through the proxy: identity, server, body, gating, then the origin call
   * whose answer streams back while its calls' outcomes are read. Longer than the rest on
   * purpose: the origin sink's callbacks share this request's state (status, head, scanner,
   * merger) with the answer's end and its failure, and splitting them would put that state in
   * an object per request on the hot path. Gating lives in call-desk.ts, refusals in
   * refusals.ts, writing in http-io.ts.
   */
  async function forward(
    exchange: Exchange,
    request: {
      method: string;
      route: Route;
      query: string;
      headers: Record<string, string>;
      body: Buffer;
      /** What the proxy read of the body (GET and DELETE have none: read as an empty object). */
      reading: BodyReading;
      authorization: string;
      /** How the client addressed the server (its resource URL is built only for a refusal). */
      host: string;
      pathForm: boolean;
      arrived: number;
      /** The Origin header ('' when the client is not a browser page). */
      pageOrigin: string;
      /** Its place in its session's order of requests to the origin (session-order.ts). */
      ticket: Ticket | undefined;
    },
  ) {
    const started = request.arrived;
    const parsed = request.reading.ok ? request.reading.parsed : undefined;
    // A page from an origin the server does not allow is refused before anything else is judged
    // (MCP transports: servers MUST validate Origin, against DNS rebinding). An unknown server
    // answers the same, so no page learns which subdomains exist.
    if (request.pageOrigin !== '') {
      if (!(await originAllowed(request.route.subdomain, request.pageOrigin)))
        return refuse(exchange, 'browser_origin_not_allowed');
      exchange.cors = request.pageOrigin;
    }
    // MCP 2026-07-28's subscriptions/listen is a POST whose event stream lasts as long as the
    // client listens: like a session's GET stream it takes a connection of the stream pool, not
    // one the calls share, and a stopping proxy ends it at once.
    if (isObject(parsed) && parsed.method === 'subscriptions/listen') exchange.standalone = true;
    const calls = toolCallsIn(parsed);
    const declaresElicitation = Array.isArray(parsed)
      ? parsed.some(declaresUrlElicitation)
      : declaresUrlElicitation(parsed);
    const singleId = idOf(parsed);
    // RFC 6750 / MCP authorization: the client learns it must (re)authenticate, and where the
    // server's protected-resource metadata names the authorization server (RFC 9728).
    const challenge = (error?: Parameters<typeof bearerChallenge>[1]) =>
      bearerChallenge(
        resourceUrlOf(request.route, request.host, config.publicScheme, request.pathForm),
        error,
      );
    const unauthorized = (reason: string) =>
      refuse(exchange, 'unauthorized', singleId, {
        message: `Unauthorized: ${reason}`,
        headers: {
          'www-authenticate': challenge(
            request.authorization === '' ? undefined : { code: 'invalid_token', description: reason },
          ),
        },
      });
    // The token is judged before the server is looked up: without a valid one, no request
    // learns whether a subdomain exists.
    let claims: AccessTokenClaims | undefined;
    if (config.requireAuth) {
      const verifying = verifier.verify(request.authorization);
      const verdict = verifying instanceof Promise ? await verifying : verifying;
      if (!verdict.ok) return unauthorized(verdict.reason);
      claims = verdict.claims;
    }
    // Cached lookups answer at once: awaited only when the store must be read.
    const found = directory.lookup(request.route.subdomain);
    const server = found instanceof Promise ? await found : found;
    const access =
      server === undefined || claims === undefined
        ? undefined
        : TokenVerifier.access(claims, server, config.baseDomain);
    if (server === undefined || access === 'foreign') return refuse(exchange, 'mcp_server_not_found');
    if (access === 'insufficient_scope')
      return refuse(exchange, 'insufficient_scope', singleId, {
        headers: {
          'www-authenticate': challenge({
            code: 'insufficient_scope',
            description: 'the token does not carry the mcp scope',
          }),
        },
      });
    if (access !== undefined) return unauthorized(access);
    const customerRef = claims?.sub ?? 'anonymous';
    if (server.status !== 'active')
      return refuse(exchange, 'mcp_server_not_active', singleId, {
        message: `This MCP server is ${server.status}`,
      });
    // Not read, so not judged: the origin never sees it (it might decode a call the proxy missed).
    if (!request.reading.ok)
      return refuse(exchange, request.reading.code, null, { message: request.reading.message });
    // A client's answer to a paywall the proxy asked inside a call is the proxy's (paywall-ask.ts).
    if (request.method === 'POST' && asks.take(parsed, customerRef))
      return respond(exchange, 202, 'application/json', '');
    // MCP 2026-07-28: headers the body contradicts are refused before anything is spent.
    const era = eraOf(request.headers, parsed);
    if (request.method === 'POST') {
      const mismatch = headerMismatch(request.headers, parsed, era);
      if (mismatch !== undefined)
        return refuse(exchange, 'header_mismatch', singleId, { message: `Header mismatch: ${mismatch}` });
    }
    let body = request.body;
    // A modern retry after the paywall's checkout carries the proxy's own requestState: checked,
    // then taken out, so the origin sees the original call (which is gated again below).
    const retry = era.modern && calls.length === 1 ? calls[0] : undefined;
    /** The retry of a call the paywall refused, with the proxy's state: the same logical call. */
    let paywallRetry = false;
    let checkoutAccepted = false;
    if (retry !== undefined && PaywallStates.isOurs(retry.requestState)) {
      const check = await states.check(retry.requestState, {
        customer: customerRef,
        server: server.serverId,
        tool: retry.tool,
        arguments: retry.arguments,
      });
      if (check !== 'ok') {
        desk.meter(
          server,
          customerRef,
          calls,
          () => ({ outcome: 'error', admitted: false, refused: true }),
          started,
        );
        return respond(
          exchange,
          200,
          'application/json',
          jsonRpcError(
            retry.id,
            INVALID_PARAMS,
            `requestState ${STATE_PROBLEMS[check]}; call the tool again without it`,
            {
              code: 'request_state_invalid',
            },
          ),
        );
      }
      const params = (parsed as { params: Record<string, unknown> }).params;
      // Accepted: the customer agreed to open the checkout page, which is not yet paying; the
      // call waits for the purchase (waitForPayment). Declined or cancelled: asking again would
      // loop until the client gives up. Either way a call still refused ends with the readable
      // paywall, never another elicitation.
      const checkout = isObject(params.inputResponses) ? params.inputResponses[CHECKOUT_INPUT] : undefined;
      paywallRetry = true;
      checkoutAccepted = isObject(checkout) && checkout.action === 'accept';
      delete params.requestState;
      delete params.inputResponses;
      body = Buffer.from(JSON.stringify(parsed));
    }

    // A multi-round call's retry (MCP 2026-07-28) bringing back the state an origin issued to this
    // customer: the call was admitted at its first round, so this round is not admitted again.
    const single = era.modern && calls.length === 1 ? calls[0] : undefined;
    const bindingOf = (call: ToolCall, state: string | null) => ({
      customer: customerRef,
      server: server.serverId,
      tool: call.tool,
      args: argumentsDigest(call.arguments),
      state,
    });
    const foreignState =
      single !== undefined &&
      typeof single.requestState === 'string' &&
      !PaywallStates.isOurs(single.requestState)
        ? single.requestState
        : undefined;
    const binding =
      single === undefined || (foreignState === undefined && single.answersInput !== true)
        ? undefined
        : bindingOf(single, foreignState ?? null);
    const continuing =
      binding === undefined || rounds === undefined
        ? undefined
        : await rounds.take(binding).catch((error: unknown) => {
            logger.warn({ err: error }, 'multi-round hold unreadable: the retry is gated as a new call');
            return undefined;
          });

    // Gating and limits: refused calls are answered here and never reach the origin.
    const gating =
      calls.length > 0 && gatekeeper !== undefined && config.requireAuth && continuing === undefined
        ? desk.gate(
            gatekeeper,
            server,
            customerRef,
            calls,
            era.modern
              ? { ...era, urlElicitation: era.urlElicitation && !paywallRetry }
              : { modern: false, urlElicitation: urlElicitationSessions.has(sessionOf(request.headers)) },
          )
        : undefined;
    let gated = gating instanceof Promise ? await gating : gating;
    if (
      checkoutAccepted &&
      gatekeeper !== undefined &&
      gated !== undefined &&
      retry !== undefined &&
      gated.refusedIds.has(retry.id)
    ) {
      const admitted = await waitForPayment(
        gatekeeper,
        server,
        customerRef,
        retry.tool,
        config.paywallWaitMs,
        () => exchange.aborted || exchange.stopped,
      );
      if (admitted !== undefined) gated = admittedAfterPayment(retry, admitted);
    }
    // MCP 2025-11-25: a client that declared URL elicitation is asked inside the call (on an event
    // stream the proxy opens) rather than failed with -32042, so the call can wait for payment.
    const checkout = era.modern ? undefined : checkoutOf(gated?.answers[0]);
    if (
      checkout !== undefined &&
      gatekeeper !== undefined &&
      asksInCall(parsed, calls, request.headers, config)
    ) {
      request.ticket?.done();
      const at = { asks, desk, gatekeeper, exchange, server, customerRef, calls };
      gated = await askInCall(at, checkout, { waitMs: config.paywallWaitMs, started });
      if (gated === undefined) return;
    }
    const facts = gated?.facts ?? new Map<ToolCall, CallFacts>();
    if (continuing !== undefined && single !== undefined)
      facts.set(single, { admitted: continuing.admitted, credits: continuing.credits });
    const extra = gated?.answers ?? [];
    if (gated !== undefined && gated.answers.length > 0) {
      const rest = withoutCalls(parsed, gated.refusedIds);
      if (rest.length === 0) {
        // The paywall was recorded once, on the round that showed it; its retry, still
        // refused, ends that same call and adds no record.
        if (!paywallRetry)
          desk.meter(
            server,
            customerRef,
            calls,
            (call) => ({ outcome: facts.get(call)?.outcome ?? 'paywall', admitted: false, refused: true }),
            started,
          );
        const answer = Array.isArray(parsed) ? JSON.stringify(extra) : JSON.stringify(extra[0]);
        return respond(exchange, 200, 'application/json', answer);
      }
      body = Buffer.from(JSON.stringify(Array.isArray(parsed) ? rest : rest[0]));
    }
    /**
     * The answer's status and headers: the origin's, except for a merged batch, which is the
     * proxy's own JSON (200, with the origin's session id). Call inside cork.
     */
    const writeAnswerHead = () => {
      if (merger === undefined) return writeHead(exchange, status, upstreamHeaders);
      exchange.res.writeStatus(statusLine(200)).writeHeader('content-type', 'application/json');
      for (const [name, value] of Object.entries(sessionHeader(upstreamHeaders)))
        exchange.res.writeHeader(name, value);
      writeCors(exchange);
      exchange.headersSent = true;
    };
    const factsOf = (call: ToolCall, fallback: () => ToolOutcome) => {
      const known = facts.get(call);
      const outcome = known?.outcome ?? fallback();
      // A round that asked for input is not the call: its unit and credits go on the final round.
      const round = outcome === 'input_required';
      return {
        outcome,
        admitted: round ? false : (known?.admitted ?? false),
        refused: known?.refused,
        credits: round ? undefined : known?.credits,
        // The unit was spent in this request whatever the round: a crash settles its lease with it.
        charges: known?.charges,
      };
    };
    /**
     * The one forwarded modern call whose answer may ask for input: the hold for its retry is
     * kept before the answer's last bytes reach the client, so no retry can arrive before it.
     */
    const holdFor =
      rounds !== undefined && single !== undefined && facts.get(single)?.refused !== true
        ? single
        : undefined;
    let holdSettled = holdFor === undefined;
    let holding: Promise<void> | undefined;
    const keepHold = (call: ToolCall, state: string | null): Promise<void> => {
      const fact = facts.get(call);
      return (rounds as CallRounds)
        .open(bindingOf(call, state), {
          rounds: (continuing?.rounds ?? 0) + 1,
          admitted: fact?.admitted ?? false,
          ...(fact?.credits === undefined ? {} : { credits: fact.credits }),
        })
        .catch((error: unknown) =>
          logger.warn({ err: error }, 'multi-round hold not kept: the retry will be gated as a new call'),
        );
    };

    const headers = request.headers;
    // A session's end (DELETE) forgets what its client declared.
    if (request.method === 'DELETE') urlElicitationSessions.delete(sessionOf(headers));
    const auth = originKeys.of(server);
    if (auth !== null) headers[auth.header] = auth.value;
    const sent = performance.now();
    metrics.own.observe((sent - started) / 1000);
    let status = 0;
    let contentType = '';
    let upstreamHeaders: IncomingHttpHeaders = {};
    /** Reads the calls' outcomes from the answer as it passes (absent without calls, or when merged). */
    let scanner: AnswerScanner | undefined;
    // A batch with refused calls and a JSON answer: the answers are merged into one array.
    let mergeJson = false;
    let expectedLength = -1;
    let ended = false;
    let refusedCredentials = false;
    /** A batch with refused calls answered as JSON: their answers are spliced into the origin's. */
    let merger: BatchMerger | undefined;
    /**
     * The client went away (and the origin request was cancelled with it). Each call that
     * reached the origin may have run there and was counted against the limit, so it is
     * recorded: with the origin's outcome if its answer had arrived, else as a cancelled error.
     * One that left before a byte was written gave its unit back first (refused, never billed).
     */
    const meterCancelled = () => {
      scanner?.end();
      desk.meter(
        server,
        customerRef,
        calls,
        (call) => {
          // Calls refused here (a paywall in a batch) keep their outcome; they never left.
          const forwarded = facts.get(call)?.outcome === undefined;
          const answer = scanner?.answerTo(call);
          const answered = answer !== undefined;
          return {
            ...factsOf(call, () => (answered ? outcomeOf(status, answer) : 'error')),
            cancelled: forwarded && !answered,
          };
        },
        started,
      );
    };
    // A metered answer's last byte waits until the calls' records are in the spool, so a crash
    // can never leave a served call unrecorded (issue 32); the wait is the rest of this turn.
    const spooling = emitter !== undefined && calls.length > 0;
    /** The whole answer, when it came in one chunk and waits for the spool. */
    let whole: Buffer | undefined;
    /** A JSON answer to a call asked inside its own event stream: sent as one event at its end. */
    let wrapped: Buffer[] | undefined;
    /** Passes a piece of the answer on; false when the client is slow (the origin resumes when it drains). */
    const send = (out: Buffer): boolean => {
      if (out.length === 0) return true;
      if (wrapped !== undefined) return wrapped.push(out) > 0;
      // The whole answer in its first chunk (most JSON answers): one write, with a length.
      const complete = out.length === expectedLength && extra.length === 0;
      if (complete && spooling) {
        whole = out;
        return true;
      }
      let accepted = true;
      exchange.res.cork(() => {
        if (!exchange.headersSent) writeAnswerHead();
        if (complete) {
          exchange.res.end(out);
          ended = true;
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
    };
    try {
      const literalProblem = literalProblemOf(server.originUrl);
      if (literalProblem !== undefined) throw new UnsafeUrlError(literalProblem);
      const target = originTarget(server.originUrl, request.route.rest, request.query);
      // Only a request with an earlier one of its session still on its way waits (no await else).
      // A session's GET stream starts at once (nothing before it is needed for it), and a session's
      // first calls wait briefly for that stream when its client just said it is initialized.
      if (request.ticket?.turn !== undefined && !exchange.standalone)
        await awaitTurn(request.ticket, config.originConnectTimeoutMs);
      const streamReady = calls.length > 0 ? order.streamReady(request.ticket) : undefined;
      if (streamReady !== undefined) await streamReady;
      await (exchange.standalone ? streams : origins).request(
        target.origin,
        { method: request.method, path: target.path, headers, body: body.length > 0 ? body : null },
        {
          // A request has started at the origin once written; a standalone GET once answered.
          written:
            request.ticket === undefined || exchange.standalone
              ? undefined
              : () => order.written(request.ticket as Ticket, parsed),
          head(statusCode, h) {
            request.ticket?.done();
            if (exchange.standalone) order.streamOpened(request.ticket);
            status = statusCode;
            refusedCredentials = statusCode === 401 || statusCode === 407;
            upstreamHeaders = h;
            contentType = String(h['content-type'] ?? '');
            if (exchange.eventStream === true && !contentType.includes('text/event-stream')) wrapped = [];
            mergeJson = extra.length > 0 && !contentType.includes('text/event-stream');
            if (mergeJson) merger = new BatchMerger(extra);
            const length = h['content-length'];
            expectedLength = typeof length === 'string' ? Number(length) : -1;
            if (calls.length > 0)
              scanner = new AnswerScanner(mergeJson ? 'application/json' : contentType, calls);
            const session = h['mcp-session-id'];
            if (declaresElicitation && statusCode < 300 && typeof session === 'string')
              urlElicitationSessions.add(session);
            if (
              !mergeJson &&
              !refusedCredentials &&
              !exchange.aborted &&
              !exchange.headersSent &&
              contentType.includes('text/event-stream')
            ) {
              // An event stream may stay silent for long (a GET stream, a slow tool): its head goes
              // now. uWS sends the head's closing blank line only with a first body write, so that
              // write is an SSE comment line, which every SSE reader skips.
              exchange.res.cork(() => {
                writeHead(exchange, status, upstreamHeaders);
                exchange.res.write(SSE_OPENING);
              });
            }
          },
          data(chunk) {
            if (exchange.aborted || refusedCredentials) return true;
            scanner?.write(chunk);
            const out = merger === undefined ? chunk : merger.write(chunk);
            if (!holdSettled && holdFor !== undefined) {
              const answer = scanner?.answerSoFar(holdFor);
              if (answer !== undefined) {
                holdSettled = true;
                if (answer.inputRequired) {
                  // Paused until the hold is kept, then this chunk goes and the origin resumes.
                  holding = keepHold(holdFor, answer.requestState ?? null).then(() => {
                    if (!exchange.aborted && send(out)) exchange.origin?.resume();
                  });
                  return false;
                }
              }
            }
            return send(out);
          },
        },
        (control) => {
          exchange.origin = control;
          if (exchange.aborted) control.abort(new Error('client went away'));
          else if (exchange.stopped) control.abort(new Error('proxy stopping'));
        },
      );
      // The answer may have ended while its last chunk waited for a multi-round hold.
      if (holding !== undefined) await holding;
      if (exchange.aborted) return meterCancelled();
      if (refusedCredentials) throw new OriginCredentialsRefused(status);
      const answered = performance.now();
      metrics.origin.observe((answered - sent) / 1000);
      if (merger !== undefined) {
        // The merged array's closing bytes: the refused calls' answers and the bracket.
        const waiting = writeChunk(exchange, merger.end(), writeAnswerHead);
        if (waiting !== undefined) await waiting;
      }
      // Refused calls of a batch answered as a stream arrive as events after the origin's.
      else
        for (const answer of extra) {
          const waiting = writeChunk(
            exchange,
            Buffer.from(`event: message\ndata: ${JSON.stringify(answer)}\n\n`),
            writeAnswerHead,
          );
          if (waiting !== undefined) await waiting;
        }
      metrics.requests.incLabel('code', merger === undefined ? status : 200);
      scanner?.end();
      desk.meter(
        server,
        customerRef,
        calls,
        (call) => factsOf(call, () => outcomeOf(status, scanner?.answerTo(call))),
        started,
      );
      if (spooling) {
        const spooled = emitter.spooled();
        if (spooled !== undefined) await spooled;
      }
      if (!exchange.aborted && !ended) {
        exchange.res.cork(() => {
          if (!exchange.headersSent) writeAnswerHead();
          if (wrapped !== undefined) exchange.res.end(sseEvent(Buffer.concat(wrapped)));
          else if (whole === undefined) exchange.res.end();
          else exchange.res.end(whole);
        });
      }
      metrics.answer.observe((performance.now() - answered) / 1000);
    } catch (error) {
      // A call the origin never read did not run, whoever ended it: its unit and credits go back.
      if (originNeverRead(error))
        await desk.unspend(gatekeeper, calls, facts).catch((failed: unknown) => {
          logger.warn({ err: failed, server: server.serverId }, 'units of unread calls not given back');
        });
      if (exchange.aborted) return meterCancelled();
      if (exchange.stopped) {
        // Cancelled by the stop: recorded like a client leaving; the client is told to retry.
        meterCancelled();
        if (exchange.headersSent) return exchange.res.cork(() => exchange.res.end());
        return refuse(exchange, 'proxy_stopping', singleId);
      }
      logger.warn({ err: error, server: server.serverId }, 'origin request failed');
      desk.meter(server, customerRef, calls, (call) => factsOf(call, () => 'upstream_error'), started);
      if (exchange.headersSent && exchange.eventStream !== true)
        return exchange.res.cork(() => exchange.res.end());
      refuse(exchange, originFailure(error), singleId);
    }
  }

  const metricsAuthorization =
    config.metricsToken === undefined ? undefined : `Bearer ${config.metricsToken}`;
  const renderMetrics = () =>
    metrics.render({ gatekeeper, limiter: deps.limiter, directory, link, emitter, inflight: live.size });
  const app = uWS.App().any('/*', (res, req) => {
    const url = req.getUrl();
    const method = req.getCaseSensitiveMethod();
    const exchange: Exchange = {
      res,
      aborted: false,
      headersSent: false,
      origin: undefined,
      wakeWriter: undefined,
      requests: metrics.requests,
      standalone: method === 'GET',
      stopped: false,
      cors: undefined,
      slot: -1,
    };
    // A browser's page (an Origin header); served only from origins its MCP server allows.
    const pageOrigin = req.getHeader('origin');
    /** Set once the request is routed; given up when it ends, is refused or its client leaves. */
    let ticket: Ticket | undefined;
    res.onAborted(() => {
      ticket?.done();
      exchange.aborted = true;
      exchange.origin?.abort(new Error('client went away'));
      exchange.wakeWriter?.();
    });
    if (url === '/healthz') {
      if (stopping) return respond(exchange, 503, 'application/json', '{"status":"stopping"}');
      return respond(exchange, 200, 'application/json', '{"status":"ok"}');
    }
    if (url === '/metrics')
      return serveMetrics(exchange, req.getHeader('authorization'), metricsAuthorization, renderMetrics);
    // Before anything is read or routed: the target is sent on only as the bytes it arrived as.
    const query = req.getQuery();
    if (!targetSendable(url, query)) return refuse(exchange, 'invalid_request_target');
    const headers = forwardableHeaders(req);
    if (typeof headers === 'string') return refuse(exchange, headers);

    const host = req.getHeader('host');
    const metadataRoute = metadataRouteOf(url, host, config.baseDomain);
    // A CORS preflight carries no credentials: answered here, never sent on or refused for want
    // of a token. Public documents are for any page; an MCP server only for the origins it allows.
    if (method === 'OPTIONS') {
      const asked = req.getHeader('access-control-request-headers');
      if (pageOrigin === '') return answerPreflight(exchange, asked);
      if (metadataRoute !== undefined) {
        exchange.cors = '*';
        return answerPreflight(exchange, asked);
      }
      const target = routeOf(url, host, config.baseDomain);
      if (target === undefined || target === 'unsafe_path')
        return refuse(exchange, 'browser_origin_not_allowed');
      void originAllowed(target.subdomain, pageOrigin).then(
        (allowed) => {
          if (!allowed) return refuse(exchange, 'browser_origin_not_allowed');
          exchange.cors = pageOrigin;
          answerPreflight(exchange, asked);
        },
        (error: unknown) => {
          logger.warn({ err: error, subdomain: target.subdomain }, 'snapshot store unavailable');
          refuse(exchange, 'proxy_unavailable');
        },
      );
      return;
    }
    if (metadataRoute !== undefined) {
      if (metadataRoute === 'none' || (method !== 'GET' && method !== 'HEAD'))
        return refuse(exchange, 'route_not_found', null, { message: `No route for ${url}` });
      const resource = resourceUrlOf(metadataRoute.route, host, config.publicScheme, metadataRoute.pathForm);
      void serveResourceMetadata(exchange, resource, verifier);
      return;
    }
    const route = routeOf(url, host, config.baseDomain);
    if (route === undefined)
      return refuse(exchange, 'route_not_found', null, { message: `No route for ${url}` });
    // The origin path is the registered one: nothing may climb out of it, encoded or not.
    if (route === 'unsafe_path') return refuse(exchange, 'path_not_allowed');
    // Headers the client named in Connection are for this hop only (RFC 9110 §7.6.1).
    const connection = req.getHeader('connection');
    if (connection !== '') for (const name of hopHeadersIn(connection)) delete headers[name];
    const authorization = req.getHeader('authorization');
    const arrived = performance.now();
    const declaredLength = Number(headers['content-length'] ?? req.getHeader('content-length') ?? 0);
    // Said before the body is read, so no request id is known.
    if (declaredLength > config.maxBodyBytes) return refuse(exchange, 'payload_too_large');
    // A request on a kept-alive connection after the stop began: sent elsewhere, not started.
    if (stopping) return refuse(exchange, 'proxy_stopping', null, { headers: { connection: 'close' } });
    // Its place among its session's requests, taken in the order they arrive.
    ticket = order.enter(sessionOf(headers));
    // An origin that holds a GET's head until its first event holds the session back no longer.
    if (method === 'GET') ticket?.expireAfter(STANDALONE_HEAD_WAIT_MS);
    live.add(exchange);
    const run = (body: Buffer, reading: BodyReading) => {
      const parsed = reading.ok ? reading.parsed : undefined;
      return forward(exchange, {
        method,
        route,
        query: query ?? '',
        headers,
        body,
        reading,
        authorization,
        host,
        pathForm: url.startsWith('/mcp/'),
        arrived,
        pageOrigin,
        ticket,
      })
        .catch((error: unknown) => {
          const id = idOf(parsed);
          if (error instanceof SnapshotUnavailableError) {
            // Redis is away and this server, or the token's signing key, is not cached here yet.
            logger.warn({ err: error, subdomain: route.subdomain }, 'snapshot store unavailable');
            return refuse(exchange, 'proxy_unavailable', id);
          }
          logger.error({ err: error }, 'proxy request failed');
          refuse(exchange, 'internal_error', id);
        })
        .finally(() => {
          ticket?.done();
          live.delete(exchange);
        });
    };

    if (method === 'GET' || method === 'HEAD' || method === 'DELETE') {
      // No body is read or forwarded for these, so none can carry a call.
      void run(EMPTY, NO_BODY);
      return;
    }
    if (method !== 'POST') {
      ticket?.done();
      live.delete(exchange);
      return refuse(exchange, 'method_not_allowed', null, {
        message: `MCP takes POST, GET and DELETE, not ${method}`,
      });
    }
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (size > config.maxBodyBytes) return;
      size += chunk.byteLength;
      if (size > config.maxBodyBytes) {
        ticket?.done();
        live.delete(exchange);
        return refuse(exchange, 'payload_too_large');
      }
      // uWS reuses the chunk's memory after this callback returns: copy it (once, for a body
      // that came in one chunk, as most do).
      const copy = Buffer.from(new Uint8Array(chunk));
      if (isLast) {
        const body = chunks.length === 0 ? copy : Buffer.concat([...chunks, copy]);
        void run(body, readJsonBody(body, headers['content-type'], headers['content-encoding']));
      } else chunks.push(copy);
    });
  });

  const socket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (listenSocket) => {
      if (listenSocket === false)
        reject(new Error(`proxy could not listen on ${config.host}:${config.port}`));
      else resolve(listenSocket);
    });
  });
  const port = uWS.us_socket_local_port(socket as unknown as uWS.us_socket);

  return {
    port,
    url: `http://${config.host}:${port}`,
    async close() {
      stopping = true;
      uWS.us_listen_socket_close(socket);
      // Standalone streams never end by themselves: ended now, their clients reconnect elsewhere.
      for (const exchange of live.list()) if (exchange.standalone) stop(exchange);
      // Calls in flight finish (and are metered) before the process moves on; bounded in time,
      // after which what is left is cancelled (and metered as cancelled).
      const deadline = Date.now() + 10_000;
      while (live.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      for (const exchange of live.list()) stop(exchange);
      const grace = Date.now() + 2_000;
      while (live.size > 0 && Date.now() < grace) await new Promise((resolve) => setTimeout(resolve, 20));
      // Still here: a client that never finished sending its body. Its connection is closed.
      for (const exchange of live.list()) {
        if (exchange.aborted) continue;
        try {
          exchange.res.close();
        } catch {
          // already answered
        }
      }
      await Promise.all([origins.close(), streams.close()]);
      metrics.close();
    },
  };
}
