import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Nullable, Problem, stringEnum, Timestamp } from '../../http/schemas';
import { eventTypeList } from './catalog';
import type { WebhookService } from './service';

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: 'Where events are POSTed (https in live mode)',
});
const Events = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  maxItems: 100,
  description: 'Event types to receive; empty or omitted: all, including types added later',
});
const Description = Type.String({ maxLength: 500 });

const Endpoint = Type.Object({
  id: Type.String(),
  url: Type.String(),
  description: Nullable(Type.String()),
  enabledEvents: Type.Array(Type.String()),
  status: stringEnum(['enabled', 'disabled'] as const),
  disabledReason: Nullable(Type.String()),
  consecutiveFailures: Type.Integer(),
  livemode: Type.Boolean(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
const Attempt = Type.Object({
  id: Type.String({ description: 'The SV-Delivery header of the attempt (dlv_…)' }),
  deliveryId: Nullable(Type.String()),
  endpointId: Type.String(),
  eventId: Type.String(),
  eventType: Type.String(),
  attempt: Type.Integer(),
  succeeded: Type.Boolean(),
  statusCode: Nullable(Type.Integer()),
  latencyMs: Type.Integer(),
  error: Nullable(Type.String()),
  responseExcerpt: Nullable(Type.String()),
  nextAttemptAt: Nullable(Timestamp),
  createdAt: Timestamp,
});
const Params = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
const TestParams = Type.Object({ endpointId: Type.String({ minLength: 1, maxLength: 100 }) });

export function webhookRoutes(webhooks: WebhookService) {
  return async (app: App) => {
    const tags = ['webhooks'];
    app.get(
      '/v1/sdk/webhooks/event-types',
      {
        schema: {
          tags,
          summary: 'The event types webhooks carry, with their group',
          response: {
            200: Type.Object({
              data: Type.Array(
                Type.Object({ type: Type.String(), group: Type.String(), description: Type.String() }),
              ),
            }),
            ...errorResponses,
          },
        },
      },
      async () => ({ data: eventTypeList() }),
    );
    app.post(
      '/v1/webhook_endpoints',
      {
        schema: {
          tags,
          summary: 'Register an endpoint; its whsec_ signing secret is answered only now',
          body: Type.Object(
            { url: Url, enabledEvents: Type.Optional(Events), description: Type.Optional(Description) },
            { additionalProperties: false },
          ),
          response: {
            201: Type.Intersect([Endpoint, Type.Object({ secret: Type.String() })]),
            ...errorResponses,
          },
        },
      },
      async (request, reply) => reply.status(201).send(await webhooks.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/webhook_endpoints',
      {
        schema: {
          tags,
          summary: 'List endpoints',
          response: { 200: Type.Object({ data: Type.Array(Endpoint) }), ...errorResponses },
        },
      },
      async (request) => webhooks.list(authOf(request)),
    );
    app.get(
      '/v1/webhook_endpoints/:id',
      {
        schema: {
          tags,
          summary: 'Get an endpoint',
          params: Params,
          response: { 200: Endpoint, ...errorResponses },
        },
      },
      async (request) => webhooks.get(authOf(request), request.params.id),
    );
    app.patch(
      '/v1/webhook_endpoints/:id',
      {
        schema: {
          tags,
          summary: 'Change the URL, event types or description',
          params: Params,
          body: Type.Object(
            {
              url: Type.Optional(Url),
              enabledEvents: Type.Optional(Events),
              description: Type.Optional(Nullable(Description)),
            },
            { additionalProperties: false, minProperties: 1 },
          ),
          response: { 200: Endpoint, ...errorResponses },
        },
      },
      async (request) => webhooks.update(authOf(request), request.params.id, request.body),
    );
    app.delete(
      '/v1/webhook_endpoints/:id',
      {
        schema: {
          tags,
          summary: 'Delete an endpoint (its pending deliveries are dropped)',
          params: Params,
          response: {
            200: Type.Object({ id: Type.String(), deleted: Type.Literal(true) }),
            ...errorResponses,
          },
        },
      },
      async (request) => webhooks.delete(authOf(request), request.params.id),
    );
    for (const [action, enabled] of [
      ['disable', false],
      ['enable', true],
    ] as const) {
      app.post(
        `/v1/webhook_endpoints/:id/${action}`,
        {
          schema: {
            tags,
            summary: enabled
              ? 'Re-enable an endpoint: its pending deliveries resume and the failure count restarts'
              : 'Disable an endpoint: nothing is sent until it is enabled again',
            params: Params,
            response: { 200: Endpoint, ...errorResponses },
          },
        },
        async (request) => webhooks.setEnabled(authOf(request), request.params.id, enabled),
      );
    }
    app.post(
      '/v1/webhook_endpoints/:id/rotate-secret',
      {
        schema: {
          tags,
          summary: 'New signing secret; the old one keeps signing alongside during the overlap',
          params: Params,
          body: Type.Optional(
            Type.Object(
              {
                overlapSeconds: Type.Optional(
                  Type.Integer({ minimum: 0, maximum: 7 * 86400, default: 86400 }),
                ),
              },
              { additionalProperties: false },
            ),
          ),
          response: {
            200: Type.Object({
              id: Type.String(),
              secret: Type.String(),
              previousSecretsExpireAt: Timestamp,
            }),
            ...errorResponses,
          },
        },
      },
      async (request) =>
        webhooks.rotateSecret(authOf(request), request.params.id, request.body?.overlapSeconds),
    );
    app.post(
      '/v1/webhook_endpoints/:id/redeliver',
      {
        schema: {
          tags,
          summary: 'Send one event, or every event of a time range, to the endpoint again',
          params: Params,
          body: Type.Object(
            {
              eventId: Type.Optional(Type.String({ maxLength: 100 })),
              from: Type.Optional(Type.String({ format: 'date-time' })),
              to: Type.Optional(Type.String({ format: 'date-time' })),
            },
            { additionalProperties: false },
          ),
          response: {
            202: Type.Object({ endpointId: Type.String(), queued: Type.Integer() }),
            ...errorResponses,
          },
        },
      },
      async (request, reply) =>
        reply.status(202).send(await webhooks.redeliver(authOf(request), request.params.id, request.body)),
    );
    app.get(
      '/v1/webhook_attempts',
      {
        schema: {
          tags,
          summary: 'The attempt log (status, latency, error, response excerpt), newest first',
          querystring: Type.Object(
            {
              endpointId: Type.Optional(Type.String({ maxLength: 100 })),
              eventId: Type.Optional(Type.String({ maxLength: 100 })),
              limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
            },
            { additionalProperties: false },
          ),
          response: { 200: Type.Object({ data: Type.Array(Attempt) }), ...errorResponses },
        },
      },
      async (request) => webhooks.attempts(authOf(request), request.query),
    );
    app.post(
      '/v1/ui/webhooks/:endpointId/test',
      {
        schema: {
          tags,
          summary: 'Send a payment.succeeded test event now and answer with the attempt',
          params: TestParams,
          response: { 200: Attempt, 502: Problem, ...errorResponses },
        },
      },
      async (request) => webhooks.sendTest(authOf(request), request.params.endpointId),
    );
  };
}
