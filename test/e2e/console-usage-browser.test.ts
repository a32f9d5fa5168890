import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../helpers/browser';
import { shoot } from '../helpers/console-browser';
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
      plans: [{ name: 'Free', price: 0, limit: 100, default: true }],
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
    const page = await browser.newPage();
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
    expect(await row.getByRole('cell').allInnerTexts()).toEqual([
      'add',
      '3',
      '0',
      '0.0%',
      `${add?.latencyMs.p50} ms`,
      expect.stringMatching(/ ms$/),
      `${add?.latencyMs.p99} ms`,
    ]);
    await page.setViewportSize({ width: 1280, height: 860 });
    await shoot(page, 'usage');
    await page.close();
  });
});
