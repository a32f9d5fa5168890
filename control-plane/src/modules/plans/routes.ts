import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, ListQuery, Problem } from '../../http/schemas';
import { ProductParams } from '../products/schemas';
import { Plan, PlanCreate, PlanPage, PlanParams, PlanUpdate } from './schemas';
import type { PlanService } from './service';

export function planRoutes(plans: PlanService) {
  return async (app: App) => {
    const tags = ['plans'];
    app.post(
      '/v1/ui/products/:id/plans',
      {
        schema: {
          tags,
          summary: 'Create a plan of a product',
          params: ProductParams,
          body: PlanCreate,
          response: { 201: Plan, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply.status(201).send(await plans.create(authOf(request), request.params.id, request.body)),
    );
    app.get(
      '/v1/ui/products/:id/plans',
      {
        schema: {
          tags,
          summary: 'List the plans of a product',
          params: ProductParams,
          querystring: Type.Composite(
            [
              ListQuery,
              Type.Object({
                status: Type.Optional(
                  Type.Union([Type.Literal('active'), Type.Literal('inactive'), Type.Literal('archived')]),
                ),
              }),
            ],
            { additionalProperties: false },
          ),
          response: { 200: PlanPage, ...errorResponses },
        },
      },
      async (request) => plans.listForProduct(authOf(request), request.params.id, request.query),
    );
    app.get(
      '/v1/ui/plans/:planRef',
      {
        schema: {
          tags,
          summary: 'Get a plan',
          params: PlanParams,
          response: { 200: Plan, ...errorResponses },
        },
      },
      async (request) => plans.get(authOf(request), request.params.planRef),
    );
    app.patch(
      '/v1/ui/plans/:planRef',
      {
        schema: {
          tags,
          summary: 'Update a plan (type and currency cannot change)',
          params: PlanParams,
          body: PlanUpdate,
          response: { 200: Plan, 409: Problem, ...errorResponses },
        },
      },
      async (request) => plans.update(authOf(request), request.params.planRef, request.body),
    );
    app.post(
      '/v1/ui/plans/:planRef/archive',
      {
        schema: {
          tags,
          summary: 'Archive a plan',
          params: PlanParams,
          response: { 200: Plan, ...errorResponses },
        },
      },
      async (request) => plans.archive(authOf(request), request.params.planRef),
    );
  };
}
