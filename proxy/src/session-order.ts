/**
 * The order in which a session's requests start at the origin: each is written to its origin
 * connection only after the one the proxy received before it, of the same session, has started
 * there or has ended (refused, failed, cancelled). A request has started once it is written; a
 * standalone GET once the origin answered its head, since that is when an origin has the stream
 * (the SDKs register it as they send the head): written alone, it can still be read after a
 * tool call written a moment later on a warm connection. Without this the GET, which dials a
 * connection of its own, is overtaken by the tool call the client sent after it, and an origin
 * that sends elicitation or sampling on that stream from inside the tool (as the MCP SDK v1
 * reference server does) drops them for want of a stream (issue 58).
 */
/**
 * How long after a session's `notifications/initialized` its calls wait for its GET stream. The
 * MCP SDKs open that stream as soon as the notification is answered, while the application's
 * first call leaves at the same moment: the two race to the origin, and a server that elicits on
 * the stream from inside the tool needs the stream first. Direct, the origin tends to win that
 * race for the stream (the GET has no body to read); through the proxy it lost about one run of
 * the conformance suite in two (issue 58). Sessions whose client opens no stream pay this once,
 * on a call sent within this long of initializing.
 */
export const STREAM_GRACE_MS = 100;

export class SessionOrder {
  /** The latest ticket of each session with a request not yet written. */
  private readonly latest = new Map<string, Ticket>();
  /** Sessions just initialized whose GET stream is not open yet: settles when it is, or after the grace. */
  private readonly opening = new Map<string, { ready: Promise<void>; open: () => void }>();

  /** `ticket`'s request was written; a session's `notifications/initialized` starts its grace. */
  written(ticket: Ticket, message: unknown): void {
    ticket.done();
    const method = (message as { method?: unknown } | null)?.method;
    if (method !== 'notifications/initialized' || this.opening.has(ticket.session)) return;
    if (this.opening.size >= 10_000) return; // bounded: past it, calls do not wait
    let open: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => {
      open = resolve;
    });
    const entry = { ready, open };
    this.opening.set(ticket.session, entry);
    setTimeout(() => this.streamOpened(ticket, entry), STREAM_GRACE_MS).unref();
  }

  /** The session's GET stream has its head at the origin (or its grace is over): calls go on. */
  streamOpened(ticket: Ticket | undefined, entry = ticket && this.opening.get(ticket.session)): void {
    if (ticket === undefined || entry === undefined) return;
    if (this.opening.get(ticket.session) === entry) this.opening.delete(ticket.session);
    entry.open();
  }

  /** What a call of `ticket`'s session waits for before it is sent: undefined, nearly always. */
  streamReady(ticket: Ticket | undefined): Promise<void> | undefined {
    return ticket === undefined || this.opening.size === 0
      ? undefined
      : this.opening.get(ticket.session)?.ready;
  }

  /** A place in `session`'s order, taken when a request arrives; undefined without a session. */
  enter(session: string): Ticket | undefined {
    if (session === '') return undefined;
    const prior = this.latest.get(session);
    const ticket = new Ticket(this, session, prior?.pending);
    this.latest.set(session, ticket);
    return ticket;
  }

  /** Sessions with a request waiting to be written (for tests and metrics). */
  get size(): number {
    return this.latest.size;
  }

  /** `ticket` is written: it stops being the one the next request of its session waits for. */
  leave(ticket: Ticket): void {
    if (this.latest.get(ticket.session) === ticket) this.latest.delete(ticket.session);
  }
}

export class Ticket {
  /** Settles when this request is written or ends; undefined once it has. */
  pending: Promise<void> | undefined;
  private settle: (() => void) | undefined;

  constructor(
    private readonly order: SessionOrder,
    readonly session: string,
    /** The request before this one, while it is not written yet. */
    readonly turn: Promise<void> | undefined,
  ) {
    this.pending = new Promise<void>((resolve) => {
      this.settle = resolve;
    });
  }

  /** Gives the next request its turn after `ms` at the latest, whatever becomes of this one. */
  expireAfter(ms: number): void {
    if (this.settle === undefined) return;
    setTimeout(() => this.done(), ms).unref();
  }

  /** This request was written to the origin, or will never be: the next one may go. */
  done(): void {
    const settle = this.settle;
    if (settle === undefined) return;
    this.settle = undefined;
    this.pending = undefined;
    this.order.leave(this);
    settle();
  }
}

/**
 * Waits for `ticket`'s turn, at most `boundMs`: a request before it that hangs before it is
 * written (a connection that never comes) holds its session back no longer than that.
 */
export async function awaitTurn(ticket: Ticket | undefined, boundMs: number): Promise<void> {
  const turn = ticket?.turn;
  if (turn === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([turn, new Promise<void>((resolve) => (timer = setTimeout(resolve, boundMs)))]);
  clearTimeout(timer);
}
