import createClient, { type Client } from 'openapi-fetch';
import { DEFAULT_RETRY, type RetryPolicy, retryingFetch } from './retry';
import type { paths } from './schema';

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
  return createClient<paths>({
    baseUrl,
    fetch: retryingFetch(options.fetch ?? globalThis.fetch, policy),
    headers: { ...options.headers, authorization: `Bearer ${options.apiKey}` },
  });
}
