import { DomainError, ValidationError } from '../../errors';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import type { StripeEvents } from './events';
import {
  ReconciliationQuery,
  ReconciliationReport,
  StripeConnect,
  StripeConnection,
  StripeWebhookParams,
  StripeWebhookReceipt,
} from './schemas';
import type { ProcessorService } from './service';

/** The provider's Stripe connection (live key only). */
export function processorRoutes(processors: ProcessorService) {
  return async (app: App) => {
    const tags = ['payments'];
    const responses = { 200: StripeConnection, 403: Problem, 503: Problem, ...errorResponses };
    app.put(
      '/v1/ui/processors/stripe',
      {
        schema: {
          tags,
          summary: "Connect the provider's Stripe account for live payments (keys are write-only)",
          body: StripeConnect,
          response: responses,
        },
      },
      async (request) => processors.connectStripe(authOf(request), request.body),
    );
    app.get(
      '/v1/ui/processors/stripe',
      {
        schema: {
          tags,
          summary: 'Whether Stripe is connected, and the last 4 of its key',
          response: responses,
        },
      },
      async (request) => processors.showStripe(authOf(request)),
    );
    app.get(
      '/v1/ui/processors/stripe/reconciliation',
      {
        schema: {
          tags,
          summary:
            "Our ledger against Stripe's balance transactions for a window: differences, never corrected",
          querystring: ReconciliationQuery,
          response: {
            200: ReconciliationReport,
            403: Problem,
            409: Problem,
            503: Problem,
            ...errorResponses,
          },
        },
      },
      async (request) => {
        const auth = authOf(request);
        if (auth.environment !== 'live')
          throw new DomainError(
            'forbidden',
            'Reconciliation reads the live Stripe account; use the live key',
          );
        const from = new Date(request.query.from);
        const to = new Date(request.query.to);
        const span = to.getTime() - from.getTime();
        if (!(span > 0 && span <= 93 * 86_400_000))
          throw new ValidationError([
            { path: '/to', message: 'must be after from, by at most 93 days', location: 'querystring' },
          ]);
        return processors.reconcile(auth.providerId, { from, to });
      },
    );
    app.delete(
      '/v1/ui/processors/stripe',
      { schema: { tags, summary: 'Disconnect Stripe: live card payments stop', response: responses } },
      async (request) => processors.disconnectStripe(authOf(request)),
    );
  };
}

/**
 * Stripe's events in, signed with the provider's webhook signing secret. The body is kept as the
 * bytes Stripe sent: the signature covers them, not a re-serialisation.
 */
export function stripeWebhookRoutes(events: StripeEvents) {
  return async (app: App) => {
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) =>
      done(null, body),
    );
    app.post(
      '/v1/processors/stripe/webhooks/:providerId',
      {
        schema: {
          tags: ['payments'],
          summary: "Stripe's events for a connected provider (Stripe-Signature verified)",
          security: [],
          params: StripeWebhookParams,
          response: { 200: StripeWebhookReceipt, ...errorResponses },
        },
      },
      async (request) => {
        const signature = request.headers['stripe-signature'];
        return events.receive(
          request.params.providerId,
          request.body as Buffer,
          Array.isArray(signature) ? signature[0] : signature,
        );
      },
    );
  };
}
