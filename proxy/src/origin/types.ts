import type { IncomingHttpHeaders } from 'node:http';
import type { LookupFunction } from 'node:net';

/** What the proxy's origin client sends, receives and is told: shared by its parts. */

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
  /** Requests that may wait for a connection; past it one is refused at once (`origin_busy`). */
  maxPending: number;
  /** How long a request waits for a connection before it is refused (`origin_busy`). */
  queueTimeoutMs: number;
  /** Resolves the origin's name (the SSRF guard checks the address here, at the dial). */
  lookup: LookupFunction;
  /** Certificates to trust for https origins besides the system's (tests). */
  ca?: string | undefined;
}

export interface Exchange {
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
