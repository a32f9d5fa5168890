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

const AttachCard = Type.Object(
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
  { additionalProperties: false },
);

export function paymentRoutes(payments: PaymentService) {
  return async (app: App) => {
    const tags = ['payments'];
    app.post(
      '/v1/sdk/customers/:ref/payment-methods',
      {
        schema: {
          tags,
          summary: "Store a card as the customer's default (sandbox test cards)",
          params: CustomerParams,
          body: AttachCard,
          response: { 201: PaymentMethod, 402: Problem, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply
          .status(201)
          .send(await payments.attachCard(authOf(request), request.params.ref, request.body.card)),
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
