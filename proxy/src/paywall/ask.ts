import { randomBytes } from 'node:crypto';
import type { McpServerSnapshot } from '@mcp-meter/contracts/snapshots';
import type { Gated, ToolCall } from '../calls';
import type { Gatekeeper } from '../gatekeeper';
import { type Exchange, respond, sseEvent, statusLine, writeCors } from '../http-io';
import { admittedAfterPayment, waitForPayment } from './wait';

/** The ids of the proxy's own requests to clients: a response with one is the proxy's, never the origin's. */
export const ASK_PREFIX = 'mcpm-paywall-';

/** What the customer did with the checkout: `none` when no answer came in time or the client left. */
export type AskAnswer = 'accept' | 'decline' | 'cancel' | 'none';

/** The checkout as a URL-mode elicitation (MCP 2025-11-25), as the -32042 paywall carries it. */
export interface CheckoutElicitation {
  elicitationId: string;
  url: string;
  message: string;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** How often a waiting ask looks whether its client has left. */
const LOOK_MS = 1_000;

/**
 * The paywall asked inside the call (MCP 2025-11-25, a client that declared URL elicitation):
 * instead of failing the call with -32042, which ends it, the proxy answers the call's POST
 * with an event stream and sends the client an `elicitation/create` request in URL mode on it
 * (related to the call, as the spec has servers do), as the origin would. The client answers
 * with a POST of its own, which the proxy takes here and never forwards; on an accept the call
 * waits for the payment (wait.ts) and then runs, its answer sent on the same stream.
 * The answer has to come back to this process (stateful MCP deployments route a session's
 * requests to one place); one that reaches another proxy is still consumed there, and the call
 * here ends when its wait does, with the readable paywall.
 */
export class PaywallAsks {
  private readonly waiting = new Map<string, { customer: string; settle: (answer: AskAnswer) => void }>();

  /** Asks in a stream it opens on `exchange`; settles with the answer, or `none` after `waitMs`. */
  ask(
    exchange: Exchange,
    customer: string,
    elicitation: CheckoutElicitation,
    waitMs: number,
  ): Promise<AskAnswer> {
    const id = `${ASK_PREFIX}${randomBytes(16).toString('base64url')}`;
    const request = {
      jsonrpc: '2.0',
      id,
      method: 'elicitation/create',
      params: { mode: 'url', ...elicitation },
    };
    exchange.res.cork(() => {
      exchange.res
        .writeStatus(statusLine(200))
        .writeHeader('content-type', 'text/event-stream')
        .writeHeader('cache-control', 'no-cache');
      writeCors(exchange);
      exchange.headersSent = true;
      exchange.eventStream = true;
      exchange.res.write(sseEvent(JSON.stringify(request)));
    });
    return new Promise<AskAnswer>((resolve) => {
      const deadline = performance.now() + waitMs;
      let timer: NodeJS.Timeout | undefined;
      const settle = (answer: AskAnswer) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve(answer);
      };
      const look = () => {
        const left = deadline - performance.now();
        if (left <= 0 || exchange.aborted || exchange.stopped) return settle('none');
        timer = setTimeout(look, Math.min(left, LOOK_MS));
      };
      this.waiting.set(id, { customer, settle });
      look();
    });
  }

  /**
   * A client's JSON-RPC response to one of the proxy's asks: taken (true), whether or not this
   * process is the one waiting for it, so the origin never sees an id it did not issue. Only the
   * customer asked can answer.
   */
  take(message: unknown, customer: string): boolean {
    if (!isObject(message) || typeof message.id !== 'string' || !message.id.startsWith(ASK_PREFIX))
      return false;
    if ('method' in message) return false;
    const asked = this.waiting.get(message.id);
    if (asked === undefined || asked.customer !== customer) return true;
    const action = isObject(message.result) ? message.result.action : undefined;
    asked.settle(action === 'accept' || action === 'decline' || action === 'cancel' ? action : 'decline');
    return true;
  }

  /** Asks waiting for an answer (metrics and tests). */
  get size(): number {
    return this.waiting.size;
  }
}

/** The checkout elicitation a -32042 paywall answer carries, if `answer` is one. */
export function checkoutOf(answer: Record<string, unknown> | undefined): CheckoutElicitation | undefined {
  const error = answer?.error;
  if (!isObject(error) || error.code !== -32042 || !isObject(error.data)) return undefined;
  const first = Array.isArray(error.data.elicitations) ? error.data.elicitations[0] : undefined;
  if (!isObject(first)) return undefined;
  const { elicitationId, url, message } = first;
  if (typeof elicitationId !== 'string' || typeof url !== 'string' || typeof message !== 'string')
    return undefined;
  return { elicitationId, url, message: typeof error.message === 'string' ? error.message : message };
}

/**
 * Whether a refused call may be asked inside its own answer: one call alone (not a batch), a
 * client that takes an event stream, and a wait configured.
 */
export function asksInCall(
  parsed: unknown,
  calls: readonly ToolCall[],
  headers: Record<string, string>,
  config: { paywallWaitMs: number },
): boolean {
  return (
    config.paywallWaitMs > 0 &&
    calls.length === 1 &&
    !Array.isArray(parsed) &&
    (headers.accept ?? '').includes('text/event-stream')
  );
}

/**
 * A refused call asked inside its own answer: the paywall is recorded once, now (the call met
 * it); the client is asked; an accept waits for the payment. The call's gating once paid for
 * (forwarded on the stream now open), or undefined when it was answered here: the readable
 * paywall (declined, not paid in time, no answer) or nothing (the client left).
 */
export async function askInCall(
  at: {
    asks: PaywallAsks;
    gatekeeper: Gatekeeper;
    exchange: Exchange;
    server: McpServerSnapshot;
    customerRef: string;
    call: ToolCall;
    /** Records that the call met the paywall. */
    recordPaywall: () => void;
    /** The call decided once more, its paywall the readable one. */
    decideReadable: () => Gated | Promise<Gated>;
  },
  checkout: CheckoutElicitation,
  waitMs: number,
): Promise<Gated | undefined> {
  const { gatekeeper, exchange, server, customerRef, call } = at;
  at.recordPaywall();
  const deadline = performance.now() + waitMs;
  const answer = await at.asks.ask(exchange, customerRef, checkout, waitMs);
  const gone = () => exchange.aborted || exchange.stopped;
  const paid =
    answer === 'accept'
      ? await waitForPayment(gatekeeper, server, customerRef, call.tool, deadline - performance.now(), gone)
      : undefined;
  // Paid for, its unit spent, as the client left: it goes on to be forwarded, which finds the
  // client gone before writing a byte and gives the unit back (an unread call costs nothing).
  if (paid === undefined && gone()) return undefined;
  // Not paid in time, or turned down: decided once more, the paywall now the readable one.
  const last = paid === undefined ? await at.decideReadable() : admittedAfterPayment(call, paid);
  const readable = last.answers[0];
  if (readable === undefined) return last;
  respond(exchange, 200, 'text/event-stream', JSON.stringify(readable));
  return undefined;
}
