/**
 * When the SDK asks again. A 429 or 503 means the service did nothing (docs/api.md: every 503
 * carries `Retry-After` and can be repeated), so those are retried for every method, after the
 * wait the service asked for. A request that never got an answer (a reset, a refused connection)
 * may or may not have been done, so only requests that are safe to repeat are retried then:
 * GET, HEAD, PUT, DELETE, and anything sent with an `Idempotency-Key`.
 */
export interface RetryPolicy {
  /** Retries after the first attempt (default 2; 0 turns retrying off). */
  maxRetries: number;
  /** The longest wait between attempts; a `Retry-After` asking for more is not waited for (default 30 s). */
  maxDelayMs: number;
  /** The first wait when the answer names none, doubled on each retry with jitter (default 500 ms). */
  baseDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 2, maxDelayMs: 30_000, baseDelayMs: 500 };

const REPEATABLE = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/** How long `Retry-After` asks to wait (seconds or an HTTP date), or undefined if it names nothing usable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // Only an HTTP date (IMF-fixdate, RFC 9110): Date.parse would also take '-1' or '1.5' as years.
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before retry number `attempt` (1-based) when the answer named none: doubling, with jitter. */
function backoffMs(policy: RetryPolicy, attempt: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

const sleep = (ms: number, signal: AbortSignal | null) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/** A `fetch` that sends `request` again as the policy allows; the last answer or error is the caller's. */
export function retryingFetch(base: typeof fetch, policy: RetryPolicy) {
  return async (request: Request): Promise<Response> => {
    const repeatable = REPEATABLE.has(request.method) || request.headers.has('idempotency-key');
    for (let attempt = 1; ; attempt++) {
      const last = attempt > policy.maxRetries;
      let response: Response;
      try {
        // A request's body can be read once: each attempt sends a copy.
        response = await base(last ? request : request.clone());
      } catch (error) {
        if (last || !repeatable || request.signal.aborted) throw error;
        await sleep(backoffMs(policy, attempt), request.signal);
        continue;
      }
      if (last || (response.status !== 429 && response.status !== 503)) return response;
      const asked = retryAfterMs(response.headers.get('retry-after'));
      if (asked !== undefined && asked > policy.maxDelayMs) return response;
      await response.body?.cancel();
      await sleep(asked ?? backoffMs(policy, attempt), request.signal);
    }
  };
}
