import { sameSecret } from '@mcp-meter/contracts/kit';
import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { sendProblem } from '../../http/error-handler';
import { errorResponses, Nullable, Problem, stringEnum } from '../../http/schemas';
import type { LimitService } from './service';

const LimitCheck = Type.Object(
  {
    customerRef: Type.String({ minLength: 1, maxLength: 255 }),
    productRef: Type.String({ minLength: 1, maxLength: 100 }),
    meterName: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    consume: Type.Optional(
      Type.Boolean({
        default: true,
        description: 'Admit and record one call when within limits (default); false only reads',
      }),
    ),
  },
  { additionalProperties: false },
);

const LimitAnswer = Type.Object({
  withinLimits: Type.Boolean(),
  limit: Nullable(Type.Integer()),
  used: Type.Integer(),
  remaining: Nullable(Type.Integer()),
  overLimit: Type.Optional(
    Type.Integer({
      minimum: 1,
      description:
        'Units counted beyond the limit: calls admitted on a proxy outage grace, or usage reported past it',
    }),
  ),
  planId: Type.Optional(Type.String()),
  creditBalance: Type.Optional(
    Type.Integer({
      description:
        'Plans paid from credits: credits still available to calls (balance less calls not yet debited)',
    }),
  ),
  creditsPerUnit: Type.Optional(Type.Integer()),
  reason: Type.Optional(
    stringEnum(
      ['limit_reached', 'plan_required', 'no_plan', 'credits_exhausted'] as const,
      'Why the call is refused (withinLimits false)',
    ),
  ),
  checkoutUrl: Type.Optional(Type.String()),
  checkoutSessionId: Type.Optional(Type.String()),
  offeredPlanId: Type.Optional(Type.String()),
  portalUrl: Type.Optional(
    Type.String({
      description:
        'Where the customer signs in to the portal (usage, invoices, plans, credits): present when they can, with the account MCP sign-in made or by a code mailed to their email',
    }),
  ),
});

export function limitRoutes(limits: LimitService) {
  return async (app: App) => {
    app.post(
      '/v1/sdk/limits',
      {
        // The check reads the customer's test clock in its one lookup query (limits/repository.ts).
        config: { testTime: 'own' },
        schema: {
          tags: ['usage'],
          summary: "Check (and by default consume one call of) a customer's usage limit for a product",
          body: LimitCheck,
          response: { 200: LimitAnswer, 503: Problem, ...errorResponses },
        },
      },
      async (request) => limits.check(authOf(request), request.body),
    );
  };
}

const Tenant = {
  providerId: Type.String({ minLength: 1, maxLength: 100 }),
  environment: stringEnum(['sandbox', 'live'] as const),
  customerId: Type.String({ minLength: 1, maxLength: 255 }),
  productId: Type.String({ minLength: 1, maxLength: 100 }),
};

/** The proxy's calls (off its hot path): paywall sessions and limit counter seeds. */
export function internalRoutes(limits: LimitService, token: string) {
  const expected = `Bearer ${token}`;
  return async (app: App) => {
    app.addHook('onRequest', async (request, reply) => {
      if (!sameSecret(request.headers.authorization ?? '', expected))
        return sendProblem(reply, 'unauthorized', 'Internal API token required');
    });
    app.post(
      '/internal/v1/paywall',
      {
        schema: {
          hide: true,
          body: Type.Object(
            {
              ...Tenant,
              reason: stringEnum(['limit_reached', 'plan_required', 'no_plan', 'credits_exhausted'] as const),
              planIds: Type.Optional(Type.Array(Type.String({ maxLength: 100 }), { maxItems: 50 })),
              planId: Type.Optional(Type.String({ maxLength: 100 })),
            },
            { additionalProperties: false },
          ),
        },
      },
      async (request) => limits.paywall(request.body),
    );
    app.post(
      '/internal/v1/credits/seed',
      {
        schema: {
          hide: true,
          body: Type.Object(
            {
              providerId: Tenant.providerId,
              environment: Tenant.environment,
              customerId: Tenant.customerId,
            },
            { additionalProperties: false },
          ),
        },
      },
      async (request) => limits.creditSeed(request.body),
    );
    app.post(
      '/internal/v1/limits/seed',
      {
        schema: {
          hide: true,
          body: Type.Object(
            {
              ...Tenant,
              planId: Type.String({ maxLength: 100 }),
              periodStart: Type.String({ format: 'date-time' }),
              periodEnd: Nullable(Type.String({ format: 'date-time' })),
            },
            { additionalProperties: false },
          ),
        },
      },
      async (request) =>
        limits.seed({
          ...request.body,
          periodStart: new Date(request.body.periodStart),
          periodEnd: request.body.periodEnd === null ? null : new Date(request.body.periodEnd),
        }),
    );
  };
}
