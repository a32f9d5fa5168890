import { HEADER_MISMATCH } from './era';
import { CORS_METHODS, type Exchange, respond } from './http-io';
import { jsonRpcError } from './jsonrpc';

/**
 * How a refusal reaches the client:
 * - `http`: the HTTP status with `{code, detail}`;
 * - `rpc`: the HTTP status with a JSON-RPC error (`data.code`), for refusals MCP clients must read
 *   as such (a challenge, a body they sent);
 * - `call`: for a request with an id, HTTP 200 and a JSON-RPC error (an MCP client sees a failed
 *   call, not a broken transport); without one, as `http`.
 */
type Form = 'http' | 'rpc' | 'call';

interface ProxyError {
  status: number;
  form: Form;
  /** The JSON-RPC error code (rpc and call forms). */
  rpc: number;
  message: string;
  headers?: Record<string, string>;
}

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const INTERNAL = -32603;
const SERVER_ERROR = -32000;
const body = (rpc: number): ProxyError => ({
  status: 400,
  form: 'rpc',
  rpc,
  message: 'The body cannot be read',
});

/** Every refusal the proxy answers itself: code, HTTP status, JSON-RPC code, message. */
export const PROXY_ERRORS = {
  route_not_found: { status: 404, form: 'http', rpc: INVALID_REQUEST, message: 'No route here' },
  path_not_allowed: {
    status: 400,
    form: 'http',
    rpc: INVALID_REQUEST,
    message: 'Dot segments and encoded slashes are not allowed',
  },
  method_not_allowed: {
    status: 405,
    form: 'http',
    rpc: INVALID_REQUEST,
    message: 'MCP takes POST, GET and DELETE',
    headers: { allow: CORS_METHODS },
  },
  payload_too_large: { status: 413, form: 'rpc', rpc: INVALID_REQUEST, message: 'Request body too large' },
  body_encoded: body(PARSE_ERROR),
  body_not_json_content_type: body(PARSE_ERROR),
  body_charset_unsupported: body(PARSE_ERROR),
  body_byte_order_mark: body(PARSE_ERROR),
  body_not_utf8: body(PARSE_ERROR),
  body_not_json: body(PARSE_ERROR),
  body_not_jsonrpc: body(INVALID_REQUEST),
  tool_call_without_id: body(INVALID_REQUEST),
  tool_call_id_repeated: body(INVALID_REQUEST),
  too_deep: body(INVALID_REQUEST),
  duplicate_key: body(INVALID_REQUEST),
  ambiguous_key: body(INVALID_REQUEST),
  unpaired_surrogate: body(INVALID_REQUEST),
  invalid_request_target: {
    status: 400,
    form: 'http',
    rpc: INVALID_REQUEST,
    message: 'The request target must be visible ASCII without encoded control characters',
  },
  invalid_header: {
    status: 400,
    form: 'http',
    rpc: INVALID_REQUEST,
    message: 'A header value holds characters other than visible ASCII, space and tab',
  },
  duplicate_header: {
    status: 400,
    form: 'http',
    rpc: INVALID_REQUEST,
    message: 'A header the proxy reads appears more than once',
  },
  header_mismatch: {
    status: 400,
    form: 'rpc',
    rpc: HEADER_MISMATCH,
    message: 'Header mismatch: the MCP headers do not match the body',
  },
  browser_origin_not_allowed: {
    status: 403,
    form: 'http',
    rpc: INVALID_REQUEST,
    message: "Forbidden: this page's origin is not allowed to call this MCP server",
  },
  unauthorized: { status: 401, form: 'rpc', rpc: -32001, message: 'Unauthorized' },
  insufficient_scope: {
    status: 403,
    form: 'rpc',
    rpc: -32001,
    message: 'Forbidden: the token does not carry the scope this server needs',
  },
  metrics_unauthorized: {
    status: 401,
    form: 'http',
    rpc: -32001,
    message: 'PROXY_METRICS_TOKEN is required as a bearer token',
    headers: { 'www-authenticate': 'Bearer realm="metrics"' },
  },
  mcp_server_not_found: { status: 404, form: 'http', rpc: INVALID_REQUEST, message: 'No MCP server here' },
  mcp_server_not_active: {
    status: 503,
    form: 'rpc',
    rpc: SERVER_ERROR,
    message: 'This MCP server is not active',
  },
  proxy_stopping: {
    status: 503,
    form: 'call',
    rpc: SERVER_ERROR,
    message: 'This proxy is restarting; try again',
    headers: { 'retry-after': '1' },
  },
  proxy_unavailable: {
    status: 503,
    form: 'call',
    rpc: SERVER_ERROR,
    message: "This MCP server's settings cannot be read right now; try again shortly",
    headers: { 'retry-after': '1' },
  },
  origin_unreachable: {
    status: 502,
    form: 'call',
    rpc: INTERNAL,
    message: 'The MCP server is unreachable; try again',
  },
  origin_timeout: {
    status: 504,
    form: 'call',
    rpc: INTERNAL,
    message: 'The MCP server did not answer in time; try again',
  },
  origin_busy: {
    status: 503,
    form: 'call',
    rpc: INTERNAL,
    message: 'The MCP server is busy (every connection to it in use); try again shortly',
    headers: { 'retry-after': '1' },
  },
  origin_auth_failed: {
    status: 502,
    form: 'call',
    rpc: INTERNAL,
    message:
      "The MCP server refused the proxy's credentials; its provider needs to update the server's API key",
  },
  origin_not_allowed: {
    status: 502,
    form: 'call',
    rpc: INTERNAL,
    message:
      "The MCP server's address is not allowed (an internal address or port); its provider needs to change it",
  },
  internal_error: { status: 500, form: 'rpc', rpc: INTERNAL, message: 'Internal proxy error' },
} satisfies Record<string, ProxyError>;

export type ProxyErrorCode = keyof typeof PROXY_ERRORS;

/** Answers a refusal from the table; `message` and `headers` refine the entry for this case. */
export function refuse(
  exchange: Exchange,
  code: ProxyErrorCode,
  id: string | number | null = null,
  refine: { message?: string; headers?: Record<string, string> } = {},
): void {
  const entry: ProxyError = PROXY_ERRORS[code];
  const message = refine.message ?? entry.message;
  const headers = { ...entry.headers, ...refine.headers };
  if (entry.form === 'rpc' || (entry.form === 'call' && id !== null)) {
    const status = entry.form === 'call' ? 200 : entry.status;
    respond(exchange, status, 'application/json', jsonRpcError(id, entry.rpc, message, { code }), headers);
    return;
  }
  respond(exchange, entry.status, 'application/json', JSON.stringify({ code, detail: message }), headers);
}
