import { randomBytes } from 'node:crypto';
import type { OutboundGuard } from '@mcp-meter/contracts/kit';
import { ID, newId } from '@mcp-meter/contracts/kit';
import { seal, unseal } from '@mcp-meter/contracts/snapshots';
import type { Environment } from '@mcp-meter/contracts/usage-record';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import { signatureHeader } from '../../webhooks/verify';
import { API_VERSION, unixSeconds } from '../events/outbox';
import type { AuthContext } from '../providers/service';
import { EVENT_TYPE_SET } from './catalog';
import type { SendResult, WebhookSender } from './sender';

export interface EndpointRow {
  id: string;
  provider_id: string;
  environment: Environment;
  url: string;
  description: string | null;
  enabled_events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: Date;
  updated_at: Date;
}

export interface AttemptRow {
  id: string;
  delivery_id: string | null;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  succeeded: boolean;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  response_excerpt: string | null;
  next_attempt_at: Date | null;
  created_at: Date;
}

/** Default overlap during which a rotated-out secret still signs. */
const ROTATION_OVERLAP_SECONDS = 24 * 3600;

const toEndpoint = (r: EndpointRow) => ({
  id: r.id,
  url: r.url,
  description: r.description,
  enabledEvents: r.enabled_events,
  status: r.status,
  disabledReason: r.disabled_reason,
  consecutiveFailures: r.consecutive_failures,
  livemode: r.environment === 'live',
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

export const toAttempt = (r: AttemptRow) => ({
  id: r.id,
  deliveryId: r.delivery_id,
  endpointId: r.endpoint_id,
  eventId: r.event_id,
  eventType: r.event_type,
  attempt: r.attempt,
  succeeded: r.succeeded,
  statusCode: r.status_code,
  latencyMs: r.latency_ms,
  error: r.error,
  responseExcerpt: r.response_excerpt,
  nextAttemptAt: r.next_attempt_at?.toISOString() ?? null,
  createdAt: r.created_at.toISOString(),
});

/** What one attempt sends: the exact body bytes and the headers of spec 6.2 with the signature over them. */
export function signedRequest(
  body: string,
  eventId: string,
  secrets: readonly string[],
  timestamp: number,
): Record<string, string> {
  return {
    'sv-signature': signatureHeader(body, secrets, timestamp),
    'sv-event-id': eventId,
    'sv-delivery': newId(ID.webhookDelivery),
  };
}

/**
 * Webhook endpoints: registration (SSRF-checked URL, `whsec_` secret shown once), changes,
 * disable/enable, secret rotation with an overlap, the test send, the attempt log and
 * redelivery. Deliveries themselves are created with each event (outbox) and sent by the worker.
 */
export class WebhookService {
  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly secretKey: Buffer,
    private readonly guard: OutboundGuard,
    private readonly sender: WebhookSender,
  ) {}

  private async checkUrl(auth: AuthContext, raw: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ValidationError([{ path: '/url', message: 'must be an absolute URL', location: 'body' }]);
    }
    const problems: string[] = [];
    if (url.protocol === 'http:' && auth.environment === 'live' && !this.guard.allows(url.hostname))
      problems.push('must be https in live mode');
    const unsafe = await this.guard.problem(url);
    if (unsafe !== undefined) problems.push(unsafe);
    if (problems.length > 0)
      throw new ValidationError(
        problems.map((message) => ({ path: '/url', message, location: 'body' as const })),
      );
    return url.toString();
  }

  private checkEvents(events: string[] | undefined): string[] {
    const list = [...new Set(events ?? [])];
    const unknown = list.filter((t) => !EVENT_TYPE_SET.has(t));
    if (unknown.length > 0) {
      throw new ValidationError(
        unknown.map((t) => ({
          path: `/enabledEvents/${(events ?? []).indexOf(t)}`,
          message: `unknown event type "${t}" (see GET /v1/sdk/webhooks/event-types)`,
          location: 'body' as const,
        })),
      );
    }
    return list;
  }

  private newSecret(): string {
    return `whsec_${randomBytes(24).toString('base64url')}`;
  }

  async create(auth: AuthContext, input: { url: string; enabledEvents?: string[]; description?: string }) {
    const url = await this.checkUrl(auth, input.url);
    const events = this.checkEvents(input.enabledEvents);
    const secret = this.newSecret();
    const at = this.clock.now();
    const row = await inTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (id, provider_id, environment, url, description, enabled_events, status, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'enabled', $7, $7) RETURNING *`,
        [
          newId(ID.webhookEndpoint),
          auth.providerId,
          auth.environment,
          url,
          input.description ?? null,
          events,
          at,
        ],
      );
      const created = rows[0] as EndpointRow;
      await tx.query(
        'INSERT INTO webhook_secrets (id, endpoint_id, sealed_secret, created_at) VALUES ($1, $2, $3, $4)',
        [newId(ID.webhookSecret), created.id, seal(this.secretKey, secret), at],
      );
      return created;
    });
    return { ...toEndpoint(row), secret };
  }

  async find(db: Queryable, auth: AuthContext, id: string, forUpdate = false): Promise<EndpointRow> {
    const { rows } = await db.query<EndpointRow>(
      `SELECT * FROM webhook_endpoints WHERE id = $1 AND provider_id = $2 AND environment = $3 AND deleted_at IS NULL
       ${forUpdate ? 'FOR UPDATE' : ''}`,
      [id, auth.providerId, auth.environment],
    );
    const row = rows[0];
    if (row === undefined) throw new NotFoundError('webhook_endpoint_not_found', `No webhook endpoint ${id}`);
    return row;
  }

  async get(auth: AuthContext, id: string) {
    return toEndpoint(await this.find(this.pool, auth, id));
  }

  async list(auth: AuthContext) {
    const { rows } = await this.pool.query<EndpointRow>(
      'SELECT * FROM webhook_endpoints WHERE provider_id = $1 AND environment = $2 AND deleted_at IS NULL ORDER BY id',
      [auth.providerId, auth.environment],
    );
    return { data: rows.map(toEndpoint) };
  }

  async update(
    auth: AuthContext,
    id: string,
    patch: { url?: string; enabledEvents?: string[]; description?: string | null },
  ) {
    const url = patch.url === undefined ? undefined : await this.checkUrl(auth, patch.url);
    const events = patch.enabledEvents === undefined ? undefined : this.checkEvents(patch.enabledEvents);
    const current = await this.find(this.pool, auth, id);
    const { rows } = await this.pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET url = $2, enabled_events = $3, description = $4, updated_at = $5 WHERE id = $1 RETURNING *`,
      [
        current.id,
        url ?? current.url,
        events ?? current.enabled_events,
        patch.description === undefined ? current.description : patch.description,
        this.clock.now(),
      ],
    );
    return toEndpoint(rows[0] as EndpointRow);
  }

  /** Deleted endpoints get nothing more; their pending deliveries are dropped with them. */
  async delete(auth: AuthContext, id: string) {
    const current = await this.find(this.pool, auth, id);
    const at = this.clock.now();
    await inTransaction(this.pool, async (tx) => {
      await tx.query('UPDATE webhook_endpoints SET deleted_at = $2, updated_at = $2 WHERE id = $1', [
        current.id,
        at,
      ]);
      await tx.query(`DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'`, [
        current.id,
      ]);
    });
    return { id: current.id, deleted: true as const };
  }

  async setEnabled(auth: AuthContext, id: string, enabled: boolean) {
    const current = await this.find(this.pool, auth, id);
    const { rows } = await this.pool.query<EndpointRow>(
      `UPDATE webhook_endpoints
          SET status = $2, disabled_reason = $3, consecutive_failures = CASE WHEN $2 = 'enabled' THEN 0 ELSE consecutive_failures END,
              updated_at = $4
        WHERE id = $1 RETURNING *`,
      [
        current.id,
        enabled ? 'enabled' : 'disabled',
        enabled ? null : 'disabled by the provider',
        this.clock.now(),
      ],
    );
    return toEndpoint(rows[0] as EndpointRow);
  }

  /** A new secret signs from now on; the old ones keep signing alongside until the overlap ends. */
  async rotateSecret(auth: AuthContext, id: string, overlapSeconds = ROTATION_OVERLAP_SECONDS) {
    const current = await this.find(this.pool, auth, id);
    const secret = this.newSecret();
    const at = this.clock.now();
    const overlapEnds = new Date(at.getTime() + overlapSeconds * 1000);
    await inTransaction(this.pool, async (tx) => {
      await tx.query(
        `UPDATE webhook_secrets SET expires_at = LEAST(COALESCE(expires_at, $2), $2) WHERE endpoint_id = $1`,
        [current.id, overlapEnds],
      );
      await tx.query(
        'INSERT INTO webhook_secrets (id, endpoint_id, sealed_secret, created_at) VALUES ($1, $2, $3, $4)',
        [newId(ID.webhookSecret), current.id, seal(this.secretKey, secret), at],
      );
    });
    return { id: current.id, secret, previousSecretsExpireAt: overlapEnds.toISOString() };
  }

  /** Every secret that signs right now, newest first. */
  async signingSecrets(db: Queryable, endpointId: string): Promise<string[]> {
    const { rows } = await db.query<{ sealed_secret: string }>(
      `SELECT sealed_secret FROM webhook_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > $2)
        ORDER BY created_at DESC`,
      [endpointId, this.clock.now()],
    );
    return rows.map((r) => unseal(this.secretKey, r.sealed_secret));
  }

  /** Sends a `payment.succeeded` test event now and answers with the attempt (spec 4.11). */
  async sendTest(auth: AuthContext, id: string) {
    const endpoint = await this.find(this.pool, auth, id);
    const at = this.clock.now();
    const eventId = newId(ID.event);
    const body = JSON.stringify({
      id: eventId,
      type: 'payment.succeeded',
      created: unixSeconds(at),
      api_version: API_VERSION,
      data: {
        object: {
          id: `txn_test_${randomBytes(6).toString('hex')}`,
          amount: 2000,
          currency: 'usd',
          customer: 'cus_test',
          product: 'prd_test',
          plan: 'pln_test',
          processor_payment_intent: 'pi_test',
          transaction_reference: 'test',
          created: unixSeconds(at),
        },
        previous_attributes: null,
      },
      livemode: endpoint.environment === 'live',
      request: { id: null, idempotency_key: null },
      test: true,
    });
    const headers = signedRequest(
      body,
      eventId,
      await this.signingSecrets(this.pool, endpoint.id),
      unixSeconds(at),
    );
    const result = await this.sender.send(endpoint.url, body, headers);
    const attempt = await this.recordAttempt(this.pool, {
      attemptId: headers['sv-delivery'] as string,
      deliveryId: null,
      endpointId: endpoint.id,
      eventId,
      eventType: 'payment.succeeded',
      attempt: 1,
      result,
      nextAttemptAt: null,
    });
    return toAttempt(attempt);
  }

  async recordAttempt(
    db: Queryable,
    a: {
      attemptId: string;
      deliveryId: string | null;
      endpointId: string;
      eventId: string;
      eventType: string;
      attempt: number;
      result: SendResult;
      nextAttemptAt: Date | null;
    },
  ): Promise<AttemptRow> {
    const { rows } = await db.query<AttemptRow>(
      `INSERT INTO webhook_attempts (id, delivery_id, endpoint_id, event_id, event_type, attempt, succeeded, status_code,
                                     latency_ms, error, response_excerpt, next_attempt_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *`,
      [
        a.attemptId,
        a.deliveryId,
        a.endpointId,
        a.eventId,
        a.eventType,
        a.attempt,
        a.result.ok,
        a.result.statusCode,
        a.result.latencyMs,
        a.result.error,
        a.result.responseExcerpt,
        a.nextAttemptAt,
        this.clock.now(),
      ],
    );
    return rows[0] as AttemptRow;
  }

  /** The attempt log, newest first, for one endpoint and optionally one event. */
  async attempts(auth: AuthContext, query: { endpointId?: string; eventId?: string; limit: number }) {
    if (query.endpointId !== undefined) await this.find(this.pool, auth, query.endpointId);
    const { rows } = await this.pool.query<AttemptRow>(
      `SELECT a.* FROM webhook_attempts a JOIN webhook_endpoints e ON e.id = a.endpoint_id
        WHERE e.provider_id = $1 AND e.environment = $2
          AND ($3::text IS NULL OR a.endpoint_id = $3) AND ($4::text IS NULL OR a.event_id = $4)
        ORDER BY a.created_at DESC, a.id DESC LIMIT $5`,
      [auth.providerId, auth.environment, query.endpointId ?? null, query.eventId ?? null, query.limit],
    );
    return { data: rows.map(toAttempt) };
  }

  /**
   * Queues one event, or every event of a time range, for the endpoint again (events the
   * endpoint subscribes to): an existing delivery is made due now, a missing one is created.
   */
  async redeliver(auth: AuthContext, id: string, input: { eventId?: string; from?: string; to?: string }) {
    const endpoint = await this.find(this.pool, auth, id);
    if ((input.eventId === undefined) === (input.from === undefined)) {
      throw new ValidationError([
        { path: '/eventId', message: 'send eventId, or from (and optionally to)', location: 'body' },
      ]);
    }
    const at = this.clock.now();
    const from = input.from === undefined ? null : new Date(input.from);
    // Without `to`, up to and including now.
    const to = input.to === undefined ? new Date(at.getTime() + 1) : new Date(input.to);
    if (from !== null && (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()) || from > to))
      throw new ValidationError([
        { path: '/from', message: 'must be a date-time before to', location: 'body' },
      ]);
    const { rows } = await this.pool.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT 'whd_' || substr(md5(o.id || $1), 1, 26), o.id, $1, 'pending', 0, $2, $2, $2
         FROM outbox_events o
        WHERE o.provider_id = $3 AND o.environment = $4
          AND ($5::text IS NULL OR o.id = $5)
          AND ($6::timestamptz IS NULL OR (o.created_at >= $6 AND o.created_at < $7))
          AND (cardinality($8::text[]) = 0 OR o.type = ANY($8))
       ON CONFLICT (id) DO UPDATE SET status = 'pending', next_attempt_at = $2, locked_until = NULL, updated_at = $2
       RETURNING id`,
      [
        endpoint.id,
        at,
        auth.providerId,
        auth.environment,
        input.eventId ?? null,
        from,
        to,
        endpoint.enabled_events,
      ],
    );
    if (input.eventId !== undefined && rows.length === 0)
      throw new NotFoundError('event_not_found', `No event ${input.eventId} this endpoint subscribes to`);
    return { endpointId: endpoint.id, queued: rows.length };
  }
}
