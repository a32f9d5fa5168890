import type { HttpRequest } from 'uWebSockets.js';
import { REQUEST_SKIP } from './http-io';
import type { ProxyErrorCode } from './refusals';

/**
 * What a request's line and head must be before the proxy reads further, so that the bytes it
 * writes to an origin are the bytes it judged. uWebSockets.js hands the target and header values
 * over as strings decoded from UTF-8 (a value that is not UTF-8 arrives empty): a character past
 * U+00FF cannot be written back as the byte it came from, and written as Latin-1 it would become
 * another byte (U+010D U+010A is `\r\n`). So the target is visible ASCII, and stays free of
 * controls once percent-decoded; header values are visible ASCII, space and tab; names are tokens.
 */

/** Visible ASCII only: no space, no control, nothing past U+007E. */
const UNSENDABLE = /[^\x21-\x7e]/;
/** A percent-encoded control character (C0 or DEL), which an origin's decoding would bring back. */
const ENCODED_CONTROL = /%(?:[01][0-9a-f]|7f)/i;
const UNSAFE_VALUE = /[^\t\x20-\x7e]/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/**
 * Headers the proxy reads, or that frame or route the request: given twice, one reader could take
 * the first and another the last, so a request that repeats one is refused.
 */
const SINGLE = new Set([
  'host',
  'authorization',
  'content-length',
  'transfer-encoding',
  'content-type',
  'content-encoding',
  'origin',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
  'last-event-id',
]);

/** Whether the request target (path and query, as uWebSockets.js decoded them) may be sent on. */
export function targetSendable(path: string, query: string | undefined): boolean {
  if (UNSENDABLE.test(path) || ENCODED_CONTROL.test(path)) return false;
  return query === undefined || (!UNSENDABLE.test(query) && !ENCODED_CONTROL.test(query));
}

/**
 * The request's headers to forward (hop-by-hop and the proxy's own left out; a header sent more
 * than once joined as HTTP joins a list, cookies with `; `), or why the head is refused.
 */
export function forwardableHeaders(req: HttpRequest): Record<string, string> | ProxyErrorCode {
  const headers: Record<string, string> = {};
  let seen: Set<string> | undefined;
  let problem: ProxyErrorCode | undefined;
  req.forEach((name, value) => {
    if (problem !== undefined) return;
    // `__proto__` would set the object's prototype, not a header (uWebSockets.js drops it anyway).
    if (!TOKEN.test(name) || UNSAFE_VALUE.test(value) || name === '__proto__') {
      problem = 'invalid_header';
      return;
    }
    if (SINGLE.has(name)) {
      seen ??= new Set();
      if (seen.has(name)) {
        problem = 'duplicate_header';
        return;
      }
      seen.add(name);
    }
    if (REQUEST_SKIP.has(name)) return;
    const earlier = headers[name];
    headers[name] = earlier === undefined ? value : `${earlier}${name === 'cookie' ? '; ' : ', '}${value}`;
  });
  return problem ?? headers;
}
