import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { apiClient } from '../helpers/api';
import { customerWithToken as newCustomer, suffix } from '../helpers/flows';
import { type ModernOrigin, startModernOrigin } from '../helpers/mcp-origin-v2';
import { pollUntil } from '../helpers/poll';
import { pythonWith } from '../helpers/python';
import { type SplitStack, startSeller, startSplitStack } from '../helpers/seller';

interface ToolResult {
  content: Array<{ type: string; text: string }>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}
// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;
type Rpc = { status: number; body: Json };

const MODERN = '2026-07-28';

/**
 * MCP 2026-07-28 through the proxy, with the TypeScript SDK v2 on both ends (a client pinned to
 * the revision or in `auto` mode, an origin on `createMcpHandler`): calls pass through and are
 * metered; the paywall is read by the client (an `input_required` URL elicitation the client
 * fulfils, or a readable tool error); the retry after checkout is served once; a tampered state
 * and headers the body contradicts are refused with nothing forwarded or spent.
 */
describe('MCP 2026-07-28 through the proxy', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let baseUrl: string;
  let proxyUrl: string;
  let origin: ModernOrigin;
  let api: ReturnType<typeof apiClient>;
  let subdomain: string;

  const customerWithToken = () => newCustomer(api);
  const connect = async (
    token: string,
    options: { urlElicitation?: boolean; formElicitation?: boolean; mode?: 'auto' | { pin: string } } = {},
  ) => {
    const client = new Client(
      { name: 'modern-client', version: '1.0.0' },
      {
        capabilities: {
          ...(options.urlElicitation === true || options.formElicitation === true
            ? {
                elicitation: {
                  ...(options.urlElicitation === true ? { url: {} } : {}),
                  ...(options.formElicitation === true ? { form: {} } : {}),
                },
              }
            : {}),
        },
        versionNegotiation: { mode: options.mode ?? { pin: MODERN } },
      },
    );
    const transport = new StreamableHTTPClientTransport(new URL(`${proxyUrl}/mcp/${subdomain}`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    });
    await client.connect(transport);
    return client;
  };
  /** A modern tools/call sent by hand, with its mirrored headers (overridable). */
  const rawCall = async (
    token: string,
    params: Record<string, unknown>,
    headers: Record<string, string> = {},
    capabilities: Json = {},
  ) => {
    const response = await fetch(`${proxyUrl}/mcp/${subdomain}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/call',
        'mcp-name': String(params.name),
        ...headers,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': capabilities,
          },
        },
      }),
    });
    return { status: response.status, body: (await response.json()) as Json } as Rpc;
  };
  const usage = (customerRef: string) =>
    api<{ total: number; records: number; groups?: Array<{ value: string; records: number }> }>(
      'GET',
      `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
    );

  beforeAll(async () => {
    stack = await startSplitStack({ name: 'modern', infra, secretKey: 'cd'.repeat(32), publicUrl: true });
    baseUrl = stack.baseUrl;
    proxyUrl = stack.proxyUrl;
    await stack.ready;
    origin = await startModernOrigin();
    const seller = await startSeller(stack, {
      provider: 'Modern Co',
      product: 'Adder',
      plans: [
        { name: 'Free', price: 0, limit: 1, default: true },
        { name: 'Pro', price: 900, limit: 1000 },
      ],
    });
    api = seller.api;
    subdomain = (await seller.register(origin.url, { defaultPlan: 'Free', name: `adder-${suffix()}` }))
      .subdomain;
  });

  afterAll(async () => {
    await stack?.stop();
    await origin?.close();
  });

  it('serves a pinned client, and past the limit shows it a checkout it completes, then serves the retry once', async () => {
    const customer = await customerWithToken();
    const client = await connect(customer.token, { urlElicitation: true });
    const first = (await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })) as ToolResult;
    expect(first.content[0]?.text).toBe('3');

    // The plan's one call is spent: the paywall is an input_required URL elicitation. The
    // client's handler "completes checkout" (pays the session on the hosted page) and accepts;
    // the SDK retries with the proxy's requestState, the limit is checked again, and the call runs.
    const asked: Array<{ mode?: string; url?: string; message?: string }> = [];
    const paidSessions = new Set<string>();
    client.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { mode?: string; url?: string; message?: string };
      asked.push(params);
      const session = new URL(String(params.url)).pathname.split('/').at(-1) as string;
      if (!paidSessions.has(session)) {
        const paid = await fetch(`${baseUrl}/checkout/${session}/pay`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
          }),
        });
        expect(paid.status).toBe(200);
        paidSessions.add(session);
      }
      // A retry that reaches the proxy before the new plan's announcement waits for it.
      return { action: 'accept' };
    });
    const before = origin.calls.get('add') ?? 0;
    const second = (await client.callTool({ name: 'add', arguments: { a: 2, b: 5 } })) as ToolResult;
    expect(asked).toHaveLength(1);
    expect(paidSessions.size).toBe(1);
    expect(asked[0]).toMatchObject({ mode: 'url', url: expect.stringContaining('/checkout/cs_') });
    expect(asked[0]?.message).toContain('complete checkout');
    expect(second.isError ?? false).toBe(false);
    expect(second.content[0]?.text).toBe('7');
    expect(origin.calls.get('add') ?? 0).toBe(before + 1);
    await client.close();

    // Recorded: the first call, the paywall once, and the served retry.
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 3,
      { what: 'every round recorded', timeoutMs: 30_000 },
    );
    expect(recorded.groups).toEqual(
      expect.arrayContaining([
        { value: 'success', records: 2 },
        { value: 'paywall', records: 1 },
      ]),
    );
  });

  it('shows a modern client without URL elicitation a readable paywall, in auto mode too', async () => {
    const customer = await customerWithToken();
    for (const mode of [{ pin: MODERN }, 'auto'] as const) {
      const client = await connect(customer.token, { mode });
      const result = (await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })) as ToolResult;
      await client.close();
      if (result.isError === true) {
        expect(result.content[0]?.text).toContain('/checkout/cs_');
        expect(result._meta?.['dev.mcp-meter/paywall']).toMatchObject({ kind: 'payment_required' });
      } else expect(result.content[0]?.text).toBe('2');
    }
    // One of the two was served, the other paywalled.
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 2,
      { what: 'two records', timeoutMs: 30_000 },
    );
    expect(recorded.groups).toEqual(
      expect.arrayContaining([
        { value: 'success', records: 1 },
        { value: 'paywall', records: 1 },
      ]),
    );
    // The meter's total is what can be billed: the served call, not the refusal.
    expect(recorded.total).toBe(1);
    expect(recorded.records).toBe(2);
  });

  it('bills a multi-round call once: it completes with one call left, and its input round is not billable', async () => {
    // The free plan allows one call. The deploy tool asks for a confirmation first (input_required
    // with a requestState); the SDK answers it and retries: one call, one unit.
    const customer = await customerWithToken();
    const client = await connect(customer.token, { formElicitation: true });
    const asked: Array<{ message?: string }> = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(request.params as { message?: string });
      return { action: 'accept', content: { confirm: true } };
    });
    const before = origin.calls.get('deploy') ?? 0;
    const deployed = (await client.callTool({ name: 'deploy', arguments: { env: 'prod' } })) as ToolResult;
    expect(deployed.isError ?? false).toBe(false);
    expect(deployed.content[0]?.text).toBe('deployed to prod');
    expect(asked.map((a) => a.message)).toEqual(['Deploy to prod?']);
    expect(origin.calls.get('deploy') ?? 0).toBe(before + 2);

    // That call spent the plan's one unit: the next call meets the paywall.
    const next = (await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })) as ToolResult;
    expect(next.isError).toBe(true);
    await client.close();
    // The hold is taken once: the same retry sent again is a new call, and is paywalled.
    const replay = await rawCall(customer.token, {
      name: 'deploy',
      arguments: { env: 'prod' },
      requestState: 'deploy:prod',
      inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
    });
    expect(replay.body.result?.isError).toBe(true);
    expect(origin.calls.get('deploy') ?? 0).toBe(before + 2);

    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 4,
      { what: 'every round recorded', timeoutMs: 30_000 },
    );
    expect(recorded.groups).toEqual(
      expect.arrayContaining([
        { value: 'input_required', records: 1 },
        { value: 'success', records: 1 },
        { value: 'paywall', records: 2 },
      ]),
    );
    // Billable: the one deploy call.
    expect(recorded.total).toBe(1);
  });

  it('serves one of five identical retries fired at once with the same hold, on a plan with one call', async () => {
    const customer = await customerWithToken();
    const form = { elicitation: { form: {} } };
    const before = origin.calls.get('deploy') ?? 0;
    const asked = await rawCall(customer.token, { name: 'deploy', arguments: { env: 'stage' } }, {}, form);
    expect(asked.body.result).toMatchObject({ resultType: 'input_required', requestState: 'deploy:stage' });
    const retry = () =>
      rawCall(
        customer.token,
        {
          name: 'deploy',
          arguments: { env: 'stage' },
          requestState: 'deploy:stage',
          inputResponses: { confirm: { action: 'accept', content: { confirm: true } } },
        },
        {},
        form,
      );
    const answers = await Promise.all(Array.from({ length: 5 }, retry));
    const served = answers.filter((a) => a.body.result?.content?.[0]?.text === 'deployed to stage');
    expect(served).toHaveLength(1);
    // The other four found no hold: new calls, and the plan's one call is spent.
    expect(answers.filter((a) => a.body.result?.isError === true)).toHaveLength(4);
    expect(origin.calls.get('deploy') ?? 0).toBe(before + 2);
  });

  it('serves a v1 SDK client (MCP 2025) against the same v2 origin, and passes server/discover through', async () => {
    const customer = await customerWithToken();
    const client = new V1Client({ name: 'v1-client', version: '1.0.0' });
    await client.connect(
      new V1Transport(new URL(`${proxyUrl}/mcp/${subdomain}`), {
        requestInit: { headers: { authorization: `Bearer ${customer.token}` } },
      }),
    );
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['add', 'deploy']));
    const before = origin.calls.get('add') ?? 0;
    const sum = (await client.callTool({ name: 'add', arguments: { a: 20, b: 22 } })) as ToolResult;
    expect(sum.content[0]?.text).toBe('42');
    expect(origin.calls.get('add') ?? 0).toBe(before + 1);
    await client.close();

    // server/discover is not a tool call: forwarded as it is (the same answer as the origin's
    // own), nothing metered.
    const discover = (url: string, token?: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': MODERN,
          'mcp-method': 'server/discover',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'server/discover',
          params: {
            _meta: {
              'io.modelcontextprotocol/protocolVersion': MODERN,
              'io.modelcontextprotocol/clientCapabilities': {},
            },
          },
        }),
      });
    const proxied = await discover(`${proxyUrl}/mcp/${subdomain}`, customer.token);
    const direct = await discover(origin.url);
    expect(proxied.status).toBe(200);
    const found = (await proxied.json()) as Json;
    expect(found.result).toEqual(((await direct.json()) as Json).result);
    expect(JSON.stringify(found.result)).toContain(MODERN);
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= 1,
      { what: 'the v1 call recorded', timeoutMs: 30_000 },
    );
    expect(recorded).toMatchObject({ records: 1, total: 1 });
  });

  it('refuses a tampered or foreign requestState, and headers the body contradicts, before anything is spent', async () => {
    const owner = await customerWithToken();
    const other = await customerWithToken();
    const before = origin.calls.get('add') ?? 0;

    const tampered = await rawCall(owner.token, {
      name: 'add',
      arguments: { a: 1, b: 1 },
      requestState: 'mcpm.paywall.eyJhbGciOiJIUzI1NiJ9.e30.AAAA',
    });
    expect(tampered.status).toBe(200);
    expect(tampered.body.error).toMatchObject({ code: -32602, data: { code: 'request_state_invalid' } });

    // A real state, minted for the owner's paywalled call, presented by another customer.
    expect(
      (await rawCall(owner.token, { name: 'add', arguments: { a: 1, b: 1 } })).body.result.content[0].text,
    ).toBe('2');
    const states: string[] = [];
    const wall = await fetch(`${proxyUrl}/mcp/${subdomain}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${owner.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/call',
        'mcp-name': 'add',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 9,
        method: 'tools/call',
        params: {
          name: 'add',
          arguments: { a: 4, b: 4 },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': MODERN,
            'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
          },
        },
      }),
    });
    const walled = (await wall.json()) as Json;
    expect(walled.result).toMatchObject({
      resultType: 'input_required',
      inputRequests: { checkout: { method: 'elicitation/create', params: { mode: 'url' } } },
    });
    states.push(walled.result.requestState);
    const foreign = await rawCall(other.token, {
      name: 'add',
      arguments: { a: 4, b: 4 },
      requestState: states[0],
    });
    expect(foreign.body.error).toMatchObject({ code: -32602, data: { code: 'request_state_invalid' } });
    expect(foreign.body.error.message).toContain('another customer or call');
    // The owner's own state on other arguments is refused too.
    const moved = await rawCall(owner.token, {
      name: 'add',
      arguments: { a: 5, b: 4 },
      requestState: states[0],
    });
    expect(moved.body.error).toMatchObject({ code: -32602 });

    // Mcp-Method saying tools/list on a tools/call body: 400, -32020, not forwarded.
    const mismatch = await rawCall(
      other.token,
      { name: 'add', arguments: { a: 1, b: 1 } },
      { 'mcp-method': 'tools/list' },
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error).toMatchObject({ code: -32020 });
    const named = await rawCall(
      other.token,
      { name: 'add', arguments: { a: 1, b: 1 } },
      { 'mcp-name': 'other' },
    );
    expect(named.status).toBe(400);
    expect(named.body.error.code).toBe(-32020);
    const missing = await rawCall(
      other.token,
      { name: 'add', arguments: { a: 1, b: 1 } },
      { 'mcp-name': '' },
    );
    expect(missing.status).toBe(400);
    // Only the owner's one plain call reached the origin.
    expect(origin.calls.get('add') ?? 0).toBe(before + 1);
    // The other customer spent nothing: its one call is still there.
    const served = await rawCall(other.token, { name: 'add', arguments: { a: 20, b: 22 } });
    expect(served.body.result.content[0].text).toBe('42');
  });

  // The Python MCP SDK (mcp 2.x), a client nobody here wrote, in each of its connect modes: the
  // 2025 handshake, pinned to 2026-07-28, and auto (server/discover, which the proxy passes on).
  // Modern clients open with the multi-round tool; the 2025 one with a plain call (this origin
  // serves 2025 statelessly, where a server cannot ask the client anything).
  it.each([
    ['legacy', '2025-11-25'],
    ['2026-07-28', '2026-07-28'],
    ['auto', '2026-07-28'],
  ])(
    'serves the Python SDK in mode %s: a call on a one-call plan, then a paywall it reads',
    async (mode, version) => {
      const python = await pythonWith('python-mcp-2.3.0', ['mcp==2.3.0']);
      const customer = await customerWithToken();
      const modern = version === '2026-07-28';
      const deploys = origin.calls.get('deploy') ?? 0;
      const { stdout } = await promisify(execFile)(
        python,
        [
          join(import.meta.dirname, 'python', 'era_client.py'),
          `${proxyUrl}/mcp/${subdomain}`,
          customer.token,
          mode,
          modern ? 'deploy' : 'add',
        ],
        { timeout: 120_000 },
      );
      const line = stdout.split('\n').find((l) => l.startsWith('RESULT ')) as string;
      const result = JSON.parse(line.slice('RESULT '.length)) as {
        protocolVersion: string;
        calls: Json[];
        asked: Array<{ mode: string; url?: string; message: string }>;
      };
      expect(result.protocolVersion).toBe(version);
      const paywalled = result.calls[1] as Json;
      if (modern) {
        // The multi-round call completes on the plan's one call: both rounds reached the origin.
        expect(result.calls[0]).toMatchObject({ text: 'deployed to prod', isError: false });
        expect(result.asked[0]).toMatchObject({ mode: 'form', message: 'Deploy to prod?' });
        expect((origin.calls.get('deploy') ?? 0) - deploys).toBe(2);
        // The paywall as a URL elicitation of the checkout page; declined, so the call ends with
        // the readable paywall instead of asking again.
        const checkout = result.asked.find((asked) => asked.mode === 'url');
        expect(checkout?.url).toMatch(/\/checkout\/cs_/);
        expect(paywalled).toMatchObject({ isError: true });
        expect(paywalled.text).toContain(checkout?.url);
        expect(paywalled.meta['dev.mcp-meter/paywall']).toMatchObject({ kind: 'payment_required' });
      } else {
        expect(result.calls[0]).toMatchObject({ text: '42', isError: false });
        // This origin serves 2025 without sessions, so the proxy has no session to remember the
        // client's URL elicitation by: the paywall is the readable tool error with the checkout.
        expect(paywalled).toMatchObject({ isError: true });
        expect(paywalled.text).toMatch(
          /complete checkout for Adder: http:\/\/127\.0\.0\.1:\d+\/checkout\/cs_/,
        );
        expect(paywalled.meta['dev.mcp-meter/paywall']).toMatchObject({ kind: 'payment_required', limit: 1 });
      }
      // Billable: the one admitted call. Input rounds and refusals stay visible by outcome.
      const recorded = await pollUntil(
        async () => (await usage(customer.ref)).body,
        (body) => body.records >= (modern ? 3 : 2),
        { what: "the Python client's records" },
      );
      expect(recorded.total).toBe(1);
      const byOutcome = Object.fromEntries(
        (recorded.groups ?? []).map((group) => [group.value, group.records]),
      );
      expect(byOutcome).toEqual(
        // One paywall record for the refused call: its declined retry adds none.
        modern ? { success: 1, input_required: 1, paywall: 1 } : { success: 1, paywall: 1 },
      );
    },
  );
});
