import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser';
import { axeFindings, newPerson, shoot } from '../helpers/console-browser';
import { injectClient, startListeningControlPlane, type TestControlPlane } from '../helpers/control-plane';
import { creditsProduct } from '../helpers/credit-plans';
import { startInProcessProxy } from '../helpers/in-process-proxy';
import { startMailbox } from '../helpers/mailbox';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { type StripeMock, startStripeMock } from '../helpers/stripe-mock';

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;
type ToolResult = { content: Array<{ type: string; text?: string }>; isError?: boolean; _meta?: Json };

/**
 * The customer portal's whole walk (issue 64's "done when"), with clients nobody here wrote: an
 * MCP SDK client (v1) calls a tool through the proxy until its plan's limit; the paywall's text
 * names the portal; in Chromium the customer signs in there by a mailed code, sees the usage the
 * usage API counts, upgrades with the proration shown and is charged exactly it, downloads an
 * invoice PDF, buys credits at the hosted checkout, sets an auto top-up; then the MCP client's
 * calls on a credit-paid server drain the balance until the top-up fires exactly once. The live
 * variant drains a live customer's credits through the proxy with the charge at stripe-mock.
 * Everything on loopback: PostgreSQL, the usage store, SMTP, stripe-mock, a real MCP origin.
 */
describe('the customer portal, walked from the paywall', () => {
  let harness: TestControlPlane;
  let baseUrl: string;
  let browser: Browser;
  let mailbox: Awaited<ReturnType<typeof startMailbox>>;
  let origin: McpOrigin;
  let mock: StripeMock;
  let proxy: Awaited<ReturnType<typeof startInProcessProxy>>;

  beforeAll(async () => {
    [mailbox, origin, mock] = await Promise.all([
      startMailbox(),
      startMcpOrigin({ json: true }),
      startStripeMock({ payments: 'succeed' }),
    ]);
    ({ harness, url: baseUrl } = await startListeningControlPlane({
      bodyLimitBytes: 1024 * 1024,
      smtpUrl: mailbox.url,
      stripeApiUrl: mock.url,
    }));
    proxy = await startInProcessProxy(harness, baseUrl, 'portal-walk');
    browser = await launchChromium();
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await harness?.close();
    await Promise.all([mailbox?.close(), origin?.close(), mock?.close()]);
  });

  /** An MCP client of the SDK, through the proxy, as the customer's token. */
  async function mcpClient(server: { mcpProxyUrl: string }, token: string) {
    const client = new Client({ name: 'portal-walk', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(
      new URL(new URL(server.mcpProxyUrl).pathname, proxy.url),
      {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      },
    );
    await client.connect(transport);
    return {
      add: async () => (await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })) as ToolResult,
      close: async () => {
        await transport.terminateSession().catch(() => undefined);
        await client.close();
      },
    };
  }

  const cents = (money: string) => Math.round(Number(money.replace(/[$,]/g, '')) * 100);

  it('sandbox: from the paywall into the portal, an upgrade charged as shown, credits and one auto top-up', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: 'Walk Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    await api('PATCH', '/v1/sdk/merchant', { brandColor: '#0f766e', supportEmail: 'help@walk.example' });
    const adder = (await api('POST', '/v1/ui/products', { name: 'Adder' })).body.id as string;
    const plan = async (name: string, price: number, limit: number) =>
      (
        await api('POST', `/v1/ui/products/${adder}/plans`, {
          name,
          type: 'recurring',
          billingCycle: 'monthly',
          price,
          currency: 'usd',
          limit,
        })
      ).body.id as string;
    const basic = await plan('Basic', 1000, 3);
    const pro = await plan('Pro', 3000, 1000);
    const server = (
      await api('POST', '/v1/ui/mcp-servers', { name: 'adder', url: origin.url, productId: adder })
    ).body as { mcpProxyUrl: string };
    const ada = (await api('POST', '/v1/sdk/customers', { externalRef: 'ada', email: 'ada@walk.example' }))
      .body.id as string;
    await api('POST', '/v1/sdk/customers/ada/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    const first = (await api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: basic })).body;
    expect(first.status).toBe('activated');
    const token = (await api('POST', '/v1/sdk/customers/ada/tokens', {})).body.accessToken as string;

    // The MCP client uses its three calls; the fourth meets the paywall, which names the portal.
    const mcp = await mcpClient(server, token);
    for (let i = 0; i < 3; i++) expect((await mcp.add()).content).toEqual([{ type: 'text', text: '5' }]);
    const wall = await mcp.add();
    const paywall = wall._meta?.['dev.mcp-meter/paywall'] as Json;
    expect(paywall).toMatchObject({ kind: 'payment_required', reason: 'limit_reached', used: 3, limit: 3 });
    const portalUrl = `${baseUrl}/portal/sign-in/${provider.id}?environment=sandbox`;
    expect(paywall.portalUrl).toBe(portalUrl);
    expect(wall.content.map((c) => c.text).join('\n')).toContain(
      `Your usage, invoices and credits: ${portalUrl}`,
    );
    expect(origin.calls.get('add')).toBe(3);

    // In the browser: the portal's sign-in from the paywall's link, by the code mailed to ada.
    const { page, errors } = await newPerson(browser);
    await page.goto(portalUrl);
    await page.getByRole('heading', { level: 1, name: 'Sign in to your Walk Co account' }).waitFor();
    await page.getByLabel('Email for a code').fill('ada@walk.example');
    await page.getByRole('button', { name: 'Email me a code' }).click();
    await page.getByRole('heading', { level: 1, name: 'Enter your code' }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    await page.getByLabel('Code').fill(await mailbox.codeFor('ada@walk.example'));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${baseUrl}/portal`);
    expect(await page.getByText('Signed in as ada@walk.example').count()).toBe(1);

    // The usage the page shows is what the usage API counts (every call, the refused one too).
    await harness.settled();
    // The page charts from the start of the plan's period, as this asks.
    const periodStart = (await api('GET', `/v1/sdk/purchases/${first.purchaseRef}`)).body
      .periodStart as string;
    const counted = (
      await api(
        'GET',
        `/v1/ui/analytics/usage?customerRef=ada&groupBy=tool&grain=day&from=${encodeURIComponent(periodStart)}`,
      )
    ).body;
    expect(counted.totals.calls).toBe(4);
    await page.reload();
    expect(await page.locator('#usage-total').innerText()).toMatch(
      new RegExp(`^${counted.totals.calls} calls from `),
    );
    expect(await page.locator('#usage-legend').innerText()).toContain(`add: ${counted.series[0].totalCalls}`);
    const limits = (
      await api('POST', '/v1/sdk/limits', { customerRef: 'ada', productRef: adder, consume: false })
    ).body;
    expect(limits).toMatchObject({ used: 3, limit: 3, remaining: 0 });
    expect(
      await page.getByRole('row', { name: /Adder Basic active .* 3 of 3 calls used, 0 left/ }).count(),
    ).toBe(1);
    expect(await axeFindings(page)).toEqual([]);

    // Upgrade with a promotion code (the product takes them in its portal): a code of nothing is
    // refused beside the field, the right one applied; the proration shown before confirming,
    // and charged exactly.
    await api('PATCH', `/v1/ui/products/${adder}`, { portalPromotionCodes: true });
    const coupon = (
      await api('POST', '/v1/sdk/coupons', {
        name: 'Upgrade',
        code: 'UPGRADE',
        percentOff: 25,
        duration: 'once',
      })
    ).body.id as string;
    await page.getByRole('link', { name: 'Change plan: Adder, Basic' }).click();
    await page.getByRole('link', { name: 'Pro' }).click();
    await page.locator('#proration').waitFor();
    expect(await page.locator('#proration').innerText()).toContain('Unused time on Basic');
    const full = cents(await page.locator('#due-now strong').first().innerText());
    await page.getByLabel('Promotion code').fill('UPGRDAE');
    await page.getByRole('button', { name: 'Apply' }).click();
    expect(await page.getByRole('alert').innerText()).toBe('No promotion code UPGRDAE.');
    expect(await axeFindings(page)).toEqual([]);
    await page.getByLabel('Promotion code').fill('upgrade');
    await page.getByRole('button', { name: 'Apply' }).click();
    // Shown as the provider wrote it.
    expect(await page.locator('#code-applied').innerText()).toContain('Promotion code UPGRADE applied.');
    expect(await page.locator('#proration').innerText()).toContain('Upgrade');
    const shown = await page.locator('#due-now strong').first().innerText();
    // A quarter of Pro's 3,000 off: 750 less than without the code.
    expect(cents(shown)).toBe(full - 750);
    expect(await axeFindings(page)).toEqual([]);
    await shoot(page, 'portal-change-plan');
    await page.getByRole('button', { name: 'Change to Pro' }).click();
    await page.waitForURL(/\/portal\?done=changed/);
    expect(await page.getByRole('status').innerText()).toBe('Your plan is changed.');
    const now = ((await api('GET', '/v1/sdk/purchases?customerRef=ada')).body.data as Json[]).find(
      (p) => p.status === 'active',
    );
    expect(now?.planRef).toBe(pro);
    const [invoice] = (await api('GET', `/v1/sdk/invoices?purchaseRef=${now?.reference}`)).body
      .data as Json[];
    expect(invoice).toMatchObject({ total: cents(shown), amountPaid: cents(shown), status: 'paid' });
    expect(invoice?.lines.map((l: Json) => l.kind)).toEqual(['base', 'discount', 'proration']);
    expect(now?.discount?.coupon).toBe(coupon);
    // On Pro the MCP client's call goes through again.
    await pollUntil(
      async () => (await mcp.add()).isError !== true,
      (ok) => ok,
      { what: 'the upgraded plan admitting calls', timeoutMs: 20_000 },
    );
    await mcp.close();

    // An invoice PDF, downloaded from the portal.
    await page.goto(`${baseUrl}/portal`);
    const pdfLink = page.getByRole('link', { name: /\(PDF\)/ }).first();
    const pdf = await page.request.get(
      new URL((await pdfLink.getAttribute('href')) ?? '', baseUrl).toString(),
    );
    expect(pdf.status()).toBe(200);
    expect(pdf.headers()['content-type']).toContain('application/pdf');
    expect((await pdf.body()).subarray(0, 5).toString()).toBe('%PDF-');

    // Credits: a credit-paid server of another product, a pack bought in the portal, an auto top-up set.
    const tokens = await creditsProduct(api, { product: 'Tokens', plan: 'Pay per call' });
    const paid = (
      await api('POST', '/v1/ui/mcp-servers', { name: 'tokens', url: origin.url, productId: tokens.product })
    ).body as { mcpProxyUrl: string };
    await api('POST', '/v1/sdk/customers/ada/credits', {
      kind: 'grant',
      amount: 20,
      reason: 'Welcome credits',
    });
    expect(
      (await api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: tokens.plan })).body.status,
    ).toBe('activated');
    await page.reload();
    await page.locator('#buy-product').selectOption(tokens.product);
    await page.getByLabel('Packs', { exact: true }).fill('1');
    await page.getByRole('button', { name: 'Buy credits' }).click();
    await page.waitForURL(/\/checkout\/cs_/);
    await page.fill('#number', '4242 4242 4242 4242');
    await page.fill('#exp', '12/35');
    await page.fill('#cvc', '123');
    await page.click('#submit');
    await page.waitForURL(/\/portal\?done=bought/, { timeout: 15_000 });
    expect(await page.locator('#balance').innerText()).toBe('70');
    await page.locator('#productRef').selectOption(tokens.product);
    await page.getByLabel('When my balance falls below (credits)').fill('30');
    await page.getByLabel('Packs to buy each time').fill('1');
    await page.getByRole('button', { name: 'Save auto top-up' }).click();
    await page.waitForURL(/\/portal\?done=saved/);

    // The MCP client's calls drain the balance across the threshold: the top-up fires once.
    const drain = await mcpClient(paid, token);
    for (let i = 0; i < 45; i++) expect((await drain.add()).isError).not.toBe(true);
    await drain.close();
    await harness.settled();
    await Promise.all(Array.from({ length: 5 }, () => harness.controlPlane.scheduler.runDue()));
    const movements = (await api('GET', '/v1/sdk/customers/ada/credits?limit=100')).body.data as Json[];
    expect(movements.filter((m) => m.reason === 'auto_top_up').map((m) => [m.kind, m.amount])).toEqual([
      ['top_up', 50],
    ]);
    // 20 granted + 50 bought − 45 calls + 50 topped up.
    expect((await api('GET', '/v1/sdk/customers/ada/balance')).body.credits).toBe(75);
    const topUps = await harness.pool.query(
      "SELECT amount FROM payments WHERE customer_id = $1 AND reason = 'topup' AND status = 'succeeded' ORDER BY created_at",
      [ada],
    );
    expect(topUps.rows.map((r) => Number(r.amount))).toEqual([500, 500]);
    await page.goto(`${baseUrl}/portal`);
    expect(await page.locator('#balance').innerText()).toBe('75');
    expect(await page.getByRole('row', { name: /auto_top_up \+50 / }).count()).toBe(1);
    expect(await axeFindings(page)).toEqual([]);
    await shoot(page, 'portal-usage');
    // The origin ran exactly the calls the proxy admitted: 3 on Basic, then Pro's, then 45 on credits.
    const admitted = (await api('GET', `/v1/ui/analytics/usage?customerRef=ada&groupBy=outcome&grain=day`))
      .body.series as Json[];
    expect(origin.calls.get('add')).toBe(
      admitted.filter((s) => s.key === 'success').reduce((sum, s) => sum + s.totalCalls, 0),
    );
    expect(errors).toEqual([]);
  });

  it('live: an MCP client drains the credits until one off-session top-up at Stripe', async () => {
    const { liveKey } = await harness.controlPlane.providers.create({ displayName: 'Live Walk Co' });
    const live = injectClient(harness.controlPlane, liveKey);
    expect(
      (
        await live('PUT', '/v1/ui/processors/stripe', {
          secretKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
          webhookSigningSecret: 'whsec_testsigningsecret0123456789',
        })
      ).status,
    ).toBe(200);
    const tokens = await creditsProduct(live, { product: 'Tokens', plan: 'Pay per call' });
    const server = (
      await live('POST', '/v1/ui/mcp-servers', {
        name: 'live-tokens',
        url: origin.url,
        productId: tokens.product,
      })
    ).body as { mcpProxyUrl: string };
    const bo = (await live('POST', '/v1/sdk/customers', { externalRef: 'bo', email: 'bo@walk.example' })).body
      .id as string;
    expect(
      (await live('POST', '/v1/sdk/customers/bo/payment-methods', { paymentMethod: 'pm_card_visa' })).status,
    ).toBe(201);
    await live('POST', '/v1/sdk/customers/bo/credits', { kind: 'grant', amount: 40 });
    expect(
      (await live('POST', '/v1/sdk/activate', { customerRef: 'bo', planRef: tokens.plan })).body.status,
    ).toBe('activated');
    const setting = (
      await live('PUT', '/v1/sdk/customers/bo/auto-top-up', { productRef: tokens.product, threshold: 25 })
    ).body;
    const token = (await live('POST', '/v1/sdk/customers/bo/tokens', {})).body.accessToken as string;
    const from = mock.requests.length;
    const mcp = await mcpClient(server, token);
    for (let i = 0; i < 20; i++) expect((await mcp.add()).isError).not.toBe(true);
    await mcp.close();
    await harness.settled();
    await Promise.all(Array.from({ length: 5 }, () => harness.controlPlane.scheduler.runDue()));
    const charges = mock.requests.slice(from).filter((r) => r.path === '/v1/payment_intents');
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({
      idempotencyKey: `charge:${bo}:auto_topup:${setting.id}:1`,
      params: { amount: '500', currency: 'usd', off_session: 'true' },
    });
    // 40 granted − 20 calls + 50 topped up.
    expect((await live('GET', '/v1/sdk/customers/bo/balance')).body.credits).toBe(70);
  });
});
