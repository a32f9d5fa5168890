import createClient, { type Client } from 'openapi-fetch';
import { IDEMPOTENT_OPERATIONS } from './idempotent.js';
import { DEFAULT_RETRY, type RetryPolicy, retryingFetch } from './retry.js';
import type { paths } from './schema.js';

export interface MeterOptions {
  /** A secret key: `sk_test_…`/`sk_sandbox_…` for the sandbox, `sk_live_…` for live; it decides the environment. */
  apiKey: string;
  /** Where the API is (default `MCP_METER_URL`, else `http://127.0.0.1:8080`, what `npm start` serves). */
  baseUrl?: string;
  /** When to ask again (see retry.ts): `{ maxRetries: 0 }` turns retrying off. */
  retry?: Partial<RetryPolicy>;
  /** The fetch to send with (default the global one). */
  fetch?: typeof fetch;
  /** Headers sent with every request, such as a user agent naming your integration. */
  headers?: Record<string, string>;
}

/** The typed client: `GET`, `POST`, `PUT`, `PATCH`, `DELETE` over every operation of `/openapi.json`. */
export type MeterClient = Client<paths>;

/**
 * A client of the MCP Meter API, typed from its OpenAPI document: paths, parameters, bodies and
 * answers are checked by TypeScript. Calls answer `{ data, error, response }` (openapi-fetch);
 * wrap one in `orThrow` to get its data or a `MeterApiError`.
 */
export function createMeter(options: MeterOptions): MeterClient {
  if (typeof options.apiKey !== 'string' || !/^sk_[a-z]+_\S+$/.test(options.apiKey))
    throw new TypeError('apiKey must be a secret key: sk_test_…, sk_sandbox_… or sk_live_…');
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const baseUrl = (options.baseUrl ?? env?.MCP_METER_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const policy: RetryPolicy = { ...DEFAULT_RETRY, ...options.retry };
  const retrying = retryingFetch(options.fetch ?? globalThis.fetch, policy);
  return createClient<paths>({
    baseUrl,
    fetch: (request: Request) => retrying(withIdempotencyKey(request, baseUrl)),
    headers: { ...options.headers, authorization: `Bearer ${options.apiKey}` },
  });
}

/** The operations that take an Idempotency-Key, as patterns over the request's path. */
const IDEMPOTENT = IDEMPOTENT_OPERATIONS.map(
  ([method, template]) => [method, new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`)] as const,
);

/**
 * A request to an operation that takes an Idempotency-Key, sent with one of its own when the
 * caller gave none (as Stripe's SDKs do): its retries then apply it once, and a request whose
 * answer was lost can be sent again. Give your own key to make a retry of yours idempotent too.
 */
function withIdempotencyKey(request: Request, baseUrl: string): Request {
  if (request.headers.has('idempotency-key')) return request;
  const path = new URL(request.url).pathname.slice(new URL(baseUrl).pathname.replace(/\/$/, '').length);
  if (!IDEMPOTENT.some(([method, pattern]) => method === request.method && pattern.test(path)))
    return request;
  const headers = new Headers(request.headers);
  headers.set('idempotency-key', globalThis.crypto.randomUUID());
  return new Request(request, { headers });
}
