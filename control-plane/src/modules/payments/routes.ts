import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem, Timestamp } from '../../http/schemas';
import { CustomerParams } from '../customers/schemas';
import type { PaymentService } from './service';

const PaymentMethod = Type.Object({
  id: Type.String(),
  brand: Type.String(),
  last4: Type.String(),
  expMonth: Type.Integer(),
  expYear: Type.Integer(),
  isDefault: Type.Boolean(),
  createdAt: Timestamp,
});

const AttachCard = Type.Union([
  Type.Object(
    {
      card: Type.Object(
        {
          number: Type.String({
            minLength: 12,
            maxLength: 23,
            description: 'Sandbox test card number (see docs/billing.md)',
          }),
          expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
          expYear: Type.Integer({ minimum: 2000, maximum: 2100 }),
          cvc: Type.String({ minLength: 3, maxLength: 4 }),
        },
        { additionalProperties: false },
      ),
    },
    { additionalProperties: false, title: 'Sandbox test card' },
  ),
  Type.Object(
    {
      paymentMethod: Type.String({
        pattern: '^(pm|card|src)_[A-Za-z0-9_]{1,250}$',
        description:
          'Live mode with Stripe connected: a card PaymentMethod collected by Stripe.js or Checkout',
      }),
    },
    { additionalProperties: false, title: 'Stripe payment method' },
  ),
]);

const MethodParams = Type.Composite([
  CustomerParams,
  Type.Object({ id: Type.String({ minLength: 1, maxLength: 100, description: 'pm_…' }) }),
]);

export function paymentRoutes(payments: PaymentService) {
  return async (app: App) => {
    const tags = ['payments'];
    app.post(
      '/v1/sdk/customers/:ref/payment-methods',
      {
        schema: {
          tags,
          summary:
            "Store a card as the customer's default (sandbox test cards; a Stripe payment method in live)",
          params: CustomerParams,
          body: AttachCard,
          response: { 201: PaymentMethod, 402: Problem, 409: Problem, 503: Problem, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply.status(201).send(await payments.attachCard(authOf(request), request.params.ref, request.body)),
    );
    app.post(
      '/v1/sdk/customers/:ref/payment-methods/:id/default',
      {
        schema: {
          tags,
          summary: "Make a stored card the customer's default",
          params: MethodParams,
          response: { 200: PaymentMethod, ...errorResponses },
        },
      },
      async (request) => payments.makeDefault(authOf(request), request.params.ref, request.params.id),
    );
    app.delete(
      '/v1/sdk/customers/:ref/payment-methods/:id',
      {
        schema: {
          tags,
          summary: 'Remove a stored card (the newest other card becomes the default)',
          params: MethodParams,
          response: {
            200: Type.Object({ id: Type.String(), deleted: Type.Literal(true) }),
            409: Problem,
            ...errorResponses,
          },
        },
      },
      async (request) => {
        await payments.removeMethod(authOf(request), request.params.ref, request.params.id);
        return { id: request.params.id, deleted: true as const };
      },
    );
    app.get(
      '/v1/sdk/customers/:ref/payment-methods',
      {
        schema: {
          tags,
          summary: "A customer's stored cards",
          params: CustomerParams,
          response: { 200: Type.Object({ data: Type.Array(PaymentMethod) }), ...errorResponses },
        },
      },
      async (request) => payments.listMethods(authOf(request), request.params.ref),
    );
  };
}
