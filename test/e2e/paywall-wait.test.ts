import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { apiClient } from '../helpers/api';
import { customerWithToken, suffix } from '../helpers/flows';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { type ModernOrigin, startModernOrigin } from '../helpers/mcp-origin-v2';
import { pollUntil } from '../helpers/poll';
import { pythonWith } from '../helpers/python';
import { type SplitStack, startSeller, startSplitStack } from '../helpers/seller';

type Action = 'decline' | 'accept' | 'pay';
/** Pinned to MCP 2026-07-28, auto (server/discover), or the SDK's default (the 2025 handshake). */
type Mode = 'pinned' | 'auto' | 'default';
/** What a client's second call (the one past the plan's one call) came back as. */
interface Final {
  text: string;
  isError: boolean;
}

const MODERN = '2026-07-28';
/** The proxy's wait for payment here (PROXY_PAYWALL_WAIT_MS): short, so "never pays" ends soon. */
const WAIT_MS = 6_000;
const CARD = { card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' } };

/**
 * The paywall as clients nobody here wrote live it (issue 58), in both eras: the TypeScript SDK
 * v2 pinned to MCP 2026-07-28, in auto mode and in its default (the 2025 handshake), the Python
 * SDK likewise, and the TypeScript SDK v1 (2025). The customer's plan has one call; the second
 * call meets the paywall, a URL elicitation of the checkout (2026-07-28: an `input_required`
 * result; 2025: an `elicitation/create` request inside the call's own event stream). Accepting
 * means agreeing to open the page, not paying, so the proxy waits for the purchase before it
 * runs the call; a customer who declines, or accepts and never pays, gets the readable paywall
 * with the link. One paywall record per refused call.
 */
describe('the paywall waits for payment after an accept, in both eras', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let _baseUrl: string;
  let proxyUrl: string;
  let origin: ModernOrigin;
  /** A stateful MCP 2025 origin (SDK v1): its sessions let the proxy know who declared URL elicitation. */
  let legacyOrigin: McpOrigin;
  let api: ReturnType<typeof apiClient>;
  let subdomain: string;
  let legacySubdomain: string;

  const usage = (customerRef: string) =>
    api<{ total: number; records: number; groups?: Array<{ value: string; records: number }> }>(
      'GET',
      `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
    );
  const pay = (checkoutUrl: string) =>
    fetch(`${checkoutUrl}/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(CARD),
    }).then((answer) => answer.status);

  beforeAll(async () => {
    stack = await startSplitStack({
      name: 'paywall',
      infra,
      secretKey: 'da'.repeat(32),
      publicUrl: true,
      proxy: { PROXY_PAYWALL_WAIT_MS: String(WAIT_MS) },
    });
    _baseUrl = stack.baseUrl;
    proxyUrl = stack.proxyUrl;
    await stack.ready;
    origin = await startModernOrigin();
    const seller = await startSeller(stack, {
      provider: 'Paywall Co',
      product: 'Adder',
      plans: [
        { name: 'Free', price: 0, limit: 1, default: true },
        { name: 'Pro', price: 900, limit: 1000 },
      ],
    });
    api = seller.api;
    subdomain = (await seller.register(origin.url, { defaultPlan: 'Free', name: `adder-${suffix()}` }))
      .subdomain;
    legacyOrigin = await startMcpOrigin();
    legacySubdomain = (
      await seller.register(legacyOrigin.url, { defaultPlan: 'Free', name: `adder-2025-${suffix()}` })
    ).subdomain;
  });

  afterAll(async () => {
    await stack?.stop();
    await origin?.close();
    await legacyOrigin?.close();
  });

  /** The plan's one call, then the call past it; what each came back as. */
  async function twoCalls(client: {
    callTool(request: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  }): Promise<Final[]> {
    const calls: Final[] = [];
    for (const [a, b] of [
      [20, 22],
      [2, 3],
    ] as const) {
      const result = (await client.callTool({ name: 'add', arguments: { a, b } })) as {
        content: Array<{ text: string }>;
        isError?: boolean;
      };
      calls.push({ text: result.content.map((c) => c.text).join(''), isError: result.isError === true });
    }
    return calls;
  }

  /** The TypeScript SDK v2 client: two calls, the checkout handled as `action` says. */
  async function typescriptClient(token: string, mode: Mode, action: Action) {
    const client = new Client(
      { name: 'paywall-client', version: '1.0.0' },
      {
        capabilities: { elicitation: { url: {} } },
        // The default: the 2025 handshake ('legacy').
        ...(mode === 'default'
          ? {}
          : { versionNegotiation: { mode: mode === 'auto' ? 'auto' : { pin: MODERN } } }),
      },
    );
    const asked: Array<{ url: string; message: string }> = [];
    const payments: Array<Promise<number>> = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { url: string; message: string };
      asked.push(params);
      if (action === 'decline') return { action: 'decline' };
      // A person opens the page and pays a second later, while the call waits.
      if (action === 'pay')
        payments.push(new Promise((resolve) => setTimeout(resolve, 1_000)).then(() => pay(params.url)));
      return { action: 'accept' };
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(serverUrl(mode)), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    const calls = await twoCalls(client);
    await client.close();
    return { calls, asked, paid: await Promise.all(payments) };
  }

  /** The Python SDK client (test/e2e/python/paywall_client.py), likewise. */
  async function pythonClient(token: string, mode: Mode, action: Action) {
    const python = await pythonWith('python-mcp-2.3.0', ['mcp==2.3.0']);
    const { stdout } = await promisify(execFile)(
      python,
      [
        join(import.meta.dirname, 'python', 'paywall_client.py'),
        serverUrl(mode),
        token,
        mode === 'auto' ? 'auto' : mode === 'default' ? 'legacy' : MODERN,
        action,
      ],
      { timeout: 120_000 },
    );
    const line = stdout.split('\n').find((l) => l.startsWith('RESULT ')) as string;
    return JSON.parse(line.slice('RESULT '.length)) as {
      calls: Final[];
      asked: Array<{ url: string; message: string }>;
      paid: number[];
    };
  }

  /** The TypeScript SDK v1 client (MCP 2025 only), likewise. */
  async function v1Client(token: string, _mode: Mode, action: Action) {
    const client = new V1Client(
      { name: 'paywall-client-v1', version: '1.0.0' },
      { capabilities: { elicitation: { url: {} } } },
    );
    const asked: Array<{ url: string; message: string }> = [];
    const payments: Array<Promise<number>> = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      const params = request.params as { url: string; message: string };
      asked.push(params);
      if (action === 'decline') return { action: 'decline' };
      if (action === 'pay')
        payments.push(new Promise((resolve) => setTimeout(resolve, 1_000)).then(() => pay(params.url)));
      return { action: 'accept' };
    });
    await client.connect(
      new V1Transport(new URL(serverUrl('default')), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    const calls = await twoCalls(client);
    await client.close();
    return { calls, asked, paid: await Promise.all(payments) };
  }

  /** Modern clients to the modern origin; the 2025 handshake ('default') to the stateful 2025 one. */
  const serverUrl = (mode: Mode) => `${proxyUrl}/mcp/${mode === 'default' ? legacySubdomain : subdomain}`;
  const clients = { typescript: typescriptClient, python: pythonClient, 'typescript v1': v1Client };
  const cases = [
    ...(['typescript', 'python'] as const).flatMap((sdk) =>
      (['pinned', 'auto', 'default'] as const).map((mode) => [sdk, mode] as const),
    ),
    ['typescript v1', 'default'] as const,
  ].flatMap(([sdk, mode]) =>
    (['decline', 'accept', 'pay'] as const).map((action) => [sdk, mode, action] as const),
  );

  it.each(cases)('%s SDK, %s: the customer who chooses %s', async (sdk, mode, action) => {
    const customer = await customerWithToken(api);
    const ran = mode === 'default' ? legacyOrigin.calls : origin.calls;
    const adds = ran.get('add') ?? 0;
    const result = await clients[sdk](customer.token, mode, action);
    expect(result.calls[0]).toMatchObject({ text: '42', isError: false });
    // The paywall asked once, with the checkout page.
    expect(result.asked).toHaveLength(1);
    const checkoutUrl = result.asked[0]?.url as string;
    expect(checkoutUrl).toMatch(/\/checkout\/cs_/);
    if (action === 'pay') {
      // Paid while the call waited: the call ran once, on the new plan.
      expect(result.paid).toEqual([200]);
      expect(result.calls[1]).toMatchObject({ text: '5', isError: false });
      expect((ran.get('add') ?? 0) - adds).toBe(2);
    } else {
      // Declined, or accepted and never paid (after the wait): the readable paywall, the link in
      // its text, and the call never ran.
      expect(result.calls[1]?.isError).toBe(true);
      expect(result.calls[1]?.text).toContain(checkoutUrl);
      expect((ran.get('add') ?? 0) - adds).toBe(1);
    }
    // One paywall record for the refused call, whatever came after; billed: the calls that ran.
    const served = action === 'pay' ? 2 : 1;
    const recorded = await pollUntil(
      async () => (await usage(customer.ref)).body,
      (body) => body.records >= served + 1,
      { what: `${sdk} ${mode} ${action}: every call recorded`, timeoutMs: 30_000 },
    );
    // Nothing more comes in after the last record is in.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const settled = (await usage(customer.ref)).body;
    expect(settled.records).toBe(recorded.records);
    expect(Object.fromEntries((settled.groups ?? []).map((group) => [group.value, group.records]))).toEqual({
      success: served,
      paywall: 1,
    });
    expect(settled.total).toBe(served);
  });

  it('puts every case on the paywall funnel: URL elicitations by era, the paid ones paid', async () => {
    type Stage = {
      shown: number;
      offered: number;
      opened: number;
      paid: number;
      conversionBasisPoints: number;
    };
    const funnel = (
      await api<{
        totals: Stage & { timeToPay: { paid: number; medianSeconds: number; p90Seconds: number } };
        byForm: Array<Stage & { era: string; form: string }>;
        byPlan: Array<Stage & { productName: string; planName: string; kind: string }>;
      }>('GET', '/v1/ui/analytics/funnel')
    ).body;
    // Each case met the paywall once, as its own customer (so its own checkout session).
    const modern = cases.filter(([, mode]) => mode !== 'default');
    const legacy = cases.filter(([, mode]) => mode === 'default');
    const paid = (list: typeof cases) => list.filter(([, , action]) => action === 'pay').length;
    const stage = (list: typeof cases) => ({
      shown: list.length,
      offered: list.length,
      // Paying opens the page; the others never loaded it.
      opened: paid(list),
      paid: paid(list),
    });
    expect(funnel.byForm).toEqual([
      expect.objectContaining({ era: 'modern', form: 'url_elicitation', ...stage(modern) }),
      expect.objectContaining({ era: 'legacy', form: 'url_elicitation', ...stage(legacy) }),
    ]);
    expect(funnel.byPlan).toEqual([
      expect.objectContaining({ productName: 'Adder', planName: 'Pro', kind: 'plan', ...stage(cases) }),
    ]);
    expect(funnel.totals).toMatchObject({
      ...stage(cases),
      conversionBasisPoints: Math.round((paid(cases) * 10_000) / cases.length),
    });
    // Each paid a second after it was asked, so no sooner than that after the paywall showed.
    expect(funnel.totals.timeToPay.paid).toBe(paid(cases));
    expect(funnel.totals.timeToPay.medianSeconds).toBeGreaterThanOrEqual(1);
    expect(funnel.totals.timeToPay.p90Seconds).toBeGreaterThanOrEqual(funnel.totals.timeToPay.medianSeconds);
  });
});
