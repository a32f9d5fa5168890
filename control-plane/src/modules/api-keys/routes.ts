import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { ApiKeyList, CreateBody, CreatedApiKey, KeyParams, RollBody, RolledApiKey } from './schemas';
import type { ApiKeyService } from './service';

/** The environment's secret keys, for console members (developers, admins, owners). */
export function apiKeyRoutes(keys: ApiKeyService) {
  return async (app: App) => {
    const tags = ['console'];
    app.get(
      '/v1/ui/api-keys',
      {
        schema: {
          tags,
          summary: 'The secret keys of this environment that open the API',
          response: { 200: ApiKeyList, ...errorResponses },
        },
      },
      async (request) => keys.list(authOf(request)),
    );
    app.post(
      '/v1/ui/api-keys',
      {
        schema: {
          tags,
          summary: 'Create a secret key in this environment (its secret is answered once)',
          body: CreateBody,
          response: { 201: CreatedApiKey, 403: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(201).send(await keys.create(authOf(request), request.body)),
    );
    app.post(
      '/v1/ui/api-keys/:id/roll',
      {
        schema: {
          tags,
          summary: 'Roll a secret key: a new secret now, the old one working for the overlap asked',
          params: KeyParams,
          body: RollBody,
          response: { 201: RolledApiKey, 403: Problem, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply
          .status(201)
          .send(await keys.roll(authOf(request), request.params.id, request.body.overlapSeconds)),
    );
    app.delete(
      '/v1/ui/api-keys/:id',
      {
        schema: {
          tags,
          summary: 'Revoke a secret key: it stops working at once',
          params: KeyParams,
          response: {
            200: Type.Object({ id: Type.String(), revoked: Type.Literal(true) }),
            403: Problem,
            ...errorResponses,
          },
        },
      },
      async (request) => keys.revoke(authOf(request), request.params.id),
    );
  };
}
