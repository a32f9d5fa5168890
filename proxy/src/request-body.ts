import { isUtf8 } from 'node:buffer';

/**
 * What the proxy read of a request body. The proxy forwards only bodies it has read whole as
 * plain UTF-8 JSON: anything else (compressed, another charset, a byte-order mark, bytes that are
 * not UTF-8 or not JSON) could carry a tools/call the origin decodes and the proxy never saw, so
 * it is refused before the origin sees it rather than passed on as "no tool calls".
 */
export type BodyReading =
  | { ok: true; parsed: unknown }
  | { ok: false; code: BodyProblem; message: string; jsonRpcCode: number };

export type BodyProblem =
  | 'body_encoded'
  | 'body_not_json_content_type'
  | 'body_charset_unsupported'
  | 'body_byte_order_mark'
  | 'body_not_utf8'
  | 'body_not_json'
  | 'body_not_jsonrpc'
  | 'tool_call_without_id'
  | 'tool_call_id_repeated';

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;

const refuse = (code: BodyProblem, message: string, jsonRpcCode = PARSE_ERROR): BodyReading => ({
  ok: false,
  code,
  message,
  jsonRpcCode,
});

/** `application/json` or `application/<x>+json`, with no charset or a UTF-8 one. */
function contentTypeProblem(contentType: string): BodyReading | undefined {
  // What nearly every client sends: nothing to take apart.
  if (contentType === 'application/json') return undefined;
  const [mediaType = '', ...params] = contentType.split(';');
  const media = mediaType.trim().toLowerCase();
  if (media !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(media)) {
    return refuse(
      'body_not_json_content_type',
      `Parse error: the body must be sent as application/json, not "${media.slice(0, 100)}"`,
    );
  }
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    const charset = param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
    if (charset !== 'utf-8' && charset !== 'utf8') {
      return refuse(
        'body_charset_unsupported',
        `Parse error: the body must be UTF-8, not "${charset.slice(0, 100)}"`,
      );
    }
  }
  return undefined;
}

/**
 * Reads a POST body as the origin will receive it: identity-encoded UTF-8 JSON without a
 * byte-order mark, whose top level is a JSON-RPC message (an object) or a batch (an array).
 */
export function readJsonBody(
  body: Buffer,
  contentType: string | undefined,
  contentEncoding: string | undefined,
): BodyReading {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding !== '' && encoding !== 'identity') {
    return refuse(
      'body_encoded',
      `Parse error: encoded bodies (Content-Encoding: ${encoding.slice(0, 100)}) are not accepted; send plain JSON`,
    );
  }
  const typeProblem = contentTypeProblem(contentType ?? '');
  if (typeProblem !== undefined) return typeProblem;
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    return refuse(
      'body_byte_order_mark',
      'Parse error: the body starts with a byte-order mark; send it without',
    );
  }
  if (!isUtf8(body)) return refuse('body_not_utf8', 'Parse error: the body is not valid UTF-8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return refuse('body_not_json', 'Parse error: the body is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object') {
    return refuse(
      'body_not_jsonrpc',
      'Invalid Request: the body must be a JSON-RPC message or a batch of them',
      INVALID_REQUEST,
    );
  }
  return callsProblem(parsed) ?? { ok: true, parsed };
}

/**
 * A tools/call the proxy could not gate as one call: without a usable id it cannot be answered or
 * told apart (an origin may still run it), and two calls of one batch under the same id cannot be
 * refused one without the other.
 */
function callsProblem(parsed: object): BodyReading | undefined {
  const messages: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
  let ids: Set<string | number> | undefined;
  for (const message of messages) {
    if (message === null || typeof message !== 'object') continue;
    const { method, id } = message as { method?: unknown; id?: unknown };
    if (method !== 'tools/call') continue;
    if (typeof id !== 'string' && typeof id !== 'number') {
      return refuse(
        'tool_call_without_id',
        'Invalid Request: a tools/call must carry a string or number id',
        INVALID_REQUEST,
      );
    }
    if (messages.length === 1) break;
    ids ??= new Set();
    if (ids.has(id)) {
      return refuse(
        'tool_call_id_repeated',
        `Invalid Request: two tools/call requests in one batch share the id ${JSON.stringify(id).slice(0, 100)}`,
        INVALID_REQUEST,
      );
    }
    ids.add(id);
  }
  return undefined;
}
