import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, readEnv } from '@mcp-meter/contracts/kit';
import { MemoryCounterStore } from '@mcp-meter/contracts/limits';
import { readProxyConfig, startProxy } from '@mcp-meter/proxy';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MovableClock } from '../../control-plane/src/clock';
import {
  injectClient,
  startTestControlPlane,
  TEST_SECRET_KEY,
  type TestControlPlane,
} from '../helpers/control-plane';
import { startMcpOrigin } from '../helpers/mcp-origin';
import { sell } from '../helpers/seller';
import { type StripeMock, startStripeMock } from '../helpers/stripe-mock';

/**
 * Live mode end to end: a provider connected to Stripe (stripe-mock), a customer who pays a
 * hybrid plan through Stripe Checkout, tool calls made by the MCP TypeScript SDK through the
 * proxy and metered, and the period's close charging the usage through Stripe with the amount
 * the calls came to and a key made of our ids. The control plane's clock moves; the proxy's
 * records carry real time, so the clock starts at the real now.
 */
const clock = new MovableClock(new Date());
const SIGNING_SECRET = 'whsec_e2esigningsecret0123456789';
const logger = createLogger({ level: 'silent', name: 'stripe-live' });

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;

describe('a live purchase billed through Stripe from proxied tool calls', () => {
  let harness: TestControlPlane;
  let mock: StripeMock;
  let origin: Awaited<ReturnType<typeof startMcpOrigin>>;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let spill: string;

  beforeAll(async () => {
    mock = await startStripeMock({ payments: 'succeed' });
    harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, stripeApiUrl: mock.url });
    await harness.controlPlane.app.listen({ host: '127.0.0.1', port: 0 });
    await harness.controlPlane.tokens.publish();
    const address = harness.controlPlane.app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    spill = mkdtempSync(join(tmpdir(), 'stripe-live-'));
    const env = readEnv({
      PROXY_PORT: '0',
      CONTROL_PLANE_URL: `http://127.0.0.1:${port}`,
      SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
      OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
      PROXY_SPILL_DIR: spill,
      EMITTER_LINGER_MS: '5',
    });
    const config = env.done({ proxy: readProxyConfig(env) });
    origin = await startMcpOrigin();
    proxy = await startProxy({
      config: config.proxy,
      snapshots: harness.snapshots,
      counters: new MemoryCounterStore(),
      publisher: harness.bus,
      logger,
    });
  }, 600_000);
  afterAll(async () => {
    await proxy?.close();
    await origin?.close();
    await harness?.close();
    await mock?.close();
    if (spill !== undefined) rmSync(spill, { recursive: true, force: true });
  });

  it('pays at Stripe Checkout, meters the calls, and charges their usage at the close', async () => {
    const { liveKey, provider } = await harness.controlPlane.providers.create({
      displayName: 'Live Weather',
    });
    const live = injectClient(harness.controlPlane, liveKey);
    expect(
      (
        await live('PUT', '/v1/ui/processors/stripe', {
          secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
          webhookSigningSecret: SIGNING_SECRET,
        })
      ).status,
    ).toBe(200);
    const weather = await sell(live, {
      product: 'Weather',
      plans: [{ name: 'Metered', type: 'hybrid', basePrice: 1000, unitAmount: 5 }],
    });
    const plan = { id: weather.plans.Metered as string };
    expect(plan.id).toMatch(/^pln_/);
    const server = await weather.register(origin.url, { name: 'weather' });
    const customer = (await live('POST', '/v1/sdk/customers', { externalRef: 'ada' })).body
      .reference as string;

    // The customer pays the first period on Stripe Checkout.
    const offered = await live('POST', '/v1/sdk/activate', { customerRef: customer, planRef: plan.id });
    expect(offered.body.status).toBe('payment_required');
    const page = await harness.controlPlane.app.inject({
      method: 'GET',
      url: new URL(offered.body.checkoutUrl).pathname,
    });
    expect(page.statusCode).toBe(303);
    const payload = JSON.stringify({
      id: 'evt_e2e_checkout',
      object: 'event',
      api_version: Stripe.API_VERSION,
      created: Math.floor(Date.now() / 1000),
      data: {
        object: {
          ...mock.fixtures['checkout.session'],
          mode: 'setup',
          status: 'complete',
          client_reference_id: offered.body.checkoutSessionId,
          setup_intent: 'seti_e2e',
        },
      },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type: 'checkout.session.completed',
    });
    const completed = await harness.controlPlane.app.inject({
      method: 'POST',
      url: `/v1/processors/stripe/webhooks/${provider.id}`,
      headers: {
        'content-type': 'application/json',
        'stripe-signature': new Stripe('sk_test_signer').webhooks.generateTestHeaderString({
          payload,
          secret: SIGNING_SECRET,
        }),
      },
      payload,
    });
    expect(completed.json()).toMatchObject({ outcome: 'applied' });
    const purchases = (await live('GET', `/v1/sdk/purchases?customerRef=${customer}`)).body.data as Json[];
    expect(purchases).toEqual([expect.objectContaining({ status: 'active' })]);
    const purchase = purchases[0] as Json;

    // Seven tool calls through the proxy with the customer's token, metered to the purchase.
    const token = (await live('POST', `/v1/sdk/customers/${customer}/tokens`, {})).body.accessToken as string;
    const client = new Client({ name: 'stripe-live', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${proxy.url}/mcp/${server.subdomain}`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    for (let i = 0; i < 7; i++)
      expect((await client.callTool({ name: 'add', arguments: { a: i, b: 1 } })).content).toEqual([
        { type: 'text', text: String(i + 1) },
      ]);
    await client.close();
    await harness.settled();

    // The period ends; once the lateness allowance has passed, the close charges through Stripe.
    const periodEnd = new Date(purchase.periodEnd);
    const from = mock.requests.length;
    clock.set(new Date(periodEnd.getTime() + 6 * 60_000));
    await harness.controlPlane.scheduler.runDue();
    const invoices = (await live('GET', `/v1/sdk/invoices?customerRef=${customer}`)).body.data as Json[];
    const closed = invoices.find((i) => i.billingReason !== 'first_payment');
    // 7 calls at 5¢ in arrears, and the next period's base of 1000¢ in advance.
    expect(closed?.lines.map((l: Json) => [l.kind, l.quantity, l.amount])).toEqual([
      ['usage', 7, 35],
      ['base', 1, 1000],
    ]);
    expect(closed).toMatchObject({ total: 1035, status: 'paid' });
    const charges = mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents');
    expect(charges).toEqual([
      expect.objectContaining({
        status: 200,
        idempotencyKey: `charge:${purchase.id}:${periodEnd.toISOString()}:0`,
        params: expect.objectContaining({
          amount: '1035',
          currency: 'usd',
          off_session: 'true',
          'metadata[invoice]': closed?.id,
          'metadata[purchase]': purchase.id,
          'metadata[reason]': 'renewal',
        }),
      }),
    ]);
    const { rows } = await harness.pool.query(
      `SELECT processor, status, amount FROM payments WHERE purchase_id = $1 ORDER BY created_at`,
      [purchase.id],
    );
    expect(rows).toEqual([
      { processor: 'stripe', status: 'succeeded', amount: 1000 },
      { processor: 'stripe', status: 'succeeded', amount: 1035 },
    ]);
  });
});
