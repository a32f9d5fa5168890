import { type App, authOf, sandboxAuthOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { Payout, PayoutListQuery, PayoutPage, PayoutParams, SandboxPayoutBody } from './schemas';
import type { PayoutService } from './service';

export function payoutRoutes(payouts: PayoutService) {
  return async (app: App) => {
    const tags = ['payouts'];
    app.get(
      '/v1/ui/payouts',
      {
        schema: {
          tags,
          summary: 'List payouts',
          querystring: PayoutListQuery,
          response: { 200: PayoutPage, ...errorResponses },
        },
      },
      async (request) => payouts.list(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/payouts/:id',
      {
        schema: {
          tags,
          summary: 'Get a payout',
          params: PayoutParams,
          response: { 200: Payout, ...errorResponses },
        },
      },
      async (request) => payouts.get(authOf(request), request.params.id),
    );
    app.post(
      '/v1/sdk/sandbox/payouts',
      {
        schema: {
          tags,
          summary: 'Sandbox: pay out the balance now (it arrives after the payout delay, or fails if asked)',
          body: SandboxPayoutBody,
          response: { 201: Payout, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply.status(201).send(await payouts.create(sandboxAuthOf(request), request.body)),
    );
  };
}
