import { createServer } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import { type Context, Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestControlPlane } from '../../test/helpers/control-plane';
import {
  createMeter,
  type MeterClient,
  orThrow,
  paywallExpress,
  paywallFastify,
  paywallHono,
} from '../src/index';
import { startService } from './service';

/**
 * The paywall for APIs in Express, Fastify and Hono apps, against the running control plane: a
 * free plan of two calls, then 402 with the checkout of the paid plan; the limit is the
 * service's, counted once per request.
 */
describe('the paywall middleware', () => {
  let harness: TestControlPlane;
  let url: string;
  let meter: MeterClient;
  let productRef: string;

  beforeAll(async () => {
    ({ harness, url } = await startService());
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Paywalled API' });
    meter = createMeter({ apiKey: sandboxKey, baseUrl: url });
    const product = await orThrow(meter.POST('/v1/ui/products', { body: { name: 'Forecasts' } }));
    productRef = product.id;
    for (const plan of [
      { name: 'Free', price: 0, limit: 2, default: true },
      { name: 'Pro', price: 900, limit: 1000 },
    ])
      await orThrow(
        meter.POST('/v1/ui/products/{id}/plans', {
          params: { path: { id: productRef } },
          body: { type: 'recurring', billingCycle: 'monthly', currency: 'usd', ...plan },
        }),
      );
    for (const externalRef of ['express-user', 'fastify-user', 'hono-user'])
      await orThrow(meter.POST('/v1/sdk/customers', { body: { externalRef } }));
  });
  afterAll(async () => {
    await harness?.close();
  });

  /** Three calls as `customer`: two run, the third is refused with where to pay. */
  const expectPaywalled = async (
    call: (customer: string | undefined) => Promise<Response>,
    customer: string,
  ) => {
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await call(customer));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 402]);
    expect(await answers[0]?.text()).toBe('ran');
    const refused = answers[2] as Response;
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await refused.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({ status: 402, code: 'limit_reached', limit: 2, used: 2 });
    expect(problem.checkoutUrl).toMatch(/^http/);
    expect(refused.headers.get('link')).toBe(`<${problem.checkoutUrl}>; rel="payment"`);
    // Nobody named: 401; someone who is no customer here: 403; nothing was counted for anyone.
    expect((await call(undefined)).status).toBe(401);
    const stranger = await call('not-a-customer');
    expect(stranger.status).toBe(403);
    expect(await stranger.json()).toMatchObject({ code: 'customer_not_found' });
    const standing = await orThrow(
      meter.POST('/v1/sdk/limits', { body: { customerRef: customer, productRef, consume: false } }),
    );
    expect(standing).toMatchObject({ used: 2, withinLimits: false });
  };

  it('guards an Express app', async () => {
    const app = express();
    app.use(paywallExpress({ meter, productRef, customer: (request) => request.header('x-customer') }));
    app.get('/forecast', (_request, response) => {
      response.send('ran');
    });
    const server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const base = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    try {
      await expectPaywalled(
        (customer) =>
          fetch(`${base}/forecast`, { headers: customer === undefined ? {} : { 'x-customer': customer } }),
        'express-user',
      );
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('guards a Fastify app', async () => {
    const app = Fastify();
    app.addHook(
      'preHandler',
      paywallFastify({
        meter,
        productRef,
        customer: (request: { headers: Record<string, string | string[] | undefined> }) =>
          request.headers['x-customer'] as string | undefined,
      }),
    );
    app.get('/forecast', async () => 'ran');
    try {
      await expectPaywalled(async (customer) => {
        const answer = await app.inject({
          method: 'GET',
          url: '/forecast',
          headers: customer === undefined ? {} : { 'x-customer': customer },
        });
        return new Response(answer.statusCode === 204 ? null : answer.body, {
          status: answer.statusCode,
          headers: answer.headers as Record<string, string>,
        });
      }, 'fastify-user');
    } finally {
      await app.close();
    }
  });

  it('guards a Hono app', async () => {
    const app = new Hono();
    app.use('*', paywallHono({ meter, productRef, customer: (c: Context) => c.req.header('x-customer') }));
    app.get('/forecast', (c) => c.text('ran'));
    await expectPaywalled(
      async (customer) =>
        app.request('/forecast', { headers: customer === undefined ? {} : { 'x-customer': customer } }),
      'hono-user',
    );
  });

  it('refuses with 503 when the service cannot be asked, or lets calls through if told to', async () => {
    const down = createMeter({
      apiKey: 'sk_test_whoever',
      baseUrl: 'http://127.0.0.1:9',
      retry: { maxRetries: 0 },
    });
    const guarded = (whenUnavailable: 'refuse' | 'allow') => {
      const app = new Hono();
      app.use('*', paywallHono({ meter: down, productRef, customer: () => 'anyone', whenUnavailable }));
      app.get('/', (c) => c.text('ran'));
      return app;
    };
    const refused = await guarded('refuse').request('/');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ code: 'dependency_unavailable' });
    expect((await guarded('allow').request('/')).status).toBe(200);
  });
});
