import { atTestTime } from '../../clock';
import type { Pool } from '../../db/pool';
import { type App, sandboxAuthOf } from '../../http/app';
import { errorResponses, Problem } from '../../http/schemas';
import { testTimeOf } from './repository';
import { TestClock, TestClockAdvance, TestClockCreate, TestClockList, TestClockParams } from './schemas';
import type { TestClockService } from './service';

export function testClockRoutes(clocks: TestClockService) {
  return async (app: App) => {
    const tags = ['test clocks'];
    app.post(
      '/v1/sdk/test-clocks',
      {
        schema: {
          tags,
          summary: 'Sandbox: create a test clock frozen at a time',
          body: TestClockCreate,
          response: { 201: TestClock, ...errorResponses },
        },
      },
      async (request, reply) =>
        reply.status(201).send(await clocks.create(sandboxAuthOf(request), request.body)),
    );
    app.get(
      '/v1/sdk/test-clocks',
      {
        schema: {
          tags,
          summary: 'Sandbox: list test clocks',
          response: { 200: TestClockList, ...errorResponses },
        },
      },
      async (request) => clocks.list(sandboxAuthOf(request)),
    );
    app.get(
      '/v1/sdk/test-clocks/:id',
      {
        schema: {
          tags,
          summary: 'Sandbox: get a test clock',
          params: TestClockParams,
          response: { 200: TestClock, ...errorResponses },
        },
      },
      async (request) => clocks.get(sandboxAuthOf(request), request.params.id),
    );
    app.post(
      '/v1/sdk/test-clocks/:id/advance',
      {
        schema: {
          tags,
          summary:
            "Sandbox: move the clock forward, running everything due on its customers' purchases on the way",
          params: TestClockParams,
          body: TestClockAdvance,
          response: { 200: TestClock, 409: Problem, ...errorResponses },
        },
      },
      async (request) => clocks.advance(sandboxAuthOf(request), request.params.id, request.body.frozenTime),
    );
  };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `own`: the route finds its customer's test clock itself (in the query it makes anyway).
     * `none`: the route is about real time whoever it names (a link a person opens within minutes).
     */
    testTime?: 'own' | 'none';
  }
}

/**
 * Runs each sandbox request about a customer on a test clock at the clock's frozen time: the
 * customer it names (`customerRef` in the body or query, `/customers/{ref}`), a purchase of it
 * (`purchaseRef`, `/purchases/{ref}`), an invoice of it (`/invoices/{id}`), or the clock a new customer is created on (`testClock`).
 */
export function installTestTime(app: App, pool: Pool): void {
  app.addHook('preHandler', (request, _reply, done) => {
    const auth = request.auth;
    if (auth === null || auth.environment !== 'sandbox') return done();
    // The route reads its customer's test clock with the rest of what it looks up.
    if (request.routeOptions.config.testTime !== undefined) return done();
    const body = (typeof request.body === 'object' && request.body !== null ? request.body : {}) as Record<
      string,
      unknown
    >;
    const query = (request.query ?? {}) as Record<string, unknown>;
    const params = (request.params ?? {}) as Record<string, unknown>;
    const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
    const path = request.routeOptions.url ?? '';
    const about = {
      customerRef:
        text(body.customerRef) ??
        text(query.customerRef) ??
        (path.startsWith('/v1/sdk/customers/:ref') ? text(params.ref) : undefined),
      purchaseRef:
        text(body.purchaseRef) ??
        text(query.purchaseRef) ??
        (path.startsWith('/v1/sdk/purchases/:ref') ? text(params.ref) : undefined),
      invoiceId: path.startsWith('/v1/sdk/invoices/:id') ? text(params.id) : undefined,
      testClock: text(body.testClock),
    };
    if (Object.values(about).every((value) => value === undefined)) return done();
    testTimeOf(pool, auth, about).then(
      (time) => (time === undefined ? done() : atTestTime(time, () => done())),
      (error: unknown) => done(error as Error),
    );
  });
}
