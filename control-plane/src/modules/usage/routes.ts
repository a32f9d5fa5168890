import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import {
  AcceptedBulk,
  AcceptedRecord,
  CustomerQuery,
  CustomerUsage,
  DailyQuery,
  DailyStats,
  MeterEventBulk,
  MeterEventCreate,
  MeterParams,
  UsageCreate,
  UsageQuery,
  UsageTotal,
} from './schemas';
import { accepted, type UsageService } from './service';

export function usageRoutes(usage: UsageService) {
  return async (app: App) => {
    const tags = ['usage'];
    const writeErrors = { 409: Problem, 503: Problem, ...errorResponses };
    app.post(
      '/v1/sdk/meter-events',
      {
        schema: {
          tags,
          summary: 'Record one usage event (answered once the event is durably queued)',
          body: MeterEventCreate,
          response: { 202: AcceptedRecord, ...writeErrors },
        },
      },
      async (request, reply) =>
        reply.status(202).send(accepted(await usage.record(authOf(request), request.body))),
    );
    app.post(
      '/v1/sdk/meter-events/bulk',
      {
        schema: {
          tags,
          summary: 'Record up to 1000 usage events at once; all are accepted or none',
          body: MeterEventBulk,
          response: { 202: AcceptedBulk, 413: Problem, ...writeErrors },
        },
      },
      async (request, reply) => reply.status(202).send(await usage.recordBulk(authOf(request), request.body)),
    );
    app.post(
      '/v1/sdk/usages',
      {
        schema: {
          tags,
          summary: "Record a generic usage event on the product's requests meter",
          body: UsageCreate,
          response: { 202: AcceptedRecord, ...writeErrors },
        },
      },
      async (request, reply) =>
        reply.status(202).send(accepted(await usage.recordUsage(authOf(request), request.body))),
    );
    app.get(
      '/ui/meters/:meterRef/usage',
      {
        schema: {
          tags,
          summary: 'Usage of a meter in a time range, optionally in UTC buckets',
          params: MeterParams,
          querystring: UsageQuery,
          response: { 200: UsageTotal, 503: Problem, ...errorResponses },
        },
      },
      async (request) => usage.total(authOf(request), request.params.meterRef, request.query),
    );
    app.get(
      '/ui/meters/:meterRef/customers',
      {
        schema: {
          tags,
          summary: 'Usage of a meter by customer, largest first (default: last 30 days)',
          params: MeterParams,
          querystring: CustomerQuery,
          response: { 200: CustomerUsage, 503: Problem, ...errorResponses },
        },
      },
      async (request) => usage.byCustomer(authOf(request), request.params.meterRef, request.query),
    );
    app.get(
      '/ui/analytics/daily',
      {
        schema: {
          tags,
          summary: 'Usage records, customers and meters per UTC day (default: last 30 days)',
          querystring: DailyQuery,
          response: { 200: DailyStats, 503: Problem, ...errorResponses },
        },
      },
      async (request) => usage.daily(authOf(request), request.query),
    );
  };
}
