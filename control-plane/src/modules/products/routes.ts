import { Type } from '@sinclair/typebox';
import type { App } from '../../http/app';
import { authOf } from '../../http/app';
import { errorResponses, ListQuery, Problem } from '../../http/schemas';
import { Product, ProductCreate, ProductPage, ProductParams, ProductUpdate } from './schemas';
import type { ProductService } from './service';

export function productRoutes(products: ProductService) {
  return async (app: App) => {
    const tags = ['products'];
    app.post(
      '/v1/ui/products',
      {
        schema: {
          tags,
          summary: 'Create a product',
          body: ProductCreate,
          response: { 201: Product, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(201).send(await products.create(authOf(request), request.body)),
    );
    app.get(
      '/v1/ui/products',
      {
        schema: {
          tags,
          summary: 'List products',
          querystring: Type.Composite(
            [
              ListQuery,
              Type.Object({
                status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('archived')])),
              }),
            ],
            { additionalProperties: false },
          ),
          response: { 200: ProductPage, ...errorResponses },
        },
      },
      async (request) => products.list(authOf(request), request.query),
    );
    app.get(
      '/v1/ui/products/:id',
      {
        schema: {
          tags,
          summary: 'Get a product by id or reference',
          params: ProductParams,
          response: { 200: Product, ...errorResponses },
        },
      },
      async (request) => products.get(authOf(request), request.params.id),
    );
    app.patch(
      '/v1/ui/products/:id',
      {
        schema: {
          tags,
          summary: 'Update a product',
          params: ProductParams,
          body: ProductUpdate,
          response: { 200: Product, 409: Problem, ...errorResponses },
        },
      },
      async (request) => products.update(authOf(request), request.params.id, request.body),
    );
    app.post(
      '/v1/ui/products/:id/archive',
      {
        schema: {
          tags,
          summary: 'Archive a product (no new plans or purchases)',
          params: ProductParams,
          response: { 200: Product, ...errorResponses },
        },
      },
      async (request) => products.archive(authOf(request), request.params.id),
    );
  };
}
