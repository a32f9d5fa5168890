import type { Logger } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { unixSeconds } from '../events/outbox';
import type { WebhookSender } from './sender';
import { signedRequest, type WebhookService } from './service';

/** Spec 6.1: delay after each failed attempt; the last one repeats. */
export const RETRY_DELAYS_MS = [5, 15, 60, 360, 1440, 2880, 4320].map((minutes) => minutes * 60_000);
const MAX_RETRY_AFTER_MS = 72 * 3600_000;

export interface WebhookWorkerOptions {
  /** How often due deliveries are looked for (spec: 30 s). */
  intervalMs: number;
  /** Deliveries claimed per look (spec: 20). */
  batchSize: number;
  /** Attempts in flight in this process at most. */
  maxInFlight: number;
  /** Attempts in flight per endpoint at most: a slow endpoint cannot take every slot. */
  perEndpoint: number;
  /** Consecutive failed attempts that disable an endpoint (spec: 12). */
  disableAfter: number;
  /** How long a claimed attempt is leased to this process; longer than the send timeout. */
  leaseMs: number;
  logger: Logger;
}

interface Claimed {
  id: string;
  event_id: string;
  endpoint_id: string;
  attempts: number;
  url: string;
  type: string;
  body: string;
}

export function retryDelay(attempt: number, retryAfterMs: number | null): number {
  if (retryAfterMs !== null) return Math.min(Math.max(retryAfterMs, 1000), MAX_RETRY_AFTER_MS);
  return RETRY_DELAYS_MS[Math.min(attempt - 1, RETRY_DELAYS_MS.length - 1)] as number;
}

/**
 * Sends due deliveries. Each look claims deliveries with FOR UPDATE SKIP LOCKED and leases them
 * (locked_until), so several control-plane processes never send the same attempt twice; attempts
 * run concurrently and are not awaited by the next look, so a hanging endpoint holds only its own
 * slots. Outcomes are written in one transaction: the attempt log, the delivery's next attempt
 * on the retry schedule (Retry-After on 429/503 wins), and the endpoint's failure count, which
 * disables it at `disableAfter`.
 */
export class WebhookWorker {
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly perEndpoint = new Map<string, number>();
  private looking: Promise<number> | undefined;
  private stopped = false;
  sent = 0;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly service: WebhookService,
    private readonly sender: WebhookSender,
    private readonly options: WebhookWorkerOptions,
  ) {}

  start(): void {
    this.stopped = false;
    const loop = () => {
      if (this.stopped) return;
      void this.look()
        .catch((error: unknown) => this.options.logger.error({ err: error }, 'webhook look failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(loop, this.options.intervalMs);
        });
    };
    this.timer = setTimeout(loop, 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.looking?.catch(() => undefined);
    await Promise.allSettled(this.inFlight.values());
  }

  /** One look: claims what is due (within capacity) and starts those attempts; answers how many. */
  look(): Promise<number> {
    if (this.looking === undefined) {
      this.looking = this.claimAndSend().finally(() => {
        this.looking = undefined;
      });
    }
    return this.looking;
  }

  /**
   * Tests and benchmarks: look until nothing is due and nothing is in flight. A look can come
   * back empty while another worker holds the candidates' row locks, so an empty look is
   * confirmed against the table before giving up.
   */
  async drain(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const started = await this.look();
      if (started > 0) continue;
      if (this.inFlight.size > 0) {
        await Promise.race(this.inFlight.values());
        continue;
      }
      if (!(await this.anyDue())) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  private async anyDue(): Promise<boolean> {
    const now = this.clock.now();
    const { rows } = await this.pool.query(
      `SELECT 1 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.locked_until IS NULL OR d.locked_until <= $1)
          AND e.status = 'enabled' AND e.deleted_at IS NULL LIMIT 1`,
      [now],
    );
    return rows.length > 0;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  private async claimAndSend(): Promise<number> {
    const capacity = Math.min(this.options.batchSize, this.options.maxInFlight - this.inFlight.size);
    if (capacity <= 0) return 0;
    const now = this.clock.now();
    const busy = [...this.perEndpoint].filter(([, n]) => n >= this.options.perEndpoint).map(([id]) => id);
    const { rows } = await this.pool.query<Claimed>(
      // Lock candidates first (SKIP LOCKED: never what another worker is claiming), then keep at
      // most perEndpoint per endpoint, so one endpoint's backlog cannot fill the batch.
      `WITH candidates AS (
         SELECT d.id, d.endpoint_id, d.next_attempt_at
           FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
          WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.locked_until IS NULL OR d.locked_until <= $1)
            AND e.status = 'enabled' AND e.deleted_at IS NULL AND NOT (d.endpoint_id = ANY($4)) AND NOT (d.id = ANY($5))
          ORDER BY d.next_attempt_at, d.id
          LIMIT $7
          FOR UPDATE OF d SKIP LOCKED
       ),
       ranked AS (
         SELECT id, next_attempt_at, row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, id) AS rn
           FROM candidates
       ),
       picked AS (SELECT id FROM ranked WHERE rn <= $6 ORDER BY next_attempt_at, id LIMIT $2)
       UPDATE webhook_deliveries d SET locked_until = $3, attempts = d.attempts + 1, updated_at = $1
         FROM picked, webhook_endpoints e, outbox_events o
        WHERE d.id = picked.id AND e.id = d.endpoint_id AND o.id = d.event_id
       RETURNING d.id, d.event_id, d.endpoint_id, d.attempts, e.url, o.type, o.payload::text AS body`,
      [
        now,
        capacity,
        new Date(now.getTime() + this.options.leaseMs),
        busy,
        [...this.inFlight.keys()],
        this.options.perEndpoint,
        capacity * 4,
      ],
    );
    // Signing secrets once per endpoint of this claim, not once per delivery.
    const secrets = new Map<string, string[]>();
    for (const endpointId of new Set(rows.map((r) => r.endpoint_id)))
      secrets.set(endpointId, await this.service.signingSecrets(this.pool, endpointId));
    for (const delivery of rows) {
      this.perEndpoint.set(delivery.endpoint_id, (this.perEndpoint.get(delivery.endpoint_id) ?? 0) + 1);
      const attempt = this.attempt(delivery, secrets.get(delivery.endpoint_id) ?? [])
        .catch((error: unknown) =>
          this.options.logger.error({ err: error, delivery: delivery.id }, 'webhook attempt not recorded'),
        )
        .finally(() => {
          this.inFlight.delete(delivery.id);
          const left = (this.perEndpoint.get(delivery.endpoint_id) ?? 1) - 1;
          if (left <= 0) this.perEndpoint.delete(delivery.endpoint_id);
          else this.perEndpoint.set(delivery.endpoint_id, left);
          // Freed capacity: look again at once rather than waiting for the interval.
          if (!this.stopped && this.timer !== undefined) void this.look().catch(() => undefined);
        });
      this.inFlight.set(delivery.id, attempt);
    }
    return rows.length;
  }

  private async attempt(d: Claimed, secrets: readonly string[]): Promise<void> {
    const headers = signedRequest(d.body, d.event_id, secrets, unixSeconds(this.clock.now()));
    const result = await this.sender.send(d.url, d.body, headers);
    this.sent++;
    const now = this.clock.now();
    const next = result.ok ? null : new Date(now.getTime() + retryDelay(d.attempts, result.retryAfterMs));
    // One statement, so one round trip and atomic: the delivery's state, the attempt log, and the
    // endpoint's consecutive-failure count (disabled at disableAfter).
    const { rows } = await this.pool.query<{ consecutive_failures: number; status: string }>(
      `WITH delivery AS (
         UPDATE webhook_deliveries
            SET status = $2, next_attempt_at = COALESCE($3, next_attempt_at), locked_until = NULL,
                last_status_code = $4, last_error = $5, updated_at = $6
          WHERE id = $1
       ),
       logged AS (
         INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, event_type, attempt, succeeded, status_code,
                                       latency_ms, error, response_excerpt, next_attempt_at, created_at)
         VALUES ($7, $1, $8, $9, $10, $11, $12, $4, $13, $5, $14, $3, $6)
       )
       UPDATE webhook_endpoints
          SET consecutive_failures = CASE WHEN $12 THEN 0 ELSE consecutive_failures + 1 END,
              status = CASE WHEN NOT $12 AND consecutive_failures + 1 >= $15 THEN 'disabled' ELSE status END,
              disabled_reason = CASE WHEN NOT $12 AND consecutive_failures + 1 >= $15 AND status = 'enabled'
                                     THEN $16 ELSE disabled_reason END,
              updated_at = CASE WHEN $12 THEN updated_at ELSE $6 END
        WHERE id = $8 AND (NOT $12 OR consecutive_failures <> 0)
        RETURNING consecutive_failures, status`,
      [
        d.id,
        result.ok ? 'succeeded' : 'pending',
        next,
        result.statusCode,
        result.error,
        now,
        headers['sv-delivery'],
        d.endpoint_id,
        d.event_id,
        d.type,
        d.attempts,
        result.ok,
        result.latencyMs,
        result.responseExcerpt,
        this.options.disableAfter,
        `${this.options.disableAfter} consecutive failed attempts`,
      ],
    );
    if (rows[0]?.status === 'disabled' && rows[0].consecutive_failures === this.options.disableAfter)
      this.options.logger.warn(
        { endpoint: d.endpoint_id },
        'webhook endpoint disabled after repeated failures',
      );
  }
}
