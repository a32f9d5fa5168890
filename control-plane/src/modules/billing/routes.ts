import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { UpcomingInvoice, UpcomingQuery } from './schemas';
import type { BillingService } from './service';

export function billingRoutes(billing: BillingService) {
  return async (app: App) => {
    app.get(
      '/v1/sdk/invoices/upcoming',
      {
        schema: {
          tags: ['billing'],
          summary: "Preview the usage charge of a purchase's current period, priced by its plan, as of now",
          querystring: UpcomingQuery,
          response: { 200: UpcomingInvoice, 503: Problem, ...errorResponses },
        },
      },
      async (request) => billing.upcoming(authOf(request), request.query.purchaseRef),
    );
  };
}
