import { sameSecret } from '@mcp-meter/contracts/kit';
import { Counter, EventLoopDelay, GcPauses, gauge, Histogram } from '@mcp-meter/contracts/metrics';
import type { FastifyInstance } from 'fastify';
import { sendProblem } from './error-handler';

/** The SDK's limit check: the control plane's own metered call, with a latency histogram of its own. */
const LIMIT_CHECK = { method: 'POST', path: '/v1/sdk/limits' };

/** What else the control plane's process puts on its page: its usage recorder's and ingest's families. */
export type MetricPart = () => string;

/**
 * The control plane's Prometheus page (GET /metrics): its requests by route and status, their
 * latency, the limit check's latency, the webhook worker's attempts, and what the process adds
 * (the limit check's usage recorder; the ingest consumer when it runs here). Routes are labelled
 * by their pattern (`/v1/ui/products/:id`), never the path asked for, so the series are bounded.
 */
export class ControlPlaneMetrics {
  private readonly loopDelay = new EventLoopDelay('mcpmeter_control_plane_event_loop_delay_seconds');
  private readonly gcPauses = new GcPauses('mcpmeter_control_plane_gc');
  private readonly requests = new Counter(
    'mcpmeter_control_plane_http_requests_total',
    'HTTP requests answered, by method, route pattern (unmatched: no route) and status code',
  );
  private readonly seconds = new Histogram(
    'mcpmeter_control_plane_request_seconds',
    'Time per request, arrival to the end of its answer, every route',
  );
  private readonly limitChecks = new Histogram(
    'mcpmeter_control_plane_limit_check_seconds',
    'Time per SDK limit check (POST /v1/sdk/limits), arrival to the end of its answer: the SLI of an SLO on it',
  );

  constructor(private readonly parts: readonly MetricPart[] = []) {}

  /**
   * Counts every answer of `app` (its hooks reach every route registered after this), and stops
   * sampling the event loop and the collector when it closes.
   */
  install(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url;
      const seconds = reply.elapsedTime / 1000;
      this.requests.inc({
        method: request.method,
        route: route ?? 'unmatched',
        status: String(reply.statusCode),
      });
      this.seconds.observe(seconds);
      if (route === LIMIT_CHECK.path && request.method === LIMIT_CHECK.method)
        this.limitChecks.observe(seconds);
      done();
    });
    app.addHook('onClose', (_app, done) => {
      this.close();
      done();
    });
  }

  /**
   * `GET /metrics`, behind `Authorization: Bearer <token>` when a token is set. The webhook
   * backlog is read from PostgreSQL at each scrape; while it cannot be, the page goes without it.
   */
  routes(token: string | undefined, webhooks: () => WebhookCounts, backlog: () => Promise<WebhookBacklog>) {
    const expected = token === undefined ? undefined : `Bearer ${token}`;
    return async (app: FastifyInstance) => {
      app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
        if (expected !== undefined && !sameSecret(request.headers.authorization ?? '', expected))
          return sendProblem(reply, 'unauthorized', 'A metrics token is required (METRICS_TOKEN)');
        const due = await backlog().catch((error: unknown) => {
          request.log.warn({ err: error }, 'webhook backlog not read for the metrics page');
          return undefined;
        });
        return reply.type('text/plain; version=0.0.4').send(this.render(webhooks(), due));
      });
    };
  }

  render(webhooks: WebhookCounts, backlog?: WebhookBacklog): string {
    const attempts = new Counter(
      'mcpmeter_webhook_attempts_total',
      'Webhook delivery attempts sent by this process, by result (delivered: a 2xx; failed: anything else, retried on schedule)',
    );
    attempts.inc({ result: 'delivered' }, webhooks.delivered);
    attempts.inc({ result: 'failed' }, webhooks.sent - webhooks.delivered);
    return [
      this.requests.render(),
      this.seconds.render(),
      this.limitChecks.render(),
      attempts.render(),
      gauge(
        'mcpmeter_webhook_attempts_in_flight',
        'Webhook attempts waiting for their endpoint',
        webhooks.inFlight,
      ),
      backlog === undefined
        ? ''
        : gauge(
            'mcpmeter_webhook_deliveries_due',
            'Webhook deliveries due now to enabled endpoints, not yet sent, counted up to 10000 (the whole deployment: every control plane reports the same figure)',
            backlog.due,
          ) +
          gauge(
            'mcpmeter_webhook_oldest_due_seconds',
            'How long the oldest due webhook delivery has waited (0: none due; the whole deployment)',
            backlog.oldestDueSeconds,
          ),
      ...this.parts.map((part) => part()),
      this.loopDelay.render(),
      this.gcPauses.render(),
    ].join('');
  }

  close(): void {
    this.loopDelay.close();
    this.gcPauses.close();
  }
}

/** The webhook deliveries due now, from PostgreSQL. */
export interface WebhookBacklog {
  due: number;
  oldestDueSeconds: number;
}

/** The webhook worker's counts, read at each scrape. */
export interface WebhookCounts {
  sent: number;
  delivered: number;
  inFlight: number;
}
