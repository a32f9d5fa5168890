import { OriginError } from './errors';
import { TOKEN } from './request';

/** Reading an answer's head: its header names, and the shapes its values must have. */

export const CONTENT_LENGTH = /^\d{1,15}$/;
export const BARE_LINE_END = /\r(?!\n)|(?<!\r)\n/;

/** Header names as origins spell them, lower-cased and checked once (bounded: origins repeat theirs). */
const headerNames = new Map<string, string>();

/** An answer's header name, lower-cased; throws when it is not an HTTP token. */
export function headerName(raw: string): string {
  const known = headerNames.get(raw);
  if (known !== undefined) return known;
  const name = raw.toLowerCase();
  if (!TOKEN.test(name))
    throw new OriginError('origin_protocol_error', 'the answer has a malformed header name');
  if (headerNames.size < 512) headerNames.set(raw, name);
  return name;
}
