/**
 * Which MCP revision a request speaks, and whether its mirrored headers agree with its body.
 *
 * 2026-07-28 ("modern") requests carry their protocol version and the client's capabilities in
 * every request's `_meta`, and on Streamable HTTP the `MCP-Protocol-Version`, `Mcp-Method` and
 * `Mcp-Name` headers mirror the body. Earlier revisions (2025-03-26 … 2025-11-25) declare
 * capabilities once, at `initialize`, and send no `Mcp-Method`.
 */

export const MODERN_VERSION = '2026-07-28';
export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
/** MCP 2026-07-28: the HTTP headers do not match the body, or a required one is missing. */
export const HEADER_MISMATCH = -32020;

type JsonObject = Record<string, unknown>;
const isObject = (value: unknown): value is JsonObject =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** What the proxy needs to know of a request's revision to answer it in kind. */
export interface Era {
  /** 2026-07-28 or later: answers carry `resultType`, and nothing gets -32042. */
  modern: boolean;
  /** This request's client declared URL-mode elicitation in its `_meta` capabilities (modern only). */
  urlElicitation: boolean;
}

export const LEGACY: Era = { modern: false, urlElicitation: false };

const metaOf = (message: unknown): JsonObject | undefined => {
  if (!isObject(message) || !isObject(message.params)) return undefined;
  const meta = message.params._meta;
  return isObject(meta) ? meta : undefined;
};

/** A protocol version names the modern era when it is 2026-07-28 or a later date. */
const isModernVersion = (version: unknown): boolean =>
  typeof version === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(version) && version >= MODERN_VERSION;

/** The era of a request: by its body's `_meta` version, else by its `MCP-Protocol-Version` header. */
export function eraOf(headers: Record<string, string>, parsed: unknown): Era {
  if (Array.isArray(parsed)) return LEGACY;
  const meta = metaOf(parsed);
  const version = meta?.[META_PROTOCOL_VERSION] ?? headers['mcp-protocol-version'];
  if (!isModernVersion(version)) return LEGACY;
  const capabilities = meta?.[META_CLIENT_CAPABILITIES];
  const elicitation = isObject(capabilities) ? capabilities.elicitation : undefined;
  return { modern: true, urlElicitation: isObject(elicitation) && isObject(elicitation.url) };
}

/** The methods whose `Mcp-Name` header mirrors a body field, and that field. */
const NAMED: Record<string, 'name' | 'uri'> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

const SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;
/** Visible ASCII, space and tab (RFC 9110 field values). */
const HEADER_SAFE = /^[\t\x20-\x7e]*$/;

/** A header value as the body would hold it: Base64-sentinel values decoded (MCP 2026-07-28). */
function decodedHeader(value: string): string | undefined {
  const encoded = SENTINEL.exec(value);
  if (encoded === null) return value;
  const text = Buffer.from(encoded[1] as string, 'base64').toString('utf8');
  // A value that does not survive the round trip was not Base64 of UTF-8.
  return Buffer.from(text, 'utf8').toString('base64').replace(/=+$/, '') ===
    (encoded[1] as string).replace(/=+$/, '')
    ? text
    : undefined;
}

/**
 * Why a request's mirrored headers disagree with its body, or undefined when they agree. Checked
 * for every single-message POST that carries them, whatever its era (a header the body
 * contradicts is never trusted); a modern request must carry all that apply to it.
 */
export function headerMismatch(
  headers: Record<string, string>,
  parsed: unknown,
  era: Era,
): string | undefined {
  if (!isObject(parsed) || typeof parsed.method !== 'string') return undefined;
  const method = parsed.method;
  for (const name of ['mcp-protocol-version', 'mcp-method', 'mcp-name'] as const) {
    const value = headers[name];
    if (value !== undefined && !HEADER_SAFE.test(value))
      return `the ${name} header holds characters a header may not`;
  }
  const version = headers['mcp-protocol-version'];
  const bodyVersion = metaOf(parsed)?.[META_PROTOCOL_VERSION];
  if (era.modern) {
    if (version === undefined) return 'the MCP-Protocol-Version header is missing';
    if (typeof bodyVersion === 'string' && version !== bodyVersion)
      return `the MCP-Protocol-Version header (${version}) does not match the body's ${META_PROTOCOL_VERSION} (${bodyVersion})`;
  }
  const headerMethod = headers['mcp-method'];
  if (headerMethod === undefined) {
    if (era.modern) return 'the Mcp-Method header is missing';
  } else if (headerMethod !== method) {
    return `the Mcp-Method header (${headerMethod}) does not match the body's method (${method})`;
  }
  const field = NAMED[method];
  if (field === undefined) return undefined;
  const params = isObject(parsed.params) ? parsed.params : {};
  const bodyName = params[field];
  const headerName = headers['mcp-name'];
  if (headerName === undefined) return era.modern ? 'the Mcp-Name header is missing' : undefined;
  const decoded = decodedHeader(headerName);
  if (decoded === undefined) return 'the Mcp-Name header is not valid Base64';
  if (decoded !== bodyName)
    return `the Mcp-Name header (${JSON.stringify(decoded)}) does not match the body's params.${field} (${JSON.stringify(bodyName)})`;
  return undefined;
}
