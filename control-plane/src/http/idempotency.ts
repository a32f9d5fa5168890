import { createHash } from 'node:crypto';
import type { Clock } from '../clock';
import type { Pool } from '../db/pool';
import { DomainError, type ErrorCode, ValidationError } from '../errors';
import { type App, authOf } from './app';
import { claimKey, completeKey, findKey, releaseKey } from './idempotency-keys';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** POSTs that move money accept an Idempotency-Key; `required` refuses them without one. */
    idempotency?: 'optional' | 'required';
  }
  interface FastifyRequest {
    idempotencyKey: string | null;
  }
}

/**
 * Answers that say nothing was done and the same request may succeed if sent again: a
 * transaction PostgreSQL aborted for a concurrent one, a rate limit, a timeout, and the payment
 * processor's own idempotency conflicts (its key held for another request, or still running).
 * They are not kept, as Stripe keeps no result for a request that never began executing: a client
 * that retries under the same key, as told, gets the request run, not this answer for 24 hours.
 */
const NOT_KEPT: ReadonlySet<string> = new Set<ErrorCode>([
  'lock_timeout',
  'rate_limited',
  'too_many_attempts',
  'request_timeout',
  'idempotency_request_in_progress',
  'idempotency_key_reused',
  // Something else holds what the request needs for a moment: the same request goes through after.
  'checkout_session_in_progress',
  'test_clock_advancing',
]);

/** The problem code of a 4xx answer's body, if it is a problem. */
function problemCode(payload: unknown): string | undefined {
  if (typeof payload !== 'string') return undefined;
  try {
    const code = (JSON.parse(payload) as { code?: unknown } | null)?.code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}

/** How long a key and its stored response are kept (Stripe keeps 24 hours too). */
const KEY_TTL_MS = 24 * 3600 * 1000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * Idempotency-Key for the routes that opt in: the first request runs and its response is kept;
 * the same key with the same body gets that response again (`Idempotent-Replayed: true`); while
 * the first is still running, a duplicate gets 409; the same key with another body gets 422.
 * 5xx answers are not kept, so the client's retry runs again (the money-moving writes carry the
 * key themselves, so a retry after a half-finished attempt still writes once); nor are the 4xx
 * answers of NOT_KEPT, which say to retry.
 */
export function installIdempotency(scope: App, pool: Pool, clock: Clock): void {
  scope.decorateRequest('idempotencyKey', null);

  scope.addHook('preHandler', async (request, reply) => {
    const mode = request.routeOptions.config.idempotency;
    if (mode === undefined) return;
    const header = request.headers['idempotency-key'];
    if (header === undefined) {
      if (mode === 'required') {
        throw new DomainError(
          'idempotency_key_required',
          'Send an Idempotency-Key header with this request so a retry cannot apply it twice',
        );
      }
      return;
    }
    const key = Array.isArray(header) ? header[0] : header;
    if (key === undefined || !KEY_PATTERN.test(key)) {
      throw new ValidationError([
        {
          path: '/Idempotency-Key',
          message: 'must be 1 to 255 printable ASCII characters',
          location: 'headers',
        },
      ]);
    }
    const auth = authOf(request);
    const path = request.url.split('?')[0] ?? request.url;
    const hash = createHash('sha256')
      .update(`${request.method} ${path}\n${JSON.stringify(request.body ?? null)}`)
      .digest('hex');
    const now = clock.now();
    const claimed = await claimKey(pool, auth, {
      key,
      method: request.method,
      path,
      hash,
      at: now,
      expiredBefore: new Date(now.getTime() - KEY_TTL_MS),
    });
    if (claimed) {
      request.idempotencyKey = key;
      return;
    }
    const stored = await findKey(pool, auth, key);
    if (stored === undefined)
      throw new DomainError(
        'idempotency_request_in_progress',
        'A request with this Idempotency-Key just finished; retry',
      );
    if (stored.request_hash !== hash) {
      throw new DomainError(
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request; use a new key',
      );
    }
    if (stored.state === 'in_progress' || stored.response_status === null) {
      throw new DomainError(
        'idempotency_request_in_progress',
        'A request with this Idempotency-Key is still being processed; retry shortly',
      );
    }
    reply
      .header('idempotent-replayed', 'true')
      .status(stored.response_status)
      .type(stored.response_status >= 400 ? 'application/problem+json' : 'application/json');
    return reply.send(stored.response_body);
  });

  scope.addHook('onSend', async (request, reply, payload) => {
    const key = request.idempotencyKey;
    if (key === null) return payload;
    const auth = authOf(request);
    const status = reply.statusCode;
    const kept = status < 400 || (status < 500 && !NOT_KEPT.has(problemCode(payload) ?? ''));
    if (!kept) await releaseKey(pool, auth, key);
    else
      await completeKey(pool, auth, key, {
        status: reply.statusCode,
        body: typeof payload === 'string' ? payload : JSON.stringify(payload),
      });
    return payload;
  });
}
