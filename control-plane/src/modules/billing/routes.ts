import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import {
  Invoice,
  InvoiceListQuery,
  InvoicePage,
  InvoiceParams,
  UpcomingInvoice,
  UpcomingQuery,
} from './schemas';
import type { BillingService } from './service';

export function billingRoutes(billing: BillingService) {
  return async (app: App) => {
    const tags = ['billing'];
    app.get(
      '/v1/sdk/invoices/upcoming',
      {
        schema: {
          tags,
          summary: "Preview the usage charge of a purchase's current period, priced by its plan, as of now",
          querystring: UpcomingQuery,
          response: { 200: UpcomingInvoice, 503: Problem, ...errorResponses },
        },
      },
      async (request) => billing.upcoming(authOf(request), request.query.purchaseRef),
    );
    app.get(
      '/v1/sdk/invoices',
      {
        schema: {
          tags,
          summary: 'List invoices, oldest first (filter by customer, purchase or status)',
          querystring: InvoiceListQuery,
          response: { 200: InvoicePage, ...errorResponses },
        },
      },
      async (request) => billing.list(authOf(request), request.query),
    );
    app.get(
      '/v1/sdk/invoices/:id',
      {
        schema: {
          tags,
          summary: 'Get an invoice with its lines',
          params: InvoiceParams,
          response: { 200: Invoice, ...errorResponses },
        },
      },
      async (request) => billing.get(authOf(request), request.params.id),
    );
  };
}
