import { createHash } from 'node:crypto';
import type { Clock } from '../clock';
import type { Pool } from '../db/pool';
import { DomainError, ValidationError } from '../errors';
import { type App, authOf } from './app';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** POSTs that move money accept an Idempotency-Key; `required` refuses them without one. */
    idempotency?: 'optional' | 'required';
  }
  interface FastifyRequest {
    idempotencyKey: string | null;
  }
}

/** How long a key and its stored response are kept (Stripe keeps 24 hours too). */
const KEY_TTL_MS = 24 * 3600 * 1000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

interface StoredKey {
  request_hash: string;
  state: 'in_progress' | 'done';
  response_status: number | null;
  response_body: string | null;
  created_at: Date;
}

/**
 * Idempotency-Key for the routes that opt in: the first request runs and its response is kept;
 * the same key with the same body gets that response again (`Idempotent-Replayed: true`); while
 * the first is still running, a duplicate gets 409; the same key with another body gets 422.
 * 5xx answers are not kept, so the client's retry runs again (the money-moving writes carry the
 * key themselves, so a retry after a half-finished attempt still writes once).
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
    await pool.query(
      'DELETE FROM idempotency_keys WHERE provider_id = $1 AND environment = $2 AND key = $3 AND created_at < $4',
      [auth.providerId, auth.environment, key, new Date(now.getTime() - KEY_TTL_MS)],
    );
    const claimed = await pool.query(
      `INSERT INTO idempotency_keys (provider_id, environment, key, method, path, request_hash, state, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'in_progress', $7) ON CONFLICT DO NOTHING`,
      [auth.providerId, auth.environment, key, request.method, path, hash, now],
    );
    if (claimed.rowCount === 1) {
      request.idempotencyKey = key;
      return;
    }
    const { rows } = await pool.query<StoredKey>(
      'SELECT request_hash, state, response_status, response_body, created_at FROM idempotency_keys WHERE provider_id = $1 AND environment = $2 AND key = $3',
      [auth.providerId, auth.environment, key],
    );
    const stored = rows[0];
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
    if (reply.statusCode >= 500) {
      await pool.query(
        'DELETE FROM idempotency_keys WHERE provider_id = $1 AND environment = $2 AND key = $3',
        [auth.providerId, auth.environment, key],
      );
    } else {
      await pool.query(
        `UPDATE idempotency_keys SET state = 'done', response_status = $4, response_body = $5
          WHERE provider_id = $1 AND environment = $2 AND key = $3`,
        [
          auth.providerId,
          auth.environment,
          key,
          reply.statusCode,
          typeof payload === 'string' ? payload : JSON.stringify(payload),
        ],
      );
    }
    return payload;
  });
}
