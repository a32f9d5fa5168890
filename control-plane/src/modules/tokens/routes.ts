import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import { CustomerParams } from '../customers/schemas';
import type { TokenService } from './service';

export function tokenRoutes(tokens: TokenService) {
  return async (app: App) => {
    app.post(
      '/v1/sdk/customers/:ref/tokens',
      {
        schema: {
          tags: ['customers'],
          summary: 'Mint an access token a customer presents to the MCP proxy',
          params: CustomerParams,
          body: Type.Object(
            {
              productRef: Type.Optional(
                Type.String({
                  minLength: 1,
                  maxLength: 100,
                  description: "Limit the token to this product's servers",
                }),
              ),
              expiresInSeconds: Type.Optional(
                Type.Integer({ minimum: 60, maximum: 30 * 86400, default: 3600 }),
              ),
            },
            { additionalProperties: false },
          ),
          response: {
            201: Type.Object({
              accessToken: Type.String(),
              tokenType: Type.Literal('Bearer'),
              expiresIn: Type.Integer(),
              customerRef: Type.String(),
            }),
            ...errorResponses,
          },
        },
      },
      async (request, reply) =>
        reply
          .status(201)
          .send(await tokens.issue(authOf(request), { customerRef: request.params.ref, ...request.body })),
    );
    app.post(
      '/v1/sdk/customers/:ref/tokens/revoke',
      {
        schema: {
          tags: ['customers'],
          summary: 'Revoke every access token the customer holds now (the proxy refuses them within seconds)',
          params: CustomerParams,
          response: {
            200: Type.Object({
              customerRef: Type.String(),
              revokedBefore: Type.String({ format: 'date-time' }),
            }),
            ...errorResponses,
          },
        },
      },
      async (request) => tokens.revoke(authOf(request), request.params.ref),
    );
  };
}

export function jwksRoutes(tokens: TokenService) {
  return async (app: App) => {
    app.get(
      '/.well-known/jwks.json',
      {
        schema: {
          tags: ['customer sign-in'],
          summary: 'The public keys that verify customer access tokens (RFC 7517 JSON Web Key Set)',
          description:
            'What the proxy, or anything else, checks an access token’s signature against: the keys in use and the ones just rotated out. Open to anyone, no key.',
          response: {
            200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }),
          },
        },
      },
      async () => tokens.jwks(),
    );
  };
}
