import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../helpers/browser';
import { axeFindings, shoot } from '../helpers/console-browser';
import { customerWithToken } from '../helpers/flows';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { runAdmin } from '../helpers/processes';
import { type Seller, type SplitStack, startSeller, startSplitStack } from '../helpers/seller';

/**
 * The console against the whole product (issue 62): a split stack (control plane with ingest,
 * a proxy, real Kafka and ClickHouse), a customer whose MCP client (the official SDK) calls a
 * tool through the proxy, and the provider's owner who sees those calls on the customer's chart
 * in Chromium, the same number the API counts.
 */
describe('a tool call made with an MCP SDK client, on the console chart', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let seller: Seller;
  let origin: McpOrigin;
  let browser: Browser;

  beforeAll(async () => {
    stack = await startSplitStack({ name: 'console', infra, secretKey: 'cd'.repeat(32), publicUrl: true });
    await stack.ready;
    origin = await startMcpOrigin();
    seller = await startSeller(stack, {
      provider: 'Chart Co',
      product: 'Calculator',
      // Three calls free, then the paywall sells Pro.
      plans: [
        { name: 'Free', price: 0, limit: 3, default: true },
        { name: 'Pro', price: 900, limit: 1000 },
      ],
    });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await origin?.close();
    await stack?.stop();
  });

  it('counts three tool calls through the proxy on the customer’s chart', async () => {
    const server = await seller.register(origin.url, { defaultPlan: 'Free' });
    const customer = await customerWithToken(seller.api);
    const client = new Client({ name: 'console-chart', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${stack.proxyUrl}/mcp/${server.subdomain}`), {
        requestInit: { headers: { authorization: `Bearer ${customer.token}` } },
      }),
    );
    for (let i = 0; i < 3; i++) {
      const result = (await client.callTool({ name: 'add', arguments: { a: i, b: 1 } })) as {
        content: { text: string }[];
      };
      expect(result.content[0]?.text).toBe(String(i + 1));
    }
    await client.close();
    expect(origin.calls.get('add')).toBe(3);

    // The records travel proxy → Kafka → ingest → ClickHouse: read until the API counts them.
    let counted = 0;
    for (let i = 0; i < 150 && counted < 3; i++) {
      const daily = await seller.api<{ data: { records: number }[] }>(
        'GET',
        `/ui/analytics/daily?customerRef=${customer.ref}`,
      );
      counted = daily.body.data.reduce((sum, d) => sum + d.records, 0);
      if (counted < 3) await new Promise((r) => setTimeout(r, 200));
    }
    expect(counted).toBe(3);

    const owner = await runAdmin<{ password: string }>(
      [
        'member',
        'add',
        '--provider',
        seller.provider.id,
        '--email',
        'owner@chart.example',
        '--role',
        'owner',
      ],
      stack.env,
    );
    // axe-core is put into the page as a script: the context lets it past the console's CSP.
    const page = await (await browser.newContext({ bypassCSP: true })).newPage();
    await page.goto(`${stack.baseUrl}/console/sign-in`);
    await page.getByLabel('Email').fill('owner@chart.example');
    await page.getByLabel('Password').fill(owner.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(await page.getByTestId('chart-total').innerText()).toBe('3');
    await page.goto(`${stack.baseUrl}/console/customers/${customer.ref}`);
    await page.getByText('Usage, last 30 days').waitFor();
    await page.getByTestId('chart-total').waitFor();
    expect(await page.getByTestId('chart-total').innerText()).toBe(String(counted));

    // The usage page (issue 63) draws what the analytics API answers: the calls by tool, and
    // the tool's calls, errors and origin latency.
    const usage = await seller.api<{
      totals: { calls: number };
      series: { key: string; totalCalls: number }[];
    }>('GET', '/v1/ui/analytics/usage?groupBy=tool');
    const tools = await seller.api<{
      data: { tool: string; calls: number; latencyMs: { p50: number; p99: number } }[];
    }>('GET', '/v1/ui/analytics/tools');
    const add = tools.body.data.find((t) => t.tool === 'add');
    expect(add?.calls).toBe(3);
    expect(usage.body.series.find((s) => s.key === 'add')?.totalCalls).toBe(3);
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { level: 1, name: 'Usage' }).waitFor();
    await page.getByLabel('Time zone').selectOption('UTC');
    await page.getByTestId('usage-total').waitFor();
    expect(await page.getByTestId('usage-total').innerText()).toBe(String(usage.body.totals.calls));
    expect(await page.getByTestId('line-total-add').innerText()).toContain('add 3');
    const row = page
      .getByRole('table', { name: 'Tools: calls, errors and origin latency' })
      .getByRole('row', { name: /^add / });
    // The tools table is its own API call: read its row once it is there (allInnerTexts does not wait).
    await row.waitFor();
    expect(await row.getByRole('cell').allInnerTexts()).toEqual([
      'add',
      '3',
      '0',
      '0.0%',
      `${add?.latencyMs.p50} ms`,
      expect.stringMatching(/ ms$/),
      `${add?.latencyMs.p99} ms`,
    ]);
    // By plan: the three calls were judged by the server's default plan, named as the API names it.
    const usageByPlan = await seller.api<{
      series: { key: string; name: string | null; totalCalls: number }[];
    }>('GET', '/v1/ui/analytics/usage?groupBy=plan');
    expect(usageByPlan.body.series).toEqual([expect.objectContaining({ name: 'Free', totalCalls: 3 })]);
    await page.getByLabel('Group by').selectOption('plan');
    await page.getByTestId('line-total-Free').waitFor();
    expect(await page.getByTestId('line-total-Free').innerText()).toContain('Free 3');
    // By environment, as the member's session reads it: the sandbox line holds every call.
    const usageByEnvironment = await seller.api<{ series: { key: string; totalCalls: number }[] }>(
      'GET',
      '/v1/ui/analytics/usage?groupBy=environment',
    );
    expect(usageByEnvironment.body.series).toEqual([
      expect.objectContaining({ key: 'sandbox', totalCalls: usage.body.totals.calls }),
    ]);
    await page.getByLabel('Group by').selectOption('environment');
    await page.getByTestId('line-total-sandbox').waitFor();
    expect(await page.getByTestId('line-total-sandbox').innerText()).toContain(
      `sandbox ${usage.body.totals.calls}`,
    );
    await page.getByLabel('Group by').selectOption('tool');
    await page.getByTestId('line-total-add').waitFor();
    await page.setViewportSize({ width: 1280, height: 860 });
    await shoot(page, 'usage');

    // The paywall funnel: a fourth call meets the paywall (a text link: this client declared no
    // URL elicitation), the customer pays on the checkout page, and the funnel page says so as the
    // API does; so does the overview's conversion.
    const again = new Client({ name: 'console-chart', version: '1.0.0' });
    await again.connect(
      new StreamableHTTPClientTransport(new URL(`${stack.proxyUrl}/mcp/${server.subdomain}`), {
        requestInit: { headers: { authorization: `Bearer ${customer.token}` } },
      }),
    );
    const wall = (await again.callTool({ name: 'add', arguments: { a: 1, b: 1 } })) as {
      isError?: boolean;
      _meta?: Record<string, { checkoutUrl: string }>;
    };
    await again.close();
    expect(wall.isError).toBe(true);
    const checkoutUrl = wall._meta?.['dev.mcp-meter/paywall']?.checkoutUrl as string;
    expect((await fetch(checkoutUrl)).status).toBe(200);
    const paid = await fetch(`${checkoutUrl}/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' } }),
    });
    expect(paid.status).toBe(200);
    type Funnel = {
      totals: { shown: number; offered: number; opened: number; paid: number; conversionBasisPoints: number };
      byForm: { era: string; form: string; shown: number }[];
    };
    let funnel: Funnel | undefined;
    for (let i = 0; i < 150 && (funnel?.totals.shown ?? 0) < 1; i++) {
      funnel = (await seller.api<Funnel>('GET', '/v1/ui/analytics/funnel')).body;
      if (funnel.totals.shown < 1) await new Promise((r) => setTimeout(r, 200));
    }
    expect(funnel?.totals).toMatchObject({
      shown: 1,
      offered: 1,
      opened: 1,
      paid: 1,
      conversionBasisPoints: 10_000,
    });
    expect(funnel?.byForm).toEqual([expect.objectContaining({ era: 'legacy', form: 'text_link', shown: 1 })]);
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Paywall funnel' })
      .click();
    await page.getByRole('heading', { level: 1, name: 'Paywall funnel' }).waitFor();
    await page.getByTestId('funnel-conversion').waitFor();
    expect(await page.getByTestId('funnel-conversion').innerText()).toBe('100.00%');
    expect(await page.getByTestId('funnel-chart').getAttribute('aria-label')).toBe(
      'Paywall funnel: Paywalls shown 1, Checkouts offered 1, Opened 1, Paid 1',
    );
    const byForm = page.getByRole('table', { name: 'The funnel by era and form of the paywall' });
    expect(await byForm.getByRole('row').nth(1).getByRole('cell').allInnerTexts()).toEqual([
      '2025 and earlier',
      'Text link',
      '1',
      '1',
      '1',
      '1',
      '100.00%',
      '100.00%',
    ]);
    const byPlan = page.getByRole('table', { name: 'The funnel by product and plan sold' });
    expect((await byPlan.getByRole('row').nth(1).getByRole('cell').allInnerTexts()).slice(0, 6)).toEqual([
      'Calculator',
      'Pro',
      '1',
      '1',
      '1',
      '1',
    ]);
    expect(await axeFindings(page)).toEqual([]);
    await shoot(page, 'funnel');
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Overview' }).click();
    await page.getByTestId('conversion-glance').filter({ hasText: '100.00%' }).waitFor();
    await page.close();
  });
});
