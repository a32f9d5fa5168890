import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMeter, type MeterClient } from '../../sdk/src/index';
import { type Listening, listen } from '../../sdk/test/service';
import { startListeningControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startInProcessProxy } from '../../test/helpers/in-process-proxy';
import { startMailbox } from '../../test/helpers/mailbox';
import { type McpOrigin, startMcpOrigin } from '../../test/helpers/mcp-origin';
import { type StripeMock, startStripeMock } from '../../test/helpers/stripe-mock';
import { systemClock } from '../src/clock';
import type { OperationExample } from '../src/http/operation-examples';
import { OPERATION_IDS } from '../src/http/operation-ids';
import { PROXY_OPERATION_IDS } from '../src/http/proxy-paths';
import { SANDBOX_CARDS } from '../src/modules/payments/processor';
import { TeamService } from '../src/modules/team/service';
import { ExampleRecorder, shapeOf } from './examples/recorder';

/**
 * Every operation of the API, called once as its documented example, against the running control
 * plane (real PostgreSQL, Redis and ClickHouse; stripe-mock, an SMTP mailbox and a real MCP origin
 * on loopback): the provider's calls through the SDK, sign-in and Stripe's calls over plain HTTP.
 * The answers, made anonymous (examples/recorder.ts), are the examples /openapi.json and /docs
 * show (operation-examples.json). The test fails when an operation has no example, answers
 * another status, or answers a shape other than its example's; MCPMETER_WRITE_EXAMPLES=1
 * (`npm run examples:generate`, which then writes the SDK's types from the new document) writes
 * the examples again: those whose call or answer's shape changed (`written`, below).
 */

const EXAMPLES = join(import.meta.dirname, '..', 'src', 'http', 'operation-examples.json');
const WRITE = ['1', 'all'].includes(process.env.MCPMETER_WRITE_EXAMPLES ?? '');
const SIGNING_SECRET = 'whsec_examplesigningsecret0123456789';
/** PKCE: the verifier the client keeps, and its S256 challenge it sends first. */
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
const PASSWORD = 'correct horse battery staple';

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field as the calls need them
type Json = any;

interface Call {
  /** As OPERATION_IDS names it: `POST /v1/sdk/customers/:ref/credits`. */
  route: string;
  /** The proxy's operations, which OPERATION_IDS leaves out, name theirs (and go to the proxy). */
  proxyOperation?: string;
  path?: Record<string, string>;
  query?: Record<string, string | number | boolean>;
  body?: unknown;
  form?: Record<string, string>;
  /** Whose call it is: the sandbox key (default), the live key, or nobody's. */
  as?: 'sandbox' | 'live' | 'none';
  headers?: Record<string, string>;
  /** A raw body sent as it is (a signed Stripe event); recorded as JSON. */
  raw?: string;
  status: number;
}

let harness: TestControlPlane;
let url: string;
let mock: StripeMock;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
let origin: McpOrigin;
let receiver: Listening;
let proxy: Awaited<ReturnType<typeof startInProcessProxy>>;
let providerId: string;
let sandbox: MeterClient;
let live: MeterClient;
const recorder = new ExampleRecorder(Date.now());

beforeAll(async () => {
  [mock, mailbox, origin] = await Promise.all([
    startStripeMock(),
    startMailbox(),
    startMcpOrigin({ json: true }),
  ]);
  receiver = await listen((_request, _body, response) => response.writeHead(200).end('ok'));
  ({ harness, url } = await startListeningControlPlane({
    bodyLimitBytes: 1024 * 1024,
    smtpUrl: mailbox.url,
    stripeApiUrl: mock.url,
    webhooks: { allowedHosts: ['127.0.0.1'], timeoutMs: 2_000, enabled: false },
  }));
  // The proxy in this process, on the control plane's snapshots, as the all-in-one service runs it.
  proxy = await startInProcessProxy(harness, url, 'examples');
  const keys = await harness.controlPlane.providers.create({ displayName: 'Acme Weather' });
  providerId = keys.provider.id;
  recorder.mask(keys.sandboxKey, 'sk_test_…');
  recorder.mask(keys.liveKey, 'sk_live_…');
  sandbox = createMeter({ apiKey: keys.sandboxKey, baseUrl: url, retry: { maxRetries: 0 } });
  live = createMeter({ apiKey: keys.liveKey, baseUrl: url, retry: { maxRetries: 0 } });
  recorder.mask(`${receiver.url}/`, 'https://hooks.acme-weather.example/');
  recorder.mask(origin.url, 'https://weather.acme.example/mcp');
  recorder.mask(url, 'https://api.mcp-meter.example');
  recorder.mask('http://127.0.0.1:9', 'https://mcp.mcp-meter.example');
  recorder.mask(proxy.url, 'https://mcp.mcp-meter.example');
});
afterAll(async () => {
  await proxy?.close();
  await harness?.close();
  await Promise.all([mock?.close(), mailbox?.close(), origin?.close(), receiver?.close()]);
});

/** Makes `call` and answers its status, JSON body (undefined for pages) and headers. */
async function send(call: Call): Promise<{ status: number; body: Json; headers: Headers }> {
  const [method = 'GET', route = ''] = call.route.split(' ');
  const template = route.replace(/:(\w+)/g, '{$1}');
  let response: Response;
  let text: string;
  if ((call.as ?? 'sandbox') !== 'none' && call.proxyOperation === undefined) {
    const client = call.as === 'live' ? live : sandbox;
    const init: Json = {
      params: { path: call.path ?? {}, query: call.query ?? {} },
      ...(call.body === undefined ? {} : { body: call.body }),
      parseAs: 'text',
    };
    const answer = await client.request(method.toLowerCase() as 'get', template as '/v1/sdk/merchant', init);
    response = answer.response;
    // openapi-fetch reads a problem as JSON whatever `parseAs` asks.
    const read = answer.data ?? answer.error ?? '';
    text = typeof read === 'string' ? read : JSON.stringify(read);
  } else {
    let target = template.replace(/\{(\w+)\}/g, (_, name: string) => call.path?.[name] ?? '');
    if (call.query !== undefined)
      target += `?${new URLSearchParams(Object.entries(call.query).map(([k, v]): [string, string] => [k, String(v)]))}`;
    const body =
      call.raw ??
      (call.form !== undefined
        ? new URLSearchParams(call.form).toString()
        : call.body === undefined
          ? undefined
          : JSON.stringify(call.body));
    const type =
      call.form !== undefined ? 'application/x-www-form-urlencoded' : body === undefined ? {} : undefined;
    const base = call.proxyOperation === undefined ? url : proxy.url;
    response = await fetch(`${base}${target}`, {
      method,
      redirect: 'manual',
      headers: {
        ...(type === undefined ? { 'content-type': 'application/json' } : {}),
        ...(typeof type === 'string' ? { 'content-type': type } : {}),
        ...call.headers,
      },
      ...(body === undefined ? {} : { body }),
    });
    // An event stream stays open: its example is its status alone.
    if (/event-stream/.test(response.headers.get('content-type') ?? '')) {
      text = '';
      await response.body?.cancel();
    } else text = await response.text();
  }
  const json =
    /json/.test(response.headers.get('content-type') ?? '') && text !== '' ? JSON.parse(text) : undefined;
  return { status: response.status, body: json, headers: response.headers };
}

/** The last example's answer, for what its headers carry (a session cookie). */
let lastAnswer: { headers: Headers };

/** Makes `call` as its operation's documented example: it must answer `status`. */
async function example(call: Call): Promise<Json> {
  const operationId = call.proxyOperation ?? OPERATION_IDS[call.route];
  if (operationId === undefined) throw new Error(`no operation ${call.route}`);
  const answer = await send(call);
  lastAnswer = answer;
  expect(answer.status, `${call.route}: ${JSON.stringify(answer.body)}`).toBe(call.status);
  const request: OperationExample['request'] = {
    ...(call.path === undefined ? {} : { path: call.path }),
    ...(call.query === undefined ? {} : { query: call.query }),
    ...(call.body === undefined ? {} : { body: call.body }),
    ...(call.raw === undefined ? {} : { body: JSON.parse(call.raw) }),
    ...(call.form === undefined ? {} : { form: call.form }),
  };
  recorder.record(operationId, {
    request,
    status: answer.status,
    ...(answer.body === undefined || answer.status >= 300 ? {} : { response: answer.body }),
  });
  return answer.body;
}

/** Calls made to set an example up, not examples themselves. */
const setUp = async (call: Omit<Call, 'status'> & { status?: number }) => {
  const answer = await send({ status: 0, ...call });
  if (call.status !== undefined) expect(answer.status, JSON.stringify(answer.body)).toBe(call.status);
  return answer;
};

describe('the documented example of every operation', () => {
  it('discovery, health and the merchant', async () => {
    await example({ route: 'GET /healthz', as: 'none', status: 200 });
    await example({ route: 'GET /.well-known/oauth-authorization-server', as: 'none', status: 200 });
    await example({ route: 'GET /.well-known/openid-configuration', as: 'none', status: 200 });
    await example({ route: 'GET /.well-known/jwks.json', as: 'none', status: 200 });
    await example({
      route: 'PATCH /v1/sdk/merchant',
      body: {
        displayName: 'Acme Weather',
        supportEmail: 'support@acme-weather.example',
        termsUrl: 'https://acme-weather.example/terms',
        privacyUrl: 'https://acme-weather.example/privacy',
        address: { line1: '1 Cloud Way', city: 'Seattle', state: 'WA', postalCode: '98101', country: 'US' },
      },
      status: 200,
    });
    await example({ route: 'GET /v1/sdk/merchant', status: 200 });
    await example({ route: 'PATCH /v1/ui/settings', body: { lowBalanceThreshold: 100 }, status: 200 });
    await example({ route: 'GET /v1/ui/settings', status: 200 });
  });
});

/** What the calls before make for the calls after. */
const made: Record<string, Json> = {};

describe('the documented example of every operation, continued', () => {
  it('the catalog: a product, its plans and a meter', async () => {
    const product = await example({
      route: 'POST /v1/ui/products',
      body: { name: 'Weather API', reference: 'weather', description: 'Forecasts for any place on Earth' },
      status: 201,
    });
    made.product = product;
    await example({ route: 'GET /v1/ui/products', query: { limit: 10 }, status: 200 });
    await example({ route: 'GET /v1/ui/products/:id', path: { id: product.id }, status: 200 });
    await example({
      route: 'PATCH /v1/ui/products/:id',
      path: { id: product.id },
      body: { description: 'Forecasts and history for any place on Earth' },
      status: 200,
    });
    made.free = (
      await setUp({
        route: 'POST /v1/ui/products/:id/plans',
        path: { id: product.id },
        body: {
          name: 'Free',
          type: 'recurring',
          billingCycle: 'monthly',
          currency: 'usd',
          price: 0,
          limit: 100,
          default: true,
        },
        status: 201,
      })
    ).body;
    made.pro = await example({
      route: 'POST /v1/ui/products/:id/plans',
      path: { id: product.id },
      body: {
        name: 'Pro',
        type: 'recurring',
        billingCycle: 'monthly',
        currency: 'usd',
        price: 900,
        limit: 10_000,
        features: { history: true, support: 'email' },
      },
      status: 201,
    });
    made.metered = (
      await setUp({
        route: 'POST /v1/ui/products/:id/plans',
        path: { id: product.id },
        body: {
          name: 'Pay as you go',
          type: 'usage-based',
          billingCycle: 'monthly',
          currency: 'usd',
          price: 2,
          freeUnits: 10,
        },
        status: 201,
      })
    ).body;
    await example({ route: 'GET /v1/ui/products/:id/plans', path: { id: product.id }, status: 200 });
    await example({ route: 'GET /v1/ui/plans/:planRef', path: { planRef: made.pro.id }, status: 200 });
    await example({
      route: 'PATCH /v1/ui/plans/:planRef',
      path: { planRef: made.pro.id },
      body: { description: 'Ten thousand forecasts a month, with history' },
      status: 200,
    });
    await example({
      route: 'POST /v1/ui/meters',
      body: { name: 'tokens', aggregation: 'sum', description: 'Model tokens used by forecasts' },
      status: 201,
    });
    await example({ route: 'GET /v1/ui/meters', status: 200 });
    await example({ route: 'GET /v1/ui/meters/:meterRef', path: { meterRef: 'tokens' }, status: 200 });
  });

  it('customers on a test clock: cards, a purchase, credits and invoices', async () => {
    const clock = await example({
      route: 'POST /v1/sdk/test-clocks',
      body: { frozenTime: '2026-06-01T00:00:00Z', name: 'June renewals' },
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/test-clocks', status: 200 });
    await example({ route: 'GET /v1/sdk/test-clocks/:id', path: { id: clock.id }, status: 200 });
    for (const [externalRef, name] of [
      ['ada', 'Ada Lovelace'],
      ['linus', 'Linus Pauling'],
      ['marie', 'Marie Curie'],
    ] as const)
      await setUp({
        route: 'POST /v1/sdk/customers',
        body: { externalRef, name, email: `${externalRef}@example.com`, testClock: clock.id },
        status: 201,
      });
    await example({
      route: 'POST /v1/sdk/customers',
      body: {
        externalRef: 'grace',
        email: 'grace@example.com',
        name: 'Grace Hopper',
        metadata: { team: 'compilers' },
        address: { line1: '1 Navy Yard', city: 'Arlington', state: 'VA', postalCode: '22202', country: 'US' },
        taxIds: [{ type: 'us_ein', value: '12-3456789' }],
      },
      status: 201,
    });
    await example({
      route: 'POST /v1/sdk/customers/ensure',
      body: { externalRef: 'katherine', email: 'katherine@example.com', name: 'Katherine Johnson' },
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/customers', query: { limit: 10 }, status: 200 });
    await example({ route: 'GET /v1/sdk/customers/:ref', path: { ref: 'ada' }, status: 200 });
    await example({
      route: 'PATCH /v1/sdk/customers/:ref',
      path: { ref: 'grace' },
      body: { name: 'Rear Admiral Grace Hopper', metadata: { team: 'cobol' } },
      status: 200,
    });
    const card = (number: string) => ({ card: { number, expMonth: 12, expYear: 2035, cvc: '123' } });
    await example({
      route: 'POST /v1/sdk/customers/:ref/payment-methods',
      path: { ref: 'ada' },
      body: card(SANDBOX_CARDS.succeeds),
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/customers/:ref/payment-methods', path: { ref: 'ada' }, status: 200 });
    // Grace keeps two cards, makes the older the default again and removes the newer.
    const graceCard = async (number: string) =>
      (
        await setUp({
          route: 'POST /v1/sdk/customers/:ref/payment-methods',
          path: { ref: 'grace' },
          body: card(number),
          status: 201,
        })
      ).body.id as string;
    const [older, newer] = [await graceCard(SANDBOX_CARDS.succeeds), await graceCard('5555555555554444')];
    await example({
      route: 'POST /v1/sdk/customers/:ref/payment-methods/:id/default',
      path: { ref: 'grace', id: older },
      status: 200,
    });
    await example({
      route: 'DELETE /v1/sdk/customers/:ref/payment-methods/:id',
      path: { ref: 'grace', id: newer },
      status: 200,
    });
    const activation = await example({
      route: 'POST /v1/sdk/activate',
      body: { customerRef: 'ada', planRef: made.pro.id },
      status: 200,
    });
    const purchase = activation.purchaseRef as string;
    made.purchase = purchase;
    await example({ route: 'GET /v1/sdk/purchases', query: { customerRef: 'ada' }, status: 200 });
    await example({ route: 'GET /v1/sdk/purchases/:ref', path: { ref: purchase }, status: 200 });
    await example({
      route: 'POST /v1/sdk/purchases/:ref/cancel',
      path: { ref: purchase },
      body: {
        atPeriodEnd: true,
        cancellationDetails: { feedback: 'missing_features', comment: 'We need an export to CSV.' },
      },
      status: 200,
    });
    await example({ route: 'POST /v1/sdk/purchases/:ref/reactivate', path: { ref: purchase }, status: 200 });
    const coupon = await example({
      route: 'POST /v1/sdk/coupons',
      body: {
        name: 'Launch offer',
        code: 'LAUNCH20',
        percentOff: 20,
        duration: 'repeating',
        durationInMonths: 3,
      },
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/coupons', status: 200 });
    await example({ route: 'GET /v1/sdk/coupons/:id', path: { id: 'launch20' }, status: 200 });
    await example({
      route: 'PATCH /v1/sdk/coupons/:id',
      path: { id: coupon.id },
      body: { name: 'Launch offer (spring)' },
      status: 200,
    });
    await example({
      route: 'POST /v1/sdk/purchases/:ref/discount',
      path: { ref: purchase },
      body: { coupon: 'LAUNCH20' },
      status: 200,
    });
    await example({ route: 'DELETE /v1/sdk/purchases/:ref/discount', path: { ref: purchase }, status: 200 });
    await example({ route: 'POST /v1/sdk/coupons/:id/archive', path: { id: coupon.id }, status: 200 });
    await example({
      route: 'POST /v1/sdk/activate/preview',
      body: { customerRef: 'ada', planRef: made.metered.id },
      status: 200,
    });
    await example({
      route: 'POST /v1/sdk/purchases/:ref/cancel/preview',
      path: { ref: purchase },
      status: 200,
    });
    await example({ route: 'GET /v1/sdk/invoices/upcoming', query: { purchaseRef: purchase }, status: 200 });

    // Linus pays as he goes; Ada's card fails from the renewal on.
    await setUp({
      route: 'POST /v1/sdk/customers/:ref/payment-methods',
      path: { ref: 'linus' },
      body: card(SANDBOX_CARDS.succeeds),
      status: 201,
    });
    await setUp({
      route: 'POST /v1/sdk/activate',
      body: { customerRef: 'linus', planRef: made.metered.id },
      status: 200,
    });
    await example({
      route: 'POST /v1/sdk/usages',
      body: {
        customerRef: 'linus',
        productRef: 'weather',
        actionType: 'forecast',
        units: 25,
        outcome: 'success',
      },
      status: 202,
    });
    await setUp({
      route: 'POST /v1/sdk/customers/:ref/payment-methods',
      path: { ref: 'ada' },
      body: card(SANDBOX_CARDS.failsLater),
      status: 201,
    });
    // Marie is on Pro too, and her card fails from the renewal on.
    for (const [number, status] of [
      [SANDBOX_CARDS.succeeds, 201],
      ['activate', 200],
      [SANDBOX_CARDS.failsLater, 201],
    ] as const)
      await setUp(
        number === 'activate'
          ? { route: 'POST /v1/sdk/activate', body: { customerRef: 'marie', planRef: made.pro.id }, status }
          : {
              route: 'POST /v1/sdk/customers/:ref/payment-methods',
              path: { ref: 'marie' },
              body: card(number),
              status,
            },
      );
    // This sandbox's customers are mailed when a recurring payment fails, and a receipt for each payment.
    await example({
      route: 'PATCH /v1/sdk/customer-emails',
      body: { paymentFailed: true, receipts: true },
      status: 200,
    });
    await harness.settled();
    // Two minutes into July: Ada's and Marie's renewals are refused, Linus's June usage is drafted.
    await example({
      route: 'POST /v1/sdk/test-clocks/:id/advance',
      path: { id: clock.id },
      body: { frozenTime: '2026-07-01T00:02:00Z' },
      status: 200,
    });
    const invoices = await example({
      route: 'GET /v1/sdk/invoices',
      query: { customerRef: 'ada' },
      status: 200,
    });
    const paid = invoices.data.find((i: Json) => i.status === 'paid');
    const open = invoices.data.find((i: Json) => i.status === 'open');
    await example({ route: 'GET /v1/sdk/invoices/:id', path: { id: paid.id }, status: 200 });
    await example({ route: 'POST /v1/sdk/invoices/:id/void', path: { id: open.id }, status: 200 });
    // Marie stores a card that works and pays her open invoice at once.
    await setUp({
      route: 'POST /v1/sdk/customers/:ref/payment-methods',
      path: { ref: 'marie' },
      body: card(SANDBOX_CARDS.succeeds),
      status: 201,
    });
    const owed = (
      await setUp({ route: 'GET /v1/sdk/invoices', query: { customerRef: 'marie', status: 'open' } })
    ).body;
    await example({ route: 'POST /v1/sdk/invoices/:id/pay', path: { id: owed.data[0].id }, status: 200 });
    // The scheduler's pass mails the refusal and the receipt.
    await harness.controlPlane.care.customerEmails.runDue();
    await example({ route: 'GET /v1/sdk/customer-emails', status: 200 });
    await example({
      route: 'GET /v1/sdk/customer-emails/messages',
      query: { customerRef: 'marie' },
      status: 200,
    });
    const drafts = (
      await setUp({ route: 'GET /v1/sdk/invoices', query: { customerRef: 'linus', status: 'draft' } })
    ).body;
    await example({
      route: 'POST /v1/sdk/invoices/:id/finalize',
      path: { id: drafts.data[0].id },
      status: 200,
    });

    await example({
      route: 'POST /v1/sdk/customers/:ref/credits',
      path: { ref: 'ada' },
      body: { kind: 'grant', amount: 500, reason: 'Welcome credits' },
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/customers/:ref/balance', path: { ref: 'ada' }, status: 200 });
    await example({ route: 'GET /v1/sdk/customers/:ref/credits', path: { ref: 'ada' }, status: 200 });
    await example({
      route: 'PUT /v1/sdk/customers/:ref/auto-top-up',
      path: { ref: 'ada' },
      body: { productRef: 'weather', threshold: 100, packs: 2 },
      status: 200,
    });
    await example({ route: 'GET /v1/sdk/customers/:ref/auto-top-up', path: { ref: 'ada' }, status: 200 });
    await example({ route: 'DELETE /v1/sdk/customers/:ref/auto-top-up', path: { ref: 'ada' }, status: 200 });
    const alert = await example({
      route: 'POST /v1/sdk/alerts',
      body: { customerRef: 'ada', kind: 'credit_balance', threshold: 50 },
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/alerts', query: { customerRef: 'ada' }, status: 200 });
    await example({ route: 'DELETE /v1/sdk/alerts/:id', path: { id: alert.id }, status: 200 });
    await example({
      route: 'POST /v1/sdk/portal-sessions',
      body: { customerRef: 'ada', returnUrl: 'https://weather.example/account' },
      status: 201,
    });
  });
});

describe('the documented example of every operation, money and usage', () => {
  it('usage: meter events, totals and a limit check', async () => {
    await example({
      route: 'POST /v1/sdk/meter-events',
      body: {
        meterName: 'tokens',
        customerRef: 'grace',
        value: 1200,
        properties: { model: 'small' },
        id: 'forecast-7f3a',
      },
      status: 202,
    });
    await example({
      route: 'POST /v1/sdk/meter-events/bulk',
      body: {
        records: [
          { meterName: 'tokens', customerRef: 'grace', value: 800, properties: { model: 'small' } },
          { meterName: 'tokens', customerRef: 'katherine', value: 4100, properties: { model: 'large' } },
        ],
      },
      status: 202,
    });
    await harness.settled();
    await example({
      route: 'GET /ui/meters/:meterRef/usage',
      path: { meterRef: 'tokens' },
      query: { customerRef: 'grace', groupBy: 'model' },
      status: 200,
    });
    await example({ route: 'GET /ui/meters/:meterRef/customers', path: { meterRef: 'tokens' }, status: 200 });
    await example({ route: 'GET /ui/analytics/daily', status: 200 });
    await example({
      route: 'POST /v1/sdk/limits',
      body: { customerRef: 'grace', productRef: 'weather' },
      status: 200,
    });
  });

  it('checkout, transactions, a refund and a dispute', async () => {
    const session = await example({
      route: 'POST /v1/sdk/checkout-sessions',
      body: { customerRef: 'grace', planRef: made.pro.id, successUrl: 'https://acme-weather.example/thanks' },
      status: 201,
    });
    await example({ route: 'GET /v1/sdk/checkout-sessions/:id', path: { id: session.id }, status: 200 });
    const transactions = await example({
      route: 'GET /v1/ui/transactions',
      query: { limit: 10 },
      status: 200,
    });
    const payment = transactions.data.find((t: Json) => t.amount === 900);
    await example({
      route: 'POST /v1/ui/transactions/refunds',
      body: { originalTransactionId: payment.id, refundAmount: 300, reason: 'requested_by_customer' },
      status: 202,
    });
    const dispute = await example({
      route: 'POST /v1/sdk/sandbox/disputes',
      body: { transactionId: payment.id, amount: 300, reason: 'product_not_received' },
      status: 201,
    });
    await example({ route: 'GET /v1/ui/disputes', status: 200 });
    await example({ route: 'GET /v1/ui/disputes/:id', path: { id: dispute.id }, status: 200 });
    await example({
      route: 'POST /v1/ui/disputes/:id/evidence',
      path: { id: dispute.id },
      body: { evidence: 'Delivery logs: 412 forecasts served to this customer in June.' },
      status: 200,
    });
    await example({
      route: 'POST /v1/sdk/sandbox/disputes/:id/close',
      path: { id: dispute.id },
      body: { outcome: 'won' },
      status: 200,
    });
  });

  it('payouts and the financial reports', async () => {
    const payout = await example({
      route: 'POST /v1/sdk/sandbox/payouts',
      body: { amount: 500 },
      status: 201,
    });
    await example({ route: 'GET /v1/ui/payouts', status: 200 });
    await example({ route: 'GET /v1/ui/payouts/:id', path: { id: payout.id }, status: 200 });
    await example({ route: 'GET /v1/ui/financials/pnl', query: { period: 'q2-2026' }, status: 200 });
    await example({ route: 'GET /v1/ui/financials/cashflow', query: { period: 'q2-2026' }, status: 200 });
  });

  it("customer tokens for the provider's own clients", async () => {
    const token = await example({
      route: 'POST /v1/sdk/customers/:ref/tokens',
      path: { ref: 'grace' },
      body: { productRef: 'weather', expiresInSeconds: 3600 },
      status: 201,
    });
    recorder.mask(token.accessToken, 'eyJhbGciOiJFUzI1NiIsImtpZCI6ImV4YW1wbGUifQ.…');
    await example({
      route: 'POST /v1/sdk/customers/:ref/tokens/revoke',
      path: { ref: 'grace' },
      status: 200,
    });
  });
});

/** The hidden fields of the sign-in page's first form (the log-in one), as the browser posts them. */
function loginForm(html: string): Record<string, string> {
  const form = html.slice(0, html.indexOf('</form>'));
  const unescapeHtml = (text: string) =>
    text
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  return Object.fromEntries(
    [...form.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [
      unescapeHtml(m[1] ?? ''),
      unescapeHtml(m[2] ?? ''),
    ]),
  );
}

describe('the documented example of every operation, MCP and sign-in', () => {
  it('an MCP server in front of an origin', async () => {
    const server = await example({
      route: 'POST /v1/ui/mcp-servers',
      body: { name: 'weather', url: origin.url, productId: made.product.id, defaultPlanId: made.free.id },
      status: 201,
    });
    made.server = server;
    await example({ route: 'GET /v1/ui/mcp-servers', status: 200 });
    await example({ route: 'GET /v1/ui/mcp-servers/:id', path: { id: server.id }, status: 200 });
    await example({
      route: 'POST /v1/ui/mcp-servers/:id/tools/import',
      path: { id: server.id },
      status: 200,
    });
    await example({ route: 'GET /v1/ui/mcp-servers/:id/health', path: { id: server.id }, status: 200 });
    await example({
      route: 'PATCH /v1/ui/mcp-servers/:id',
      path: { id: server.id },
      body: { allowedOrigins: ['https://app.acme-weather.example'] },
      status: 200,
    });
  });

  it('a customer calls a tool through the proxy, in a session of the 2025 era', async () => {
    const token = (
      await setUp({
        route: 'POST /v1/sdk/customers/:ref/tokens',
        path: { ref: 'katherine' },
        body: {},
        status: 201,
      })
    ).body.accessToken as string;
    const path = { subdomain: made.server.subdomain as string };
    await example({
      route: 'GET /.well-known/oauth-protected-resource/mcp/:subdomain',
      proxyOperation: 'getProtectedResourceMetadata',
      as: 'none',
      path,
      status: 200,
    });
    const headers = {
      authorization: `Bearer ${token}`,
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    };
    const mcp = (body: unknown, session?: string) =>
      setUp({
        route: 'POST /mcp/:subdomain',
        proxyOperation: 'callMcpServer',
        as: 'none',
        path,
        headers: { ...headers, ...(session === undefined ? {} : { 'mcp-session-id': session }) },
        body,
      });
    const opened = await mcp({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'forecast-desktop', version: '1.4.0' },
      },
    });
    const session = opened.headers.get('mcp-session-id') ?? '';
    expect(session, `${opened.status} ${JSON.stringify(opened.body)}`).not.toBe('');
    await mcp({ jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    const inSession = { ...headers, 'mcp-session-id': session };
    await example({
      route: 'POST /mcp/:subdomain',
      proxyOperation: 'callMcpServer',
      as: 'none',
      path,
      headers: inSession,
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'add', arguments: { a: 19, b: 23 } },
      },
      status: 200,
    });
    await example({
      route: 'GET /mcp/:subdomain',
      proxyOperation: 'openMcpStream',
      as: 'none',
      path,
      headers: { ...inSession, accept: 'text/event-stream' },
      status: 200,
    });
    await example({
      route: 'DELETE /mcp/:subdomain',
      proxyOperation: 'endMcpSession',
      as: 'none',
      path,
      headers: inSession,
      status: 200,
    });
  });

  it('usage analytics: the calls by tool over days, and each tool’s latency', async () => {
    await harness.settled();
    await example({
      route: 'GET /v1/ui/analytics/usage',
      query: { grain: 'week', timeZone: 'Europe/Paris', groupBy: 'tool' },
      status: 200,
    });
    await example({ route: 'GET /v1/ui/analytics/tools', status: 200 });
    await example({ route: 'GET /v1/ui/analytics/revenue', query: { from: '2026-01' }, status: 200 });
    await example({ route: 'GET /v1/ui/analytics/funnel', status: 200 });
    await example({ route: 'GET /v1/ui/analytics/cancellations', status: 200 });
  });

  it('a customer signs in to it over OAuth: register, sign up, code, token, log in, revoke', async () => {
    const resource = made.server.mcpProxyUrl as string;
    const callback = 'http://127.0.0.1:33418/callback';
    const client = await example({
      route: 'POST /v1/customer/auth/register',
      as: 'none',
      body: {
        client_name: 'Forecast Desktop',
        redirect_uris: [callback],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      },
      status: 201,
    });
    const request = {
      client_id: client.client_id as string,
      redirect_uri: callback,
      code_challenge: CHALLENGE,
      code_challenge_method: 'S256',
      resource,
    };
    const query = { response_type: 'code', state: 'af0ifjsldkj', scope: 'mcp', ...request };
    await example({ route: 'GET /v1/customer/auth/authorize', as: 'none', query, status: 200 });

    const email = 'margaret@example.com';
    const started = await example({
      route: 'POST /v1/customer/auth/signups',
      as: 'none',
      body: { ...request, email, password: PASSWORD, name: 'Margaret Hamilton' },
      status: 202,
    });
    const code = await mailbox.codeFor(email);
    recorder.mask(code, '493817');
    const verified = await example({
      route: 'POST /v1/customer/auth/signups/:verificationId/verify',
      as: 'none',
      path: { verificationId: started.verificationId },
      body: { code },
      status: 200,
    });
    const authorizationCode = new URL(verified.redirectUrl).searchParams.get('code') ?? '';
    recorder.mask(authorizationCode, 'ac_Qm9yZWFsaXM…');
    const tokens = await example({
      route: 'POST /v1/customer/auth/token',
      as: 'none',
      form: {
        grant_type: 'authorization_code',
        code: authorizationCode,
        code_verifier: VERIFIER,
        redirect_uri: callback,
        client_id: client.client_id,
        resource,
      },
      status: 200,
    });
    recorder.mask(tokens.refresh_token, 'rt_U2lyaXVz…');

    const login = await example({
      route: 'POST /v1/customer/auth/logins',
      as: 'none',
      body: { ...request, email, password: PASSWORD, state: 'af0ifjsldkj' },
      status: 200,
    });
    recorder.mask(new URL(login.redirectUrl).searchParams.get('code') ?? '', 'ac_VmVnYQ…');

    // The page's own form: its CSRF cookie and field, as a browser sends them.
    const page = await fetch(`${url}/v1/customer/auth/authorize?${new URLSearchParams(query)}`);
    const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const fields = loginForm(await page.text());
    recorder.mask(fields.csrf ?? '', 'kq3V…');
    const posted = await example({
      route: 'POST /v1/customer/auth/authorize',
      as: 'none',
      headers: { cookie },
      form: { ...fields, email, password: PASSWORD },
      status: 303,
    });
    expect(posted).toBeUndefined();

    await example({
      route: 'POST /v1/customer/auth/revoke',
      as: 'none',
      form: { token: tokens.refresh_token, token_type_hint: 'refresh_token', client_id: client.client_id },
      status: 200,
    });
  });
});

describe('the documented example of every operation, Stripe, webhooks and endings', () => {
  it("live payments: the provider's Stripe account, its reconciliation and its events", async () => {
    await example({
      route: 'PUT /v1/ui/processors/stripe',
      as: 'live',
      body: { secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc', webhookSigningSecret: SIGNING_SECRET },
      status: 200,
    });
    await example({ route: 'GET /v1/ui/processors/stripe', as: 'live', status: 200 });
    await example({
      route: 'GET /v1/ui/processors/stripe/reconciliation',
      as: 'live',
      query: { from: '2026-06-01T00:00:00Z', to: '2026-07-01T00:00:00Z' },
      status: 200,
    });
    const event = {
      id: 'evt_1PayoutPaidExample',
      object: 'event',
      api_version: Stripe.API_VERSION,
      created: 1780300800,
      data: { object: { ...mock.fixtures.payout, id: 'po_1ExamplePayout', amount: 1200, status: 'paid' } },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type: 'payout.paid',
    };
    const raw = JSON.stringify(event);
    await example({
      route: 'POST /v1/processors/stripe/webhooks/:providerId',
      as: 'none',
      path: { providerId },
      headers: {
        'stripe-signature': new Stripe('sk_test_signer').webhooks.generateTestHeaderString({
          payload: raw,
          secret: SIGNING_SECRET,
        }),
      },
      raw,
      status: 200,
    });
    await example({ route: 'DELETE /v1/ui/processors/stripe', as: 'live', status: 200 });
  });

  it('webhook endpoints: a test event, its attempts, a redelivery and a new secret', async () => {
    await example({ route: 'GET /v1/sdk/webhooks/event-types', status: 200 });
    const events = await example({
      route: 'GET /v1/events',
      query: { customerRef: 'ada', type: 'purchase.created,purchase.activated', limit: 2 },
      status: 200,
    });
    await example({
      route: 'GET /v1/events/:id',
      path: { id: (events.data as Array<{ id: string }>)[0]?.id as string },
      status: 200,
    });
    const endpoint = await example({
      route: 'POST /v1/webhook_endpoints',
      body: {
        url: `${receiver.url}/mcp-meter`,
        description: 'Provisioning',
        enabledEvents: ['customer.created', 'purchase.activated', 'payment.succeeded'],
      },
      status: 201,
    });
    recorder.mask(endpoint.secret ?? '', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    await example({ route: 'GET /v1/webhook_endpoints', status: 200 });
    await example({ route: 'GET /v1/webhook_endpoints/:id', path: { id: endpoint.id }, status: 200 });
    await example({
      route: 'PATCH /v1/webhook_endpoints/:id',
      path: { id: endpoint.id },
      body: { description: 'Provisioning and billing' },
      status: 200,
    });
    await example({
      route: 'POST /v1/ui/webhooks/:endpointId/test',
      path: { endpointId: endpoint.id },
      status: 200,
    });
    await example({ route: 'GET /v1/webhook_attempts', query: { endpointId: endpoint.id }, status: 200 });
    // A customer arrives after the endpoint: its customer.created event is sent again on request.
    await setUp({ route: 'POST /v1/sdk/customers', body: { externalRef: 'dorothy' }, status: 201 });
    const { rows } = await harness.pool.query<{ id: string }>(
      `SELECT payload->>'id' AS id FROM outbox_events WHERE provider_id = $1 AND type = 'customer.created'
        ORDER BY created_at DESC LIMIT 1`,
      [providerId],
    );
    await example({
      route: 'POST /v1/webhook_endpoints/:id/redeliver',
      path: { id: endpoint.id },
      body: { eventId: rows[0]?.id },
      status: 202,
    });
    const rotated = await example({
      route: 'POST /v1/webhook_endpoints/:id/rotate-secret',
      path: { id: endpoint.id },
      body: { overlapSeconds: 3600 },
      status: 200,
    });
    recorder.mask(rotated.secret ?? '', 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD');
    await example({
      route: 'POST /v1/webhook_endpoints/:id/disable',
      path: { id: endpoint.id },
      status: 200,
    });
    await example({ route: 'POST /v1/webhook_endpoints/:id/enable', path: { id: endpoint.id }, status: 200 });
    await example({ route: 'DELETE /v1/webhook_endpoints/:id', path: { id: endpoint.id }, status: 200 });
  });

  it('endings: archiving, deleting', async () => {
    await example({ route: 'DELETE /v1/ui/mcp-servers/:id', path: { id: made.server.id }, status: 200 });
    await example({
      route: 'POST /v1/ui/meters/:meterRef/archive',
      path: { meterRef: 'tokens' },
      status: 200,
    });
    const legacy = (
      await setUp({
        route: 'POST /v1/ui/products/:id/plans',
        path: { id: made.product.id },
        body: { name: 'Legacy', type: 'recurring', billingCycle: 'yearly', currency: 'usd', price: 9000 },
        status: 201,
      })
    ).body;
    await example({ route: 'POST /v1/ui/plans/:planRef/archive', path: { planRef: legacy.id }, status: 200 });
    const old = (await setUp({ route: 'POST /v1/ui/products', body: { name: 'Tide tables' }, status: 201 }))
      .body;
    await example({ route: 'POST /v1/ui/products/:id/archive', path: { id: old.id }, status: 200 });
    await example({ route: 'DELETE /v1/sdk/customers/:ref', path: { ref: 'katherine' }, status: 200 });
  });
});

describe('the documented example of every operation, the console', () => {
  it('a console member signs in, reads the session, changes the password, signs out', async () => {
    await new TeamService(harness.pool, systemClock).addMember({
      providerId,
      email: 'ops@acme-weather.example',
      role: 'admin',
      password: PASSWORD,
    });
    const cookieOf = (answer: { headers: Headers }) =>
      (answer.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const session = await example({
      route: 'POST /v1/console/sessions',
      as: 'none',
      body: { email: 'ops@acme-weather.example', password: PASSWORD },
      status: 201,
    });
    recorder.mask(session.csrfToken, 'Q0sRf-TokEn-2b1d…');
    const cookie = cookieOf(lastAnswer);
    const as = { cookie, 'x-csrf-token': session.csrfToken };
    await example({ route: 'GET /v1/console/session', as: 'none', headers: as, status: 200 });
    await example({
      route: 'PUT /v1/console/password',
      as: 'none',
      headers: as,
      body: { currentPassword: PASSWORD, newPassword: 'a new and longer passphrase' },
      status: 200,
    });
    await example({ route: 'DELETE /v1/console/session', as: 'none', headers: as, status: 200 });
    const again = await send({
      route: 'POST /v1/console/sessions',
      as: 'none',
      body: { email: 'ops@acme-weather.example', password: 'a new and longer passphrase' },
      status: 201,
    });
    // A change made in the console, then the log that has it.
    await send({
      route: 'POST /v1/ui/products',
      as: 'none',
      headers: { cookie: cookieOf(again), 'x-csrf-token': again.body.csrfToken },
      body: { name: 'Marine forecasts' },
      status: 201,
    });
    await example({ route: 'GET /v1/ui/audit-events', query: { limit: 3 }, status: 200 });
    await example({
      route: 'POST /v1/console/session/sign-out-everywhere',
      as: 'none',
      headers: { cookie: cookieOf(again), 'x-csrf-token': again.body.csrfToken },
      status: 200,
    });
  });
});

describe('the documented example of every operation, the console team', () => {
  it('someone signs up, invites a teammate who joins, and the team is managed', async () => {
    const founder = 'grace@tidewater.example';
    const started = await example({
      route: 'POST /v1/console/signups',
      as: 'none',
      body: { email: founder, password: PASSWORD, businessName: 'Tidewater Data' },
      status: 202,
    });
    const code = await mailbox.codeFor(founder);
    recorder.mask(code, '602214');
    const owner = await example({
      route: 'POST /v1/console/signups/:id/verify',
      as: 'none',
      path: { id: started.verificationId },
      body: { code },
      status: 201,
    });
    recorder.mask(owner.csrfToken, 'Q0sRf-TokEn-9c4e…');
    const as = {
      cookie: (lastAnswer.headers.get('set-cookie') ?? '').split(';')[0] ?? '',
      'x-csrf-token': owner.csrfToken,
    };
    const teammate = 'alan@tidewater.example';
    const before = mailbox.countFor(teammate);
    await example({
      route: 'POST /v1/ui/team/invitations',
      as: 'none',
      headers: as,
      body: { email: teammate, role: 'developer' },
      status: 201,
    });
    const token = (await mailbox.textFor(teammate, before)).match(/#token=([\w-]+)/)?.[1] ?? '';
    recorder.mask(token, 'ivt-secret-Zm9yZWNhc3Q…');
    await example({ route: 'POST /v1/console/invitations/lookup', as: 'none', body: { token }, status: 200 });
    const joined = await example({
      route: 'POST /v1/console/invitations/accept',
      as: 'none',
      body: { token, password: 'a developer passphrase' },
      status: 201,
    });
    recorder.mask(joined.csrfToken, 'Q0sRf-TokEn-7a0f…');
    const spare = await setUp({
      route: 'POST /v1/ui/team/invitations',
      as: 'none',
      headers: as,
      body: { email: 'ada@tidewater.example', role: 'viewer' },
      status: 201,
    });
    await example({ route: 'GET /v1/ui/team', as: 'none', headers: as, status: 200 });
    await example({
      route: 'DELETE /v1/ui/team/invitations/:id',
      as: 'none',
      headers: as,
      path: { id: spare.body.id },
      status: 200,
    });
    await example({
      route: 'PATCH /v1/ui/team/members/:userId',
      as: 'none',
      headers: as,
      path: { userId: joined.user.id },
      body: { role: 'admin' },
      status: 200,
    });
    // The team's secret keys: made, listed, rolled with an hour's overlap, revoked.
    const key = await example({
      route: 'POST /v1/ui/api-keys',
      as: 'none',
      headers: as,
      body: { name: 'Deploys' },
      status: 201,
    });
    recorder.mask(key.secret, 'sk_test_4eC39HqLyjWDarjtT1zdp7dc');
    await example({ route: 'GET /v1/ui/api-keys', as: 'none', headers: as, status: 200 });
    const rolled = await example({
      route: 'POST /v1/ui/api-keys/:id/roll',
      as: 'none',
      headers: as,
      path: { id: key.id },
      body: { overlapSeconds: 3600 },
      status: 201,
    });
    recorder.mask(rolled.secret, 'sk_test_51Hx9RolledSecretK3yExampl3');
    await example({
      route: 'DELETE /v1/ui/api-keys/:id',
      as: 'none',
      headers: as,
      path: { id: rolled.id },
      status: 200,
    });
    await example({
      route: 'DELETE /v1/ui/team/members/:userId',
      as: 'none',
      headers: as,
      path: { userId: joined.user.id },
      status: 200,
    });
  });
});

/** Whether two examples are the same call answered alike: request, status and shape. */
function alike(a: OperationExample | undefined, b: OperationExample): boolean {
  return (
    a !== undefined &&
    JSON.stringify(a.request) === JSON.stringify(b.request) &&
    a.status === b.status &&
    JSON.stringify(shapeOf(a.response)) === JSON.stringify(shapeOf(b.response))
  );
}

/**
 * What `npm run examples:generate` writes: a new example where the call or its answer's shape
 * changed, the committed one where neither did, so a run's own keys, ids and times (a new JWKS
 * key, a call a second later) do not rewrite every example. MCPMETER_WRITE_EXAMPLES=all writes
 * every one anew (after a change of values alone, such as a default).
 */
function written(examples: Record<string, OperationExample>): Record<string, OperationExample> {
  if (process.env.MCPMETER_WRITE_EXAMPLES === 'all') return examples;
  const committed = JSON.parse(readFileSync(EXAMPLES, 'utf8')) as Record<string, OperationExample>;
  return Object.fromEntries(
    Object.entries(examples).map(([id, now]) => [
      id,
      alike(committed[id], now) ? (committed[id] as OperationExample) : now,
    ]),
  );
}

describe('the examples in the document', () => {
  it('are one per operation, each as the service answers it now', () => {
    const examples = recorder.examples();
    const operations = [...Object.values(OPERATION_IDS), ...PROXY_OPERATION_IDS];
    expect(operations.filter((id) => examples[id] === undefined)).toEqual([]);
    if (WRITE) writeFileSync(EXAMPLES, `${JSON.stringify(written(examples), null, 2)}\n`);
    const committed = JSON.parse(readFileSync(EXAMPLES, 'utf8')) as Record<string, OperationExample>;
    const stale = `control-plane/src/http/operation-examples.json is stale: run \`npm run examples:generate\``;
    expect(Object.keys(committed).sort(), stale).toEqual(Object.keys(examples).sort());
    for (const [id, now] of Object.entries(examples)) {
      const then = committed[id];
      expect(then?.request, `${id}: ${stale}`).toEqual(now.request);
      expect(then?.status, `${id}: ${stale}`).toBe(now.status);
      expect(shapeOf(then?.response), `${id}: ${stale}`).toEqual(shapeOf(now.response));
    }
  });
});
