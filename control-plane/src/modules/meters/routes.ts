import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, ListQuery, Problem, stringEnum } from '../../http/schemas';
import { Meter, MeterCreate, MeterPage, MeterParams } from './schemas';
import type { MeterService } from './service';

export function meterRoutes(meters: MeterService) {
  return async (app: App) => {
    const tags = ['meters'];
    app.post(
      '/v1/ui/meters',
      {
        schema: {
          tags,
          summary: 'Create a meter',
          body: MeterCreate,
          response: { 201: Meter, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(201).send(await meters.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/ui/meters',
      {
        schema: {
          tags,
          summary: 'List meters',
          querystring: Type.Composite(
            [ListQuery, Type.Object({ status: Type.Optional(stringEnum(['active', 'archived'] as const)) })],
            {
              additionalProperties: false,
            },
          ),
          response: { 200: MeterPage, ...errorResponses },
        },
      },
      async (request) => meters.list(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/meters/:meterRef',
      {
        schema: {
          tags,
          summary: 'Get a meter by id or name',
          params: MeterParams,
          response: { 200: Meter, ...errorResponses },
        },
      },
      async (request) => meters.get(authOf(request), request.params.meterRef),
    );
    app.post(
      '/v1/ui/meters/:meterRef/archive',
      {
        schema: {
          tags,
          summary: 'Archive a meter (history stays queryable; new records are refused)',
          params: MeterParams,
          response: { 200: Meter, 409: Problem, ...errorResponses },
        },
      },
      async (request) => meters.archive(authOf(request), request.params.meterRef),
    );
  };
}
