import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, rootCertificates as tlsRootCertificates } from 'node:tls';
import { Connection, type ConnectionOwner } from './connection';
import { OriginError } from './errors';
import type { OriginClientOptions } from './types';

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

/** What a request waiting for a connection is handed: one, or why it gets none. */
type Use = (connection: Connection | Error) => void;

/**
 * The connections to one origin. Past `maxConnections` requests wait in arrival order for one
 * to free, at most `maxPending` of them and for at most `queueTimeoutMs` each: a request past
 * either is handed an `origin_busy` error, which its caller treats as unread (nothing of it was
 * written, so its calls did not run).
 */
export class OriginPool implements ConnectionOwner {
  private readonly idleConnections: Connection[] = [];
  /** Requests waiting for a connection, oldest first, each with its queue timer. */
  private readonly waiting = new Map<Use, NodeJS.Timeout>();
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

  acquire(use: Use): void {
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
    if (this.open < this.options.maxConnections) {
      this.dial(use);
      return;
    }
    if (this.waiting.size >= this.options.maxPending) {
      use(new OriginError('origin_busy', 'every connection to the origin is busy and its queue is full'));
      return;
    }
    const timer = setTimeout(() => {
      this.waiting.delete(use);
      use(new OriginError('origin_busy', 'no connection to the origin freed in time'));
    }, this.options.queueTimeoutMs);
    this.waiting.set(use, timer);
  }

  /** The request that has waited longest for a connection, taken off the queue. */
  private nextWaiting(): Use | undefined {
    for (const [use, timer] of this.waiting) {
      clearTimeout(timer);
      this.waiting.delete(use);
      return use;
    }
    return undefined;
  }

  /**
   * A new connection for a request a stale one never delivered (it had taken this one's place
   * in the pool, so the dial stays within the limit).
   */
  redial(use: Use): void {
    this.dial(use);
  }

  /** Takes a waiting request off the queue (its client went away before a connection freed). */
  cancel(use: Use): void {
    clearTimeout(this.waiting.get(use));
    this.waiting.delete(use);
  }

  private dial(use: Use): void {
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
    const next = this.nextWaiting();
    if (next !== undefined) this.dial(next);
  }

  release(connection: Connection): void {
    const next = this.nextWaiting();
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
    for (let use = this.nextWaiting(); use !== undefined; use = this.nextWaiting())
      use(new OriginError('origin_closed', 'the proxy is stopping'));
    for (const connection of this.idleConnections.splice(0)) connection.destroy();
  }
}
