import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import {
  ActivateBody,
  ActivatePreviewBody,
  ActivationResult,
  CancelBody,
  CancelResult,
  ChangePreview,
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
    app.post(
      '/v1/sdk/activate/preview',
      {
        schema: {
          tags,
          summary: 'Preview a plan switch: the first invoice, the unused time credited, what is refunded',
          body: ActivatePreviewBody,
          response: { 200: ChangePreview, 409: Problem, ...errorResponses },
        },
      },
      async (request) => purchases.changes.previewActivation(authOf(request), request.body),
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
          summary: 'Cancel now (with prorate, refunding unused time), or at period end with atPeriodEnd',
          params: PurchaseParams,
          body: CancelBody,
          response: { 200: CancelResult, 409: Problem, 422: Problem, ...errorResponses },
        },
      },
      async (request) => purchases.cancel(authOf(request), request.params.ref, request.body),
    );
    app.post(
      '/v1/sdk/purchases/:ref/cancel/preview',
      {
        schema: {
          tags,
          summary: 'Preview cancelling now with prorate: the unused paid time refunded',
          params: PurchaseParams,
          response: { 200: ChangePreview, 409: Problem, ...errorResponses },
        },
      },
      async (request) => purchases.changes.previewCancellation(authOf(request), request.params.ref),
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
