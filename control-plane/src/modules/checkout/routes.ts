import { Type } from '@sinclair/typebox';
import { AddressInput, TaxId } from '../../billing-details';
import { type App, authOf } from '../../http/app';
import { errorResponses, Nullable, Problem, stringEnum, Timestamp } from '../../http/schemas';
import { CHECKOUT_CSP, renderCheckout, renderDone } from './page';
import type { CheckoutService } from './service';

const WebUrl = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2048 });

const BillingAddressCollection = Type.Union([Type.Literal('auto'), Type.Literal('required')], {
  description:
    'required: the customer gives a billing address, saved on the customer before the payment, so the first invoice names it (Stripe Checkout’s billing_address_collection); auto (default): not asked',
});
const TaxIdCollection = Type.Object(
  {
    enabled: Type.Boolean({
      description: 'The customer may give a tax ID (buying as a business), saved on the customer when paid',
    }),
    required: Type.Optional(
      stringEnum(
        ['never', 'if_supported'],
        'if_supported: a customer who has no tax ID must give one (on Stripe’s page, where their country has tax IDs Stripe collects); never (default): it is optional. Needs enabled',
      ),
    ),
  },
  { additionalProperties: false },
);

const CheckoutCreate = Type.Object(
  {
    customerRef: Type.String({ minLength: 1, maxLength: 255 }),
    planRef: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'A plan purchase; or send topup, or setup' }),
    ),
    topup: Type.Optional(
      Type.Object(
        {
          credits: Type.Integer({ minimum: 1, maximum: 1_000_000_000_000 }),
          amount: Type.Integer({
            minimum: 1,
            maximum: 99_999_999_999,
            description: 'Price of the credits, minor units',
          }),
          currency: Type.Optional(Type.String({ pattern: '^[A-Za-z]{3}$' })),
        },
        { additionalProperties: false },
      ),
    ),
    setup: Type.Optional(
      Type.Boolean({
        description:
          'true: collect a card only and make it the default (Stripe Checkout in setup mode in live); nothing is charged',
      }),
    ),
    coupon: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: 'A coupon (cpn_… or its code) for the plan or top-up: checked now, redeemed when paid',
      }),
    ),
    allowPromotionCodes: Type.Optional(
      Type.Boolean({
        description: 'The hosted page offers a field for the customer’s promotion code (plans and top-ups)',
      }),
    ),
    billingAddressCollection: Type.Optional(BillingAddressCollection),
    taxIdCollection: Type.Optional(TaxIdCollection),
    successUrl: Type.Optional(WebUrl),
    cancelUrl: Type.Optional(WebUrl),
    expiresInMinutes: Type.Optional(Type.Integer({ minimum: 5, maximum: 1440, default: 60 })),
  },
  { additionalProperties: false },
);

const CheckoutSession = Type.Object({
  id: Type.String(),
  url: Type.String(),
  status: Type.String(),
  kind: Type.String(),
  customerRef: Type.String(),
  planRef: Nullable(Type.String()),
  productId: Nullable(Type.String()),
  credits: Nullable(Type.Integer()),
  amount: Type.Integer({
    description: 'What is due now, in minor units: less the coupon, nothing during a trial',
  }),
  amountSubtotal: Nullable(
    Type.Integer({
      description:
        'What is due now before any coupon (Stripe’s amount_subtotal); null for a session made with a coupon before 2026-12-02',
    }),
  ),
  amountDiscount: Nullable(
    Type.Integer({
      description: 'What the coupon takes off: amountSubtotal − amount; null as amountSubtotal',
    }),
  ),
  currency: Type.String(),
  successUrl: Type.String(),
  cancelUrl: Nullable(Type.String()),
  purchaseRef: Nullable(Type.String()),
  coupon: Nullable(Type.String({ description: 'The coupon it applies (cpn_…), redeemed when paid' })),
  allowPromotionCodes: Type.Boolean(),
  billingAddressCollection: BillingAddressCollection,
  taxIdCollection: TaxIdCollection,
  expiresAt: Timestamp,
  createdAt: Timestamp,
});

const SessionParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
const PayBody = Type.Object(
  {
    card: Type.Object(
      {
        number: Type.String({ minLength: 12, maxLength: 23 }),
        expMonth: Type.Integer({ minimum: 0, maximum: 12 }),
        expYear: Type.Integer({ minimum: 0, maximum: 2100 }),
        cvc: Type.String({ minLength: 3, maxLength: 4 }),
      },
      { additionalProperties: false },
    ),
    billing: Type.Optional(
      Type.Object(
        { address: Type.Optional(AddressInput), taxId: Type.Optional(TaxId) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/** Provider API: create and read sessions. */
export function checkoutRoutes(checkout: CheckoutService) {
  return async (app: App) => {
    const tags = ['checkout'];
    app.post(
      '/v1/sdk/checkout-sessions',
      {
        // A person opens the page within real minutes, and the page and the expiry job keep real
        // time: a session of a test clock's customer lives in real time, as a portal link does.
        config: { testTime: 'none' },
        schema: {
          tags,
          summary: 'Create a hosted checkout session for a plan or a credit top-up',
          body: CheckoutCreate,
          response: { 201: CheckoutSession, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(201).send(await checkout.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/sdk/checkout-sessions/:id',
      {
        schema: {
          tags,
          summary: 'Get a checkout session',
          params: SessionParams,
          response: { 200: CheckoutSession, ...errorResponses },
        },
      },
      async (request) => checkout.get(authOf(request), request.params.id),
    );
  };
}

/** Customer-facing, no API key: the hosted page and its pay call, reachable only by session id. */
export function hostedCheckoutRoutes(checkout: CheckoutService) {
  return async (app: App) => {
    const hide = { hide: true };
    app.get('/checkout/:id', { schema: { ...hide, params: SessionParams } }, async (request, reply) => {
      // Live mode with Stripe: the card is given on Stripe's own page, at once unless this page
      // comes first to take a promotion code (then its Continue goes there, below).
      const page = (await checkout.codeFirst(request.params.id))
        ? undefined
        : await checkout.processorPage(request.params.id);
      if (page !== undefined) {
        await checkout.opened(request.params.id);
        return reply.header('cache-control', 'no-store').redirect(page, 303);
      }
      const view = await checkout.view(request.params.id);
      reply
        .header('content-security-policy', CHECKOUT_CSP)
        .header('cache-control', 'no-store')
        .type('text/html; charset=utf-8');
      if (view === undefined)
        return reply.status(410).send(renderDone('This checkout is no longer available.'));
      await checkout.opened(request.params.id);
      return reply.send(renderCheckout(view));
    });
    app.get('/checkout/:id/card', { schema: { ...hide, params: SessionParams } }, async (request, reply) => {
      // The processor's page for what is due now; back to the session's page when there is
      // none (sandbox, or closed: that page says so).
      const page = await checkout.processorPage(request.params.id);
      return reply
        .header('cache-control', 'no-store')
        .redirect(page ?? `/checkout/${encodeURIComponent(request.params.id)}`, 303);
    });
    app.post(
      '/checkout/:id/promotion-code',
      {
        schema: {
          ...hide,
          params: SessionParams,
          body: Type.Object(
            { code: Type.Union([Type.String({ minLength: 1, maxLength: 40 }), Type.Null()]) },
            { additionalProperties: false },
          ),
          response: {
            200: Type.Object({ amount: Type.Integer(), currency: Type.String() }),
            409: Problem,
            429: Problem,
            ...errorResponses,
          },
        },
      },
      async (request) => checkout.promotionCode(request.params.id, request.body.code),
    );
    app.post(
      '/checkout/:id/pay',
      {
        schema: {
          ...hide,
          params: SessionParams,
          body: PayBody,
          response: {
            200: Type.Object({ redirectUrl: Type.String() }),
            402: Problem,
            409: Problem,
            ...errorResponses,
          },
        },
      },
      async (request) => checkout.pay(request.params.id, { card: request.body.card }, request.body.billing),
    );
    app.get(
      '/checkout/:id/complete',
      { schema: { ...hide, params: SessionParams } },
      async (_request, reply) =>
        reply
          .header('content-security-policy', CHECKOUT_CSP)
          .type('text/html; charset=utf-8')
          .send(renderDone('Payment complete. You can close this page.')),
    );
  };
}
