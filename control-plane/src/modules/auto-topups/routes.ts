import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { CustomerParams } from '../customers/schemas';
import { AutoTopUp, AutoTopUpUpdate } from './schemas';
import type { AutoTopUps } from './service';

export function autoTopUpRoutes(autoTopUps: AutoTopUps) {
  return async (app: App) => {
    const tags = ['credits'];
    app.get(
      '/v1/sdk/customers/:ref/auto-top-up',
      {
        schema: {
          tags,
          summary: "A customer's auto top-up",
          params: CustomerParams,
          response: { 200: AutoTopUp, ...errorResponses },
        },
      },
      async (request) => autoTopUps.get(authOf(request), request.params.ref),
    );
    app.put(
      '/v1/sdk/customers/:ref/auto-top-up',
      {
        schema: {
          tags,
          summary: "Sets a customer's auto top-up: a threshold and the packs each top-up buys",
          params: CustomerParams,
          body: AutoTopUpUpdate,
          response: { 200: AutoTopUp, ...errorResponses },
        },
      },
      async (request) => autoTopUps.set(authOf(request), request.params.ref, request.body),
    );
    app.delete(
      '/v1/sdk/customers/:ref/auto-top-up',
      {
        schema: {
          tags,
          summary: "Turns a customer's auto top-up off",
          params: CustomerParams,
          response: {
            200: Type.Object({ customerRef: Type.String(), deleted: Type.Literal(true) }),
            ...errorResponses,
          },
        },
      },
      async (request) => autoTopUps.remove(authOf(request), request.params.ref),
    );
  };
}
