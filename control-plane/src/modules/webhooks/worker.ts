import type { Logger } from '@mcp-meter/contracts/kit';
import type { Clock } from '../../clock';
import type { Pool } from '../../db/pool';
import { unixSeconds } from '../events/outbox';
import {
  anyDeliveryDue,
  type ClaimedDelivery,
  claimDueDeliveries,
  deliveriesDue,
  recordAttempt,
} from './repository';
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
  /** Of the attempts sent, those the endpoint accepted (a 2xx). */
  delivered = 0;

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

  private anyDue(): Promise<boolean> {
    return anyDeliveryDue(this.pool, this.clock.now());
  }

  /** The deliveries due now to enabled endpoints (every worker's), and the oldest one's wait. */
  backlog(): Promise<{ due: number; oldestDueSeconds: number }> {
    return deliveriesDue(this.pool, this.clock.now());
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  private async claimAndSend(): Promise<number> {
    const capacity = Math.min(this.options.batchSize, this.options.maxInFlight - this.inFlight.size);
    if (capacity <= 0) return 0;
    const now = this.clock.now();
    const busy = [...this.perEndpoint].filter(([, n]) => n >= this.options.perEndpoint).map(([id]) => id);
    const rows = await claimDueDeliveries(this.pool, {
      now,
      capacity,
      lockedUntil: new Date(now.getTime() + this.options.leaseMs),
      busyEndpoints: busy,
      inFlight: [...this.inFlight.keys()],
      perEndpoint: this.options.perEndpoint,
    });
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

  private async attempt(d: ClaimedDelivery, secrets: readonly string[]): Promise<void> {
    const headers = signedRequest(d.body, d.event_id, secrets, unixSeconds(this.clock.now()));
    const result = await this.sender.send(d.url, d.body, headers);
    this.sent++;
    if (result.ok) this.delivered++;
    const now = this.clock.now();
    const next = result.ok ? null : new Date(now.getTime() + retryDelay(d.attempts, result.retryAfterMs));
    const endpoint = await recordAttempt(this.pool, {
      delivery: d,
      attemptId: headers['sv-delivery'] as string,
      result,
      next,
      at: now,
      disableAfter: this.options.disableAfter,
    });
    if (endpoint?.status === 'disabled' && endpoint.consecutive_failures === this.options.disableAfter)
      this.options.logger.warn(
        { endpoint: d.endpoint_id },
        'webhook endpoint disabled after repeated failures',
      );
  }
}
