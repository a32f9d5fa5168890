import { randomBytes } from 'node:crypto';
import type { OutboundGuard } from '@mcp-meter/contracts/kit';
import { ID, newId } from '@mcp-meter/contracts/kit';
import { seal, unseal } from '@mcp-meter/contracts/snapshots';
import { signatureHeader } from '@mcp-meter/sdk/webhooks';
import type { Clock } from '../../clock';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import { NotFoundError, ValidationError } from '../../errors';
import type { AuthContext } from '../../tenancy';
import { API_VERSION, unixSeconds } from '../events/outbox';
import { EVENT_TYPE_SET } from './catalog';
import {
  type AttemptRow,
  deleteEndpoint,
  type EndpointRow,
  expireSecrets,
  findEndpoint,
  insertAttempt,
  insertEndpoint,
  insertSecret,
  listAttempts,
  listEndpoints,
  liveSecrets,
  queueRedeliveries,
  setEndpointStatus,
  updateEndpoint,
} from './repository';
import type { SendResult, WebhookSender } from './sender';

export type { AttemptRow, EndpointRow };

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
      const created = await insertEndpoint(tx, {
        id: newId(ID.webhookEndpoint),
        tenant: auth,
        url,
        description: input.description ?? null,
        events,
        at,
      });
      await insertSecret(tx, newId(ID.webhookSecret), created.id, seal(this.secretKey, secret), at);
      return created;
    });
    return { ...toEndpoint(row), secret };
  }

  async find(db: Queryable, auth: AuthContext, id: string, forUpdate = false): Promise<EndpointRow> {
    const row = await findEndpoint(db, auth, id, forUpdate);
    if (row === undefined) throw new NotFoundError('webhook_endpoint_not_found', `No webhook endpoint ${id}`);
    return row;
  }

  async get(auth: AuthContext, id: string) {
    return toEndpoint(await this.find(this.pool, auth, id));
  }

  async list(auth: AuthContext) {
    return { data: (await listEndpoints(this.pool, auth)).map(toEndpoint) };
  }

  async update(
    auth: AuthContext,
    id: string,
    patch: { url?: string; enabledEvents?: string[]; description?: string | null },
  ) {
    const url = patch.url === undefined ? undefined : await this.checkUrl(auth, patch.url);
    const events = patch.enabledEvents === undefined ? undefined : this.checkEvents(patch.enabledEvents);
    const current = await this.find(this.pool, auth, id);
    return toEndpoint(
      await updateEndpoint(this.pool, current.id, {
        url: url ?? current.url,
        events: events ?? current.enabled_events,
        description: patch.description === undefined ? current.description : patch.description,
        at: this.clock.now(),
      }),
    );
  }

  /** Deleted endpoints get nothing more; their pending deliveries are dropped with them. */
  async delete(auth: AuthContext, id: string) {
    const current = await this.find(this.pool, auth, id);
    const at = this.clock.now();
    await inTransaction(this.pool, async (tx) => {
      await deleteEndpoint(tx, current.id, at);
    });
    return { id: current.id, deleted: true as const };
  }

  async setEnabled(auth: AuthContext, id: string, enabled: boolean) {
    const current = await this.find(this.pool, auth, id);
    return toEndpoint(
      await setEndpointStatus(this.pool, current.id, {
        status: enabled ? 'enabled' : 'disabled',
        reason: enabled ? null : 'disabled by the provider',
        at: this.clock.now(),
      }),
    );
  }

  /** A new secret signs from now on; the old ones keep signing alongside until the overlap ends. */
  async rotateSecret(auth: AuthContext, id: string, overlapSeconds = ROTATION_OVERLAP_SECONDS) {
    const current = await this.find(this.pool, auth, id);
    const secret = this.newSecret();
    const at = this.clock.now();
    const overlapEnds = new Date(at.getTime() + overlapSeconds * 1000);
    await inTransaction(this.pool, async (tx) => {
      await expireSecrets(tx, current.id, overlapEnds);
      await insertSecret(tx, newId(ID.webhookSecret), current.id, seal(this.secretKey, secret), at);
    });
    return { id: current.id, secret, previousSecretsExpireAt: overlapEnds.toISOString() };
  }

  /** Every secret that signs right now, newest first. */
  async signingSecrets(db: Queryable, endpointId: string): Promise<string[]> {
    return (await liveSecrets(db, endpointId, this.clock.now())).map((sealed) =>
      unseal(this.secretKey, sealed),
    );
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
    return insertAttempt(db, {
      id: a.attemptId,
      delivery_id: a.deliveryId,
      endpoint_id: a.endpointId,
      event_id: a.eventId,
      event_type: a.eventType,
      attempt: a.attempt,
      succeeded: a.result.ok,
      status_code: a.result.statusCode,
      latency_ms: a.result.latencyMs,
      error: a.result.error,
      response_excerpt: a.result.responseExcerpt,
      next_attempt_at: a.nextAttemptAt,
      created_at: this.clock.now(),
    });
  }

  /** The attempt log, newest first, for one endpoint and optionally one event. */
  async attempts(auth: AuthContext, query: { endpointId?: string; eventId?: string; limit: number }) {
    if (query.endpointId !== undefined) await this.find(this.pool, auth, query.endpointId);
    const rows = await listAttempts(this.pool, auth, {
      endpointId: query.endpointId ?? null,
      eventId: query.eventId ?? null,
      limit: query.limit,
    });
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
    const rows = await queueRedeliveries(this.pool, auth, {
      endpointId: endpoint.id,
      at,
      eventId: input.eventId ?? null,
      from,
      to,
      events: endpoint.enabled_events,
    });
    if (input.eventId !== undefined && rows.length === 0)
      throw new NotFoundError('event_not_found', `No event ${input.eventId} this endpoint subscribes to`);
    return { endpointId: endpoint.id, queued: rows.length };
  }
}
