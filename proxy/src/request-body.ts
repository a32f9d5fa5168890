import { isUtf8 } from 'node:buffer';
import { compileKeyRules, inspectJson, type JsonShapeProblem } from '@mcp-meter/contracts/kit';

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
  | 'tool_call_id_repeated'
  | 'too_deep'
  | 'duplicate_key'
  | 'ambiguous_key'
  | 'unpaired_surrogate';

/** The deepest nesting of arrays and objects a body may have (docs/proxy.md). */
export const MAX_JSON_DEPTH = 64;

/** An elicitation's capabilities (`{form, url}`): the paywall's form depends on `url`. */
const ELICITATION = { members: { url: true, form: true } } as const;
const CAPABILITIES = { members: { elicitation: ELICITATION } } as const;
/**
 * Every member the proxy reads of a JSON-RPC message, where it reads it: the envelope, a
 * request's params (a tool call's name, arguments, retry state and input answers; initialize's
 * version and capabilities; the `Mcp-Name` mirror's uri), `_meta` (the modern era's version and
 * capabilities) and the paywall's input answer. In these objects a key given twice, or one that
 * folds to a member without being it (`METHOD`, `Name`, `paramſ`), is refused: `JSON.parse`, Go,
 * Python and the SDKs would not all read the same message from it.
 */
const MESSAGE_RULES = (() => {
  const params = {
    members: {
      name: true,
      arguments: true,
      uri: true,
      requestState: true,
      inputResponses: { members: { checkout: { members: { action: true, content: true } } } },
      protocolVersion: true,
      capabilities: CAPABILITIES,
      _meta: {
        members: {
          'io.modelcontextprotocol/protocolVersion': true,
          'io.modelcontextprotocol/clientCapabilities': CAPABILITIES,
          progressToken: true,
        },
      },
    },
  } as const;
  const envelope = {
    members: { jsonrpc: true, id: true, method: true, params, result: true, error: true },
  } as const;
  return compileKeyRules({ ...envelope, items: envelope });
})();

const SHAPE_MESSAGES: Record<JsonShapeProblem['code'], (problem: JsonShapeProblem) => string> = {
  too_deep: () => `Invalid Request: the body nests deeper than ${MAX_JSON_DEPTH} levels`,
  duplicate_key: (p) =>
    `Invalid Request: the key ${JSON.stringify('key' in p ? p.key.slice(0, 100) : '')} appears twice in one object`,
  ambiguous_key: (p) =>
    `Invalid Request: the key ${JSON.stringify('key' in p ? p.key.slice(0, 100) : '')} differs from "${'member' in p ? p.member : ''}" only in case; send "${'member' in p ? p.member : ''}"`,
  unpaired_surrogate: () => 'Invalid Request: a string holds an unpaired UTF-16 surrogate escape',
};

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
  const shape = inspectJson(body, MAX_JSON_DEPTH, MESSAGE_RULES);
  if (shape !== undefined) return refuse(shape.code, SHAPE_MESSAGES[shape.code](shape), INVALID_REQUEST);
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
