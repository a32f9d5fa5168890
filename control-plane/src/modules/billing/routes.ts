import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { INVOICE_CSP, renderInvoicePage, renderInvoicePdf } from './document';
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
    app.post(
      '/v1/sdk/invoices/:id/void',
      {
        schema: {
          tags,
          summary:
            'Void an unpaid invoice: nothing more is collected, and a past-due purchase is active again',
          params: InvoiceParams,
          response: { 200: Invoice, 409: Problem, ...errorResponses },
        },
      },
      async (request) => billing.void(authOf(request), request.params.id),
    );
    app.post(
      '/v1/sdk/invoices/:id/pay',
      {
        schema: {
          tags,
          summary:
            "Pay an open invoice now with the customer's default card, apart from the dunning schedule",
          params: InvoiceParams,
          response: { 200: Invoice, 402: Problem, 409: Problem, ...errorResponses },
        },
      },
      async (request) => billing.pay(authOf(request), request.params.id),
    );
    app.post(
      '/v1/sdk/invoices/:id/finalize',
      {
        schema: {
          tags,
          summary:
            'Finalize a draft now: close its period without waiting out the lateness allowance, and collect it',
          params: InvoiceParams,
          response: { 200: Invoice, 409: Problem, 503: Problem, ...errorResponses },
        },
      },
      async (request) => billing.finalize(authOf(request), request.params.id),
    );
  };
}

const TokenParams = Type.Object({ token: Type.String({ minLength: 1, maxLength: 100 }) });
const GONE =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Invoice</title></head><body><p>This invoice is not available.</p></body></html>';

/** The customer's view of an invoice, by the link's token alone (no key): the page and its PDF. */
export function hostedInvoiceRoutes(billing: BillingService) {
  return async (app: App) => {
    const hide = { hide: true };
    app.get('/invoice/:token', { schema: { ...hide, params: TokenParams } }, async (request, reply) => {
      const doc = await billing.document(request.params.token);
      reply
        .header('content-security-policy', INVOICE_CSP)
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .type('text/html; charset=utf-8');
      if (doc === undefined) return reply.status(404).send(GONE);
      return reply.send(renderInvoicePage(doc));
    });
    app.get('/invoice/:token/pdf', { schema: { ...hide, params: TokenParams } }, async (request, reply) => {
      const doc = await billing.document(request.params.token);
      reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
      if (doc === undefined) return reply.status(404).type('text/html; charset=utf-8').send(GONE);
      return reply
        .type('application/pdf')
        .header('content-disposition', `inline; filename="invoice-${doc.invoice.id}.pdf"`)
        .send(await renderInvoicePdf(doc));
    });
  };
}
