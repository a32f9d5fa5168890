import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { Alert, AlertCreate, AlertList, AlertListQuery, AlertParams } from './schemas';
import type { AlertService } from './service';

export function alertRoutes(alerts: AlertService) {
  return async (app: App) => {
    const tags = ['alerts'];
    app.post(
      '/v1/sdk/alerts',
      {
        schema: {
          tags,
          summary: 'An alert on a plan’s customers or one customer: allowance used or credits low',
          body: AlertCreate,
          response: { 201: Alert, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.code(201).send(await alerts.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/sdk/alerts',
      {
        schema: {
          tags,
          summary: 'Alerts, of a plan or a customer',
          querystring: AlertListQuery,
          response: { 200: AlertList, ...errorResponses },
        },
      },
      async (request) => alerts.list(authOf(request), request.query),
    );
    app.delete(
      '/v1/sdk/alerts/:id',
      {
        schema: {
          tags,
          summary: 'Deletes an alert',
          params: AlertParams,
          response: {
            200: Type.Object({ id: Type.String(), deleted: Type.Literal(true) }),
            ...errorResponses,
          },
        },
      },
      async (request) => alerts.remove(authOf(request), request.params.id),
    );
  };
}
