import { type App, authOf } from '../../http/app';
import { errorResponses, ListQuery, Problem } from '../../http/schemas';
import { CustomerParams } from '../customers/schemas';
import {
  Balance,
  CreditMovement,
  CreditMovementCreate,
  CreditPage,
  Settings,
  SettingsUpdate,
} from './schemas';
import type { CreditService } from './service';

export function creditRoutes(credits: CreditService) {
  return async (app: App) => {
    const tags = ['credits'];
    app.get(
      '/v1/sdk/customers/:ref/balance',
      {
        schema: {
          tags,
          summary: "A customer's credit balance",
          params: CustomerParams,
          response: { 200: Balance, ...errorResponses },
        },
      },
      async (request) => credits.balance(authOf(request), request.params.ref),
    );
    app.get(
      '/v1/sdk/customers/:ref/credits',
      {
        schema: {
          tags,
          summary: "A customer's credit movements, newest first",
          params: CustomerParams,
          querystring: ListQuery,
          response: { 200: CreditPage, ...errorResponses },
        },
      },
      async (request) => credits.list(authOf(request), request.params.ref, request.query),
    );
    app.post(
      '/v1/sdk/customers/:ref/credits',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags,
          summary: 'Top up, grant, debit or adjust credits (Idempotency-Key required for top-ups)',
          params: CustomerParams,
          body: CreditMovementCreate,
          response: {
            201: CreditMovement,
            200: CreditMovement,
            409: Problem,
            422: Problem,
            ...errorResponses,
          },
        },
      },
      async (request, reply) => {
        const { movement, replayed } = await credits.move(
          authOf(request),
          request.params.ref,
          request.body,
          request.idempotencyKey,
        );
        return reply.status(replayed ? 200 : 201).send(movement);
      },
    );
    app.get(
      '/v1/ui/settings',
      {
        schema: {
          tags: ['settings'],
          summary: 'Provider settings',
          response: { 200: Settings, ...errorResponses },
        },
      },
      async (request) => credits.settings(authOf(request)),
    );
    app.patch(
      '/v1/ui/settings',
      {
        schema: {
          tags: ['settings'],
          summary: 'Change provider settings',
          body: SettingsUpdate,
          response: { 200: Settings, ...errorResponses },
        },
      },
      async (request) => credits.updateSettings(authOf(request), request.body),
    );
  };
}
