import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import {
  ActivateBody,
  ActivationResult,
  CancelBody,
  Purchase,
  PurchaseListQuery,
  PurchasePage,
  PurchaseParams,
} from './schemas';
import type { PurchaseService } from './service';

export function purchaseRoutes(purchases: PurchaseService) {
  return async (app: App) => {
    const tags = ['purchases'];
    app.post(
      '/v1/sdk/activate',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags,
          summary: 'Activate a plan for a customer (switches plans within a product)',
          body: ActivateBody,
          response: { 200: ActivationResult, 409: Problem, 422: Problem, ...errorResponses },
        },
      },
      async (request) => purchases.activate(authOf(request), request.body),
    );
    app.get(
      '/v1/sdk/purchases',
      {
        schema: {
          tags,
          summary: 'List purchases',
          querystring: PurchaseListQuery,
          response: { 200: PurchasePage, ...errorResponses },
        },
      },
      async (request) => purchases.list(authOf(request), request.query),
    );
    app.get(
      '/v1/sdk/purchases/:ref',
      {
        schema: {
          tags,
          summary: 'Get a purchase',
          params: PurchaseParams,
          response: { 200: Purchase, ...errorResponses },
        },
      },
      async (request) => purchases.get(authOf(request), request.params.ref),
    );
    app.post(
      '/v1/sdk/purchases/:ref/cancel',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags,
          summary: 'Cancel now, or at the end of the period with atPeriodEnd',
          params: PurchaseParams,
          body: CancelBody,
          response: { 200: Purchase, 409: Problem, 422: Problem, ...errorResponses },
        },
      },
      async (request) =>
        purchases.cancel(authOf(request), request.params.ref, request.body.atPeriodEnd ?? false),
    );
    app.post(
      '/v1/sdk/purchases/:ref/reactivate',
      {
        config: { idempotency: 'optional' },
        schema: {
          tags,
          summary: 'Undo a scheduled cancellation',
          params: PurchaseParams,
          response: { 200: Purchase, 409: Problem, 422: Problem, ...errorResponses },
        },
      },
      async (request) => purchases.reactivate(authOf(request), request.params.ref),
    );
  };
}
