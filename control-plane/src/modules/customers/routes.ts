import { Type } from '@sinclair/typebox';
import { type App, authOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import {
  Customer,
  CustomerCreate,
  CustomerEnsure,
  CustomerListQuery,
  CustomerPage,
  CustomerParams,
  CustomerUpdate,
} from './schemas';
import type { CustomerService } from './service';

export function customerRoutes(customers: CustomerService) {
  return async (app: App) => {
    const tags = ['customers'];
    app.post(
      '/v1/sdk/customers',
      {
        schema: {
          tags,
          summary: 'Create a customer',
          body: CustomerCreate,
          response: { 201: Customer, 409: Problem, ...errorResponses },
        },
      },
      async (request, reply) => reply.status(201).send(await customers.create(authOf(request), request.body)),
    );
    app.post(
      '/v1/sdk/customers/ensure',
      {
        schema: {
          tags,
          summary:
            'Get the customer with this externalRef, creating it only if none exists (201 when created)',
          body: CustomerEnsure,
          response: { 200: Customer, 201: Customer, ...errorResponses },
        },
      },
      async (request, reply) => {
        const { customer, created } = await customers.ensure(authOf(request), request.body);
        return reply.status(created ? 201 : 200).send(customer);
      },
    );
    app.get(
      '/v1/sdk/customers',
      {
        schema: {
          tags,
          summary: 'List customers, or find them by externalRef or email',
          querystring: CustomerListQuery,
          response: { 200: CustomerPage, ...errorResponses },
        },
      },
      async (request) => customers.list(authOf(request), request.query),
    );
    app.get(
      '/v1/sdk/customers/:ref',
      {
        schema: {
          tags,
          summary: 'Get a customer by reference or externalRef',
          params: CustomerParams,
          response: { 200: Customer, ...errorResponses },
        },
      },
      async (request) => customers.get(authOf(request), request.params.ref),
    );
    app.patch(
      '/v1/sdk/customers/:ref',
      {
        schema: {
          tags,
          summary: 'Update a customer',
          params: CustomerParams,
          body: CustomerUpdate,
          response: { 200: Customer, 409: Problem, ...errorResponses },
        },
      },
      async (request) => customers.update(authOf(request), request.params.ref, request.body),
    );
    app.delete(
      '/v1/sdk/customers/:ref',
      {
        schema: {
          tags,
          summary: 'Delete a customer (its history is kept)',
          params: CustomerParams,
          response: {
            200: Type.Object({ reference: Type.String(), deleted: Type.Literal(true) }),
            ...errorResponses,
          },
        },
      },
      async (request) => customers.delete(authOf(request), request.params.ref),
    );
  };
}
