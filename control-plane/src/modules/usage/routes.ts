import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { AcceptedRecord, MeterEventCreate, MeterParams, UsageQuery, UsageTotal } from './schemas';
import type { UsageService } from './service';

export function usageRoutes(usage: UsageService) {
  return async (app: App) => {
    const tags = ['usage'];
    app.post(
      '/v1/sdk/meter-events',
      {
        schema: {
          tags,
          summary: 'Record one usage event (answered once the event is durably queued)',
          body: MeterEventCreate,
          response: { 202: AcceptedRecord, 503: Problem, ...errorResponses },
        },
      },
      async (request, reply) => {
        const record = await usage.record(authOf(request), request.body);
        const { id, meterRef, meterName, customerRef, value, timestamp } = record;
        return reply.status(202).send({ id, meterRef, meterName, customerRef, value, timestamp });
      },
    );
    app.get(
      '/ui/meters/:meterRef/usage',
      {
        schema: {
          tags,
          summary: 'Total usage of a meter in a time range',
          params: MeterParams,
          querystring: UsageQuery,
          response: { 200: UsageTotal, 503: Problem, ...errorResponses },
        },
      },
      async (request) => usage.total(authOf(request), request.params.meterRef, request.query),
    );
  };
}
