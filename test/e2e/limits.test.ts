import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type ClientCapabilities, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { apiClient } from '../helpers/api';
import { customerWithToken as newCustomer, suffix } from '../helpers/flows';
import { inspectorCli } from '../helpers/inspector';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { type Service, sharedStackEnv, spawnSplitStack, stackRedisUrl } from '../helpers/processes';
import { startSeller } from '../helpers/seller';

interface ToolResult {
  content: Array<{ type: string; text: string }>;
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}
// biome-ignore lint/suspicious/noExplicitAny: an error's data is asserted field by field
type Json = Record<string, any>;
interface UsageAnswer {
  total: number;
  records: number;
  groups?: Array<{ value: string; records: number }>;
}

/** The machine-readable paywall a tool result carries in `_meta`. */
const paywallOf = (result: ToolResult) =>
  result._meta?.['dev.mcp-meter/paywall'] as Record<string, unknown> | undefined;

const LIMIT = 37;
const CALLS = 200;

/**
 * The hard cap across processes: one control plane + ingest, two proxies sharing Redis, real
 * Kafka and ClickHouse, an origin built with the MCP SDK that requires its own API key.
 */
describe('usage limits, tool gating and the paywall across two proxy processes', () => {
  const infra = inject('infra');
  let dir: string;
  let services: Service[] = [];
  let baseUrl: string;
  let proxyPorts: number[];
  let origin: McpOrigin;
  let api: ReturnType<typeof apiClient>;
  let server: { id: string; subdomain: string; mcpProxyUrl: string };
  let free: { id: string };
  let pro: { id: string };
  let productId: string;
  const baseDomain = 'mcp.test';

  const connect = async (proxyPort: number, accessToken: string, capabilities: ClientCapabilities = {}) => {
    const client = new Client({ name: 'limits-client', version: '1.0.0' }, { capabilities });
    const transport = new StreamableHTTPClientTransport(
      new URL(`http://127.0.0.1:${proxyPort}/mcp/${server.subdomain}`),
      { requestInit: { headers: { authorization: `Bearer ${accessToken}` } } },
    );
    await client.connect(transport);
    return client;
  };
  const customerWithToken = () => newCustomer(api);
  const usage = (customerRef: string, groupBy = 'outcome') =>
    api<UsageAnswer>('GET', `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=${groupBy}`);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcpmeter-limits-'));
    chmodSync(dir, 0o755);
    const port = await freePort();
    proxyPorts = [await freePort(), await freePort()];
    baseUrl = `http://127.0.0.1:${port}`;
    const env = sharedStackEnv({
      name: 'limits',
      infra,
      dir,
      port,
      extra: { SECRET_KEY: 'ab'.repeat(32) },
    });
    const stack = spawnSplitStack({
      env,
      logDir: dir,
      proxies: proxyPorts.map((proxyPort, i) => ({
        PROXY_PORT: String(proxyPort),
        PROXY_SPILL_DIR: join(dir, `spill-${i}`),
        // The second proxy also routes by Host, as behind a wildcard DNS name.
        ...(i === 1 ? { PROXY_BASE_DOMAIN: baseDomain } : {}),
      })),
    });
    services = stack.services;
    await stack.ready;

    origin = await startMcpOrigin({ requireHeader: ['x-api-key', 'origin-secret-1'], echo: true });
    const seller = await startSeller(
      { env, baseUrl },
      {
        provider: 'Limits Co',
        product: 'Calculator',
        plans: [
          // The product's default plan is also what the SDK limit check falls back to without a purchase.
          { name: 'Free', price: 0, limit: LIMIT, default: true },
          { name: 'Pro', price: 900, limit: 100_000 },
        ],
      },
    );
    ({ api, productId } = seller);
    free = { id: seller.plans.Free as string };
    pro = { id: seller.plans.Pro as string };
    const registered = await api<typeof server & { hasAuthApiKey: boolean }>('POST', '/v1/ui/mcp-servers', {
      name: `calc-${suffix()}`,
      url: origin.url,
      productId,
      defaultPlanId: free.id,
      authHeaderName: 'X-Api-Key',
      authApiKey: 'origin-secret-1',
      tools: [
        { name: 'fail', noPlan: true },
        { name: 'echo', planIds: [pro.id] },
        { name: 'report', planIds: [pro.id] },
      ],
    });
    expect(registered.status).toBe(201);
    expect(registered.body.hasAuthApiKey).toBe(true);
    expect(JSON.stringify(registered.body)).not.toContain('origin-secret-1');
    server = registered.body;
  });

  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`admits exactly ${LIMIT} of ${CALLS} concurrent calls over two proxies and records each call once`, async () => {
    const customer = await customerWithToken();
    const clients = await Promise.all(
      [0, 1, 0, 1].map((i) => connect(proxyPorts[i] as number, customer.token)),
    );
    const results = (await Promise.all(
      Array.from({ length: CALLS }, (_, i) =>
        clients[i % clients.length]?.callTool({ name: 'add', arguments: { a: i, b: 1 } }),
      ),
    )) as ToolResult[];
    const succeeded = results.filter((r) => r.isError !== true);
    const paywalled = results.filter((r) => paywallOf(r)?.kind === 'payment_required');
    expect(succeeded).toHaveLength(LIMIT);
    expect(paywalled).toHaveLength(CALLS - LIMIT);
    // The origin ran exactly the admitted calls, each with its API key added by the proxy.
    expect(origin.calls.get('add')).toBe(LIMIT);
    expect(origin.seenAuth.every((value) => value === 'origin-secret-1')).toBe(true);

    // The paywall is a tool result naming one reusable checkout session.
    const wall = paywalled[0] as ToolResult;
    expect(wall.structuredContent).toBeUndefined();
    expect(paywallOf(wall)).toMatchObject({
      kind: 'payment_required',
      reason: 'limit_reached',
      limit: LIMIT,
      used: LIMIT,
      product: { name: 'Calculator' },
      // A customer made through the API without an email cannot sign in: no portal is offered.
      portalUrl: null,
    });
    expect(wall.content[0]?.text).toContain(String(paywallOf(wall)?.checkoutUrl));
    const sessions = new Set(paywalled.map((r) => paywallOf(r)?.checkoutSessionId));
    expect(sessions.size).toBe(1);
    const session = await api<{ planRef: string; status: string }>(
      'GET',
      `/v1/sdk/checkout-sessions/${[...sessions][0]}`,
    );
    expect(session.body).toMatchObject({ planRef: pro.id, status: 'active' });

    // noPlan tools stay open past the limit.
    const failing = (await clients[1]?.callTool({ name: 'fail', arguments: {} })) as ToolResult;
    expect(failing.content).toEqual([{ type: 'text', text: 'nope' }]);
    for (const client of clients) await client.close();

    // ClickHouse: one record per tools/call with the right outcome.
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= CALLS + 1,
      { what: 'usage records of every call', timeoutMs: 40_000 },
    );
    expect(recorded.records).toBe(CALLS + 1);
    expect(recorded.groups).toEqual([
      { value: 'paywall', records: CALLS - LIMIT },
      { value: 'success', records: LIMIT },
      { value: 'error', records: 1 },
    ]);
    // Billable: the calls served (the failing tool's included), never the paywall's refusals.
    expect(recorded.total).toBe(LIMIT + 1);
    // Each limited call judged by the free plan, admitted or refused at its limit; the noPlan tool by none.
    expect((await usage(customer.ref, 'planId')).body.groups).toEqual(
      expect.arrayContaining([{ value: free.id, records: CALLS }]),
    );

    // The SDK limit check reads the same counter and offers the same session.
    const check = await api<Record<string, unknown>>('POST', '/v1/sdk/limits', {
      customerRef: customer.ref,
      productRef: (await api<{ productId: string }>('GET', `/v1/ui/mcp-servers/${server.id}`)).body.productId,
      consume: false,
    });
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({
      withinLimits: false,
      limit: LIMIT,
      used: LIMIT,
      remaining: 0,
      checkoutSessionId: [...sessions][0],
    });

    // Redis loses the counter: it is seeded again from ClickHouse (37 admitted calls), so the
    // cap holds across the loss.
    const redis = new Redis(stackRedisUrl(infra, 'limits'));
    const keys = await redis.keys(`mcpmeter:limit:sandbox:*:${customer.ref}:*`);
    expect(keys.length).toBeGreaterThan(0);
    await redis.del(...keys);
    await redis.quit();
    const again = await connect(proxyPorts[1] as number, customer.token);
    const after = (await again.callTool({ name: 'add', arguments: { a: 1, b: 1 } })) as ToolResult;
    expect(paywallOf(after)).toMatchObject({ kind: 'payment_required', used: LIMIT, limit: LIMIT });
    expect(origin.calls.get('add')).toBe(LIMIT);
    await again.close();
  });

  it('opens a plan-gated tool only after the customer buys that plan', async () => {
    const customer = await customerWithToken();
    const client = await connect(proxyPorts[0] as number, customer.token);
    const gated = (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })) as ToolResult;
    expect(paywallOf(gated)).toMatchObject({ kind: 'payment_required', reason: 'plan_required' });
    expect(origin.calls.get('echo') ?? 0).toBe(0);
    // Ungated tools run on the free default plan meanwhile.
    expect(
      ((await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })) as ToolResult).content,
    ).toEqual([{ type: 'text', text: '2' }]);

    await api('POST', `/v1/sdk/customers/${customer.ref}/payment-methods`, {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    const bought = await api<{ status: string }>('POST', '/v1/sdk/activate', {
      customerRef: customer.ref,
      planRef: pro.id,
    });
    expect(bought.body.status).toBe('activated');
    const opened = await pollUntil(
      async () => (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })) as ToolResult,
      (r) => r.isError !== true,
      { what: 'echo opened by the purchase', timeoutMs: 10_000 },
    );
    expect(opened.content).toEqual([{ type: 'text', text: 'hi' }]);
    await client.close();
  });

  it('shows the paywall to an SDK client on a tool with an outputSchema, as a readable tool error', async () => {
    const customer = await customerWithToken();
    const client = await connect(proxyPorts[0] as number, customer.token);
    // Listing tools makes the SDK check every structuredContent against the tool's outputSchema.
    const tools = await client.listTools();
    expect(tools.tools.find((t) => t.name === 'report')?.outputSchema).toBeDefined();
    const wall = (await client.callTool({ name: 'report', arguments: {} })) as ToolResult;
    expect(wall.isError).toBe(true);
    expect(wall.structuredContent).toBeUndefined();
    expect(paywallOf(wall)).toMatchObject({ kind: 'payment_required', reason: 'plan_required' });
    expect(wall.content[0]?.text).toContain(String(paywallOf(wall)?.checkoutUrl));
    expect(origin.calls.get('report') ?? 0).toBe(0);
    await client.close();
    // On the funnel as a text link the 2025 era saw, offering the checkout in its _meta.
    const funnel = await pollUntil(
      async () =>
        (
          await api<{ byForm: Array<{ era: string; form: string; shown: number; offered: number }> }>(
            'GET',
            `/v1/ui/analytics/funnel?customerRef=${customer.ref}`,
          )
        ).body,
      (body) => body.byForm.length > 0,
      { what: 'the paywall on the funnel', timeoutMs: 30_000 },
    );
    expect(funnel.byForm).toEqual([
      expect.objectContaining({ era: 'legacy', form: 'text_link', shown: 1, offered: 1 }),
    ]);
  });

  it('asks a client that declared URL elicitation to open the checkout: inside the call, or -32042', async () => {
    const customer = await customerWithToken();
    const client = await connect(proxyPorts[1] as number, customer.token, { elicitation: { url: {} } });
    const asked: Array<{ mode?: string; url?: string; elicitationId?: string; message?: string }> = [];
    // The customer turns the checkout down (test/e2e/paywall-wait.test.ts pays, and waits).
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params as (typeof asked)[number]);
      return { action: 'decline' };
    });
    const echoes = origin.calls.get('echo') ?? 0;
    const declined = (await client.callTool({ name: 'echo', arguments: { text: 'hi' } })) as ToolResult;
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ mode: 'url', url: expect.stringContaining('/checkout/cs_') });
    expect(asked[0]?.message).toContain('complete checkout for');
    const session = await api<{ planRef: string }>(
      'GET',
      `/v1/sdk/checkout-sessions/${asked[0]?.elicitationId}`,
    );
    expect(session.body.planRef).toBe(pro.id);
    // Declined: the call ends with the readable paywall, the link in its text.
    expect(declined.isError).toBe(true);
    expect(declined.content[0]?.text).toContain(String(asked[0]?.url));

    // A call that cannot wait in an event stream (its client takes JSON only) gets -32042, whose
    // message itself names the link: a client that shows only the message shows where to pay.
    const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId as string;
    const refused = await fetch(`http://127.0.0.1:${proxyPorts[1]}/mcp/${server.subdomain}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${customer.token}`,
        'content-type': 'application/json',
        accept: 'application/json',
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 9,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'hi' } },
      }),
    });
    const error = ((await refused.json()) as { error: { code: number; message: string; data: Json } }).error;
    expect(error.code).toBe(-32042);
    expect(error.data.elicitations[0]).toMatchObject({ mode: 'url', url: asked[0]?.url });
    expect(error.message).toContain(String(asked[0]?.url));
    expect(origin.calls.get('echo') ?? 0).toBe(echoes);
    await client.close();
    // Recorded like any paywall: once for each refused call.
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 2,
      { what: 'the paywalled calls recorded', timeoutMs: 30_000 },
    );
    expect(recorded.groups).toEqual([{ value: 'paywall', records: 2 }]);

    // The funnel: two paywalls of the 2025 era, one asked inside the call and one -32042, both
    // offering the one session; opened once the customer loads its page, and not paid.
    type Funnel = {
      totals: { shown: number; offered: number; opened: number; paid: number };
      byForm: Array<{ era: string; form: string; shown: number; offered: number }>;
      byPlan: Array<{ planId: string | null; planName: string | null; shown: number; offered: number }>;
    };
    const funnel = async () =>
      (await api<Funnel>('GET', `/v1/ui/analytics/funnel?customerRef=${customer.ref}`)).body;
    const before = await funnel();
    expect(before.totals).toMatchObject({ shown: 2, offered: 1, opened: 0, paid: 0 });
    expect(before.byForm.map((f) => [f.era, f.form, f.shown, f.offered]).sort()).toEqual([
      ['legacy', 'error_32042', 1, 1],
      ['legacy', 'url_elicitation', 1, 1],
    ]);
    expect(before.byPlan).toMatchObject([{ planId: pro.id, planName: 'Pro', shown: 2, offered: 1 }]);
    expect((await fetch(String(asked[0]?.url))).status).toBe(200);
    expect((await funnel()).totals).toMatchObject({ shown: 2, offered: 1, opened: 1, paid: 0 });
  });

  it("serves MCP Inspector's CLI: tools listed, a call metered, the paywall readable", async () => {
    const inspect = await inspectorCli();
    const customer = await customerWithToken();
    const url = `http://127.0.0.1:${proxyPorts[0]}/mcp/${server.subdomain}`;
    const listed = await inspect(url, customer.token, 'tools/list');
    expect(listed.code).toBe(0);
    const names = (listed.output.tools as Array<{ name: string }>).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['add', 'echo', 'fail', 'report']));

    const adds = origin.calls.get('add') ?? 0;
    const echoes = origin.calls.get('echo') ?? 0;
    const added = await inspect(url, customer.token, 'tools/call', [
      '--tool-name',
      'add',
      '--tool-arg',
      'a=2',
      'b=3',
    ]);
    expect(added.code).toBe(0);
    expect(added.output.content).toEqual([{ type: 'text', text: '5' }]);
    expect(origin.calls.get('add')).toBe(adds + 1);

    // A plan-gated tool: the paywall as a tool result the CLI prints like any other.
    const gated = await inspect(url, customer.token, 'tools/call', [
      '--tool-name',
      'echo',
      '--tool-arg',
      'text=hi',
    ]);
    const wall = gated.output as unknown as ToolResult;
    expect(wall.isError).toBe(true);
    expect(paywallOf(wall)).toMatchObject({ kind: 'payment_required', reason: 'plan_required' });
    expect(wall.content[0]?.text).toContain(String(paywallOf(wall)?.checkoutUrl));
    expect(origin.calls.get('echo') ?? 0).toBe(echoes);

    // A bad token: the proxy's 401 and its challenge tell the CLI to sign in (OAuth), which it
    // cannot do without a terminal, and says so.
    const refused = await inspect(url, 'not-a-token', 'tools/list');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('auth_required');

    // Each call recorded once, by what happened to it.
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 2,
      { what: "the Inspector's calls recorded", timeoutMs: 30_000 },
    );
    expect(recorded.records).toBe(2);
    expect(recorded.groups).toEqual(
      expect.arrayContaining([
        { value: 'success', records: 1 },
        { value: 'paywall', records: 1 },
      ]),
    );
  });

  it('routes by Host on a proxy with a base domain', async () => {
    const customer = await customerWithToken();
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port: proxyPorts[1],
          path: '/mcp',
          method: 'POST',
          headers: {
            host: `${server.subdomain}.${baseDomain}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            authorization: `Bearer ${customer.token}`,
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-03-26',
            capabilities: {},
            clientInfo: { name: 'h', version: '1' },
          },
        }),
      );
    });
    expect(status).toBe(200);
  });

  it('spends credits per call exactly across both proxies, debits them once, and reopens on more credits', async () => {
    const credit = await api<{ id: string }>('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Credits',
      type: 'usage-based',
      billingModel: 'pre-paid',
      creditsPerUnit: 3,
      topUp: { credits: 30, amount: 500 },
    });
    expect(credit.status).toBe(201);
    const customer = await customerWithToken();
    const credits = (body: Record<string, unknown>) =>
      api('POST', `/v1/sdk/customers/${customer.ref}/credits`, body);
    expect((await credits({ kind: 'grant', amount: 20 })).status).toBe(201);
    const activated = await api<{ status: string }>('POST', '/v1/sdk/activate', {
      customerRef: customer.ref,
      planRef: credit.body.id,
    });
    expect(activated.body.status).toBe('activated');

    const adds = origin.calls.get('add') ?? 0;
    const clients = await Promise.all(
      [0, 1, 0, 1].map((i) => connect(proxyPorts[i] as number, customer.token)),
    );
    const burst = async (count: number) =>
      (await Promise.all(
        Array.from({ length: count }, (_, i) =>
          clients[i % clients.length]?.callTool({ name: 'add', arguments: { a: i, b: 1 } }),
        ),
      )) as ToolResult[];
    // 20 credits at 3 a call: 6 calls, whichever proxy serves them; 2 credits stay unspent.
    const first = await burst(40);
    expect(first.filter((r) => r.isError !== true)).toHaveLength(6);
    expect(origin.calls.get('add')).toBe(adds + 6);
    const walls = first.filter((r) => r.isError === true);
    expect(walls).toHaveLength(34);
    for (const wall of walls)
      expect(paywallOf(wall)).toMatchObject({ reason: 'credits_exhausted', creditsPerUnit: 3 });
    // The paywall offers the plan's top-up pack.
    const session = await api<{ amount: number; status: string }>(
      'GET',
      `/v1/sdk/checkout-sessions/${paywallOf(walls[0] as ToolResult)?.checkoutSessionId}`,
    );
    expect(session.body).toMatchObject({ amount: 500, status: 'active' });
    expect((walls[0] as ToolResult).content[0]?.text).toContain('top up your credits');

    // The 6 calls' records reach ClickHouse; reading the balance debits them, once.
    await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 40,
      { what: 'the burst recorded', timeoutMs: 40_000 },
    );
    // Every call of the burst was judged by the purchased plan: served or refused for credits.
    expect((await usage(customer.ref, 'planId')).body.groups).toEqual([
      { value: credit.body.id, records: 40 },
    ]);
    const balance = await api<{ credits: number }>('GET', `/v1/sdk/customers/${customer.ref}/balance`);
    expect(balance.body.credits).toBe(2);
    const ledger = await api<{ data: Array<{ kind: string; amount: number }> }>(
      'GET',
      `/v1/sdk/customers/${customer.ref}/credits`,
    );
    expect(ledger.body.data.map((m) => [m.kind, m.amount])).toEqual([
      ['usage', -18],
      ['grant', 20],
    ]);

    // More credits reach both proxies: 2 + 10 = 12 credits, 4 more calls.
    expect((await credits({ kind: 'grant', amount: 10 })).status).toBe(201);
    // Each proxy learns of them when the entitlement changes; until then it refuses.
    await pollUntil(
      () => burst(8),
      () => origin.calls.get('add') === adds + 10,
      { what: 'calls admitted on the new credits', timeoutMs: 10_000 },
    );
    const after = await burst(8);
    expect(after.every((r) => paywallOf(r)?.reason === 'credits_exhausted')).toBe(true);
    expect(origin.calls.get('add')).toBe(adds + 10);
    for (const client of clients) await client.close();
  });

  it('gives a call refused for want of credits its unit of the plan limit back', async () => {
    // A plan capped at 4 calls a period and paid from credits: a call takes a unit of the cap
    // first, then its credits; refused for credits, the unit returns, so topped-up credits find
    // the cap's whole remainder.
    const capped = await api<{ id: string }>('POST', `/v1/ui/products/${productId}/plans`, {
      name: 'Capped credits',
      type: 'usage-based',
      billingModel: 'pre-paid',
      creditsPerUnit: 1,
      limit: 4,
    });
    expect(capped.status).toBe(201);
    const customer = await customerWithToken();
    const credits = (body: Record<string, unknown>) =>
      api('POST', `/v1/sdk/customers/${customer.ref}/credits`, body);
    expect((await credits({ kind: 'grant', amount: 2 })).status).toBe(201);
    const activated = await api<{ status: string }>('POST', '/v1/sdk/activate', {
      customerRef: customer.ref,
      planRef: capped.body.id,
    });
    expect(activated.body.status).toBe('activated');
    const adds = origin.calls.get('add') ?? 0;
    const clients = await Promise.all([0, 1].map((i) => connect(proxyPorts[i] as number, customer.token)));
    const burst = async (count: number) =>
      (await Promise.all(
        Array.from({ length: count }, (_, i) =>
          clients[i % clients.length]?.callTool({ name: 'add', arguments: { a: i, b: 2 } }),
        ),
      )) as ToolResult[];
    // One call at a time: calls at once could find the cap's units held by calls still
    // waiting on their credits.
    const first: ToolResult[] = [];
    for (let i = 0; i < 10; i++)
      first.push((await clients[i % 2]?.callTool({ name: 'add', arguments: { a: i, b: 2 } })) as ToolResult);
    expect(first.filter((r) => r.isError !== true)).toHaveLength(2);
    expect(first.filter((r) => paywallOf(r)?.reason === 'credits_exhausted')).toHaveLength(8);
    // Credits for 10 more calls; the cap has 2 left.
    expect((await credits({ kind: 'grant', amount: 10 })).status).toBe(201);
    await pollUntil(
      () => burst(4),
      () => origin.calls.get('add') === adds + 4,
      { what: 'the cap reached on the new credits', timeoutMs: 10_000 },
    );
    const after = await burst(4);
    expect(after.every((r) => paywallOf(r)?.reason === 'limit_reached')).toBe(true);
    expect(origin.calls.get('add')).toBe(adds + 4);
    for (const client of clients) await client.close();
  });

  it('imports the tool list from the origin, keeping plan settings', async () => {
    const imported = await api<{ tools: Array<{ name: string; planIds: string[]; noPlan: boolean }> }>(
      'POST',
      `/v1/ui/mcp-servers/${server.id}/tools/import`,
    );
    expect(imported.status).toBe(200);
    expect(imported.body.tools.map((t) => [t.name, t.planIds, t.noPlan]).sort()).toEqual([
      ['add', [], false],
      ['announce', [], false],
      ['countdown', [], false],
      ['echo', [pro.id], false],
      ['fail', [], true],
      ['report', [pro.id], false],
    ]);
  });

  it('checks the origin as a client would: initialize and tools/list, timed', async () => {
    const health = await api<Record<string, unknown>>('GET', `/v1/ui/mcp-servers/${server.id}/health`);
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ healthy: true, toolCount: 6, problem: null });
    expect(health.body.protocolVersion).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(typeof health.body.serverName).toBe('string');
    expect(health.body.latencyMs).toEqual(expect.any(Number));
  });

  it('fills totalTransactions and balance from real data and exposes proxy metrics', async () => {
    // Every tools/call through the proxy carries the server's id; the SDK check's records do not.
    const callsOf = (body: UsageAnswer) => body.groups?.find((g) => g.value === server.id)?.records ?? 0;
    // Both read together until the records stop arriving (the earlier tests' last calls may still
    // be on their way through the bus): the server's count is then the usage store's.
    const { calls, listed } = await pollUntil(
      async () => {
        const usage = await api<UsageAnswer>('GET', '/ui/meters/requests/usage?groupBy=server');
        const servers = await api<Array<{ id: string; totalTransactions?: number; balance: number }>>(
          'GET',
          '/v1/ui/mcp-servers',
        );
        return { calls: callsOf(usage.body), listed: servers.body };
      },
      ({ calls, listed }) => calls >= CALLS + 4 && listed[0]?.totalTransactions === calls,
      { what: 'every call of the server recorded, and counted by the server list', timeoutMs: 30_000 },
    );
    // One Pro purchase at 9.00 was paid; nothing refunded.
    expect(listed[0]).toMatchObject({ id: server.id, totalTransactions: calls, balance: 900 });
    const metrics = await (await fetch(`http://127.0.0.1:${proxyPorts[0]}/metrics`)).text();
    expect(metrics).toMatch(/mcpmeter_proxy_limit_decisions_total\{decision="paywall"\} \d+/);
    expect(metrics).toMatch(/mcpmeter_proxy_own_seconds_count \d+/);
    // Every answer the origin gave was timed again at its end to the client.
    const answered = /mcpmeter_proxy_origin_seconds_count (\d+)/.exec(metrics)?.[1];
    expect(Number(answered)).toBeGreaterThan(0);
    expect(metrics).toContain(`mcpmeter_proxy_answer_seconds_count ${answered}\n`);
    // And what the proxy added to each: its own time and answer time, the origin's left out.
    expect(metrics).toContain(`mcpmeter_proxy_added_seconds_count ${answered}\n`);
    const sum = (name: string) => Number(new RegExp(`${name}_sum (\\S+)`).exec(metrics)?.[1]);
    // Own time counts requests sent and never answered too: the sum is at most both together.
    expect(sum('mcpmeter_proxy_added_seconds')).toBeGreaterThan(sum('mcpmeter_proxy_answer_seconds'));
    expect(sum('mcpmeter_proxy_added_seconds')).toBeLessThanOrEqual(
      sum('mcpmeter_proxy_own_seconds') + sum('mcpmeter_proxy_answer_seconds') + 1e-9,
    );
    expect(metrics).toMatch(/mcpmeter_proxy_limit_store_commands_total \d+/);
    // Checks that waited for Redis: each counter's first call and every check at a reached limit.
    expect(Number(/mcpmeter_proxy_limit_store_waits_total (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
    // Every request it served (the 200 concurrent calls among them) has left its in-flight list.
    expect(metrics).toContain('mcpmeter_proxy_inflight_requests 0\n');
    expect(metrics).toMatch(/mcpmeter_proxy_event_loop_delay_seconds\{quantile="0\.99"\} \d/);
    // The pause metrics are on the page. Whether these few calls filled the young generation (32
    // MB a semi-space with the service's flags) is the heap's business: a kind's samples appear
    // with its first collection, and the counting is proven in contracts/test/gc-pauses.unit.test.ts.
    expect(metrics).toContain('# TYPE mcpmeter_proxy_gc_pauses_total counter\n');
    expect(metrics).toContain('# TYPE mcpmeter_proxy_gc_pause_max_seconds gauge\n');
    const minor = /mcpmeter_proxy_gc_pauses_total\{kind="minor"\} (\d+)/.exec(metrics);
    if (minor !== null) expect(Number(minor[1])).toBeGreaterThan(0);
  });
});
