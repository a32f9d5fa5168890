import { OriginError } from './errors';
import type { OriginRequest } from './types';

/** The request line and head as the origin client writes them, checked byte by byte. */

export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
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

/** The request's head and body as one buffer; throws on a header that cannot be sent. */
export function encodeRequest(request: OriginRequest, host: string): Buffer {
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
