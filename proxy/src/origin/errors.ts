/** How a request to an origin failed, and whether the origin never read it. */

export type OriginErrorCode =
  | 'origin_connect_timeout'
  | 'origin_headers_timeout'
  | 'origin_body_timeout'
  | 'origin_protocol_error'
  | 'origin_closed'
  /** Every connection to the origin busy and its queue full, or no connection freed in time. */
  | 'origin_busy';

export class OriginError extends Error {
  constructor(
    readonly code: OriginErrorCode,
    message: string,
  ) {
    super(message);
  }
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

export function unread(error: Error): Error {
  unreadErrors.add(error);
  return error;
}
