import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { priceUsage } from '@mcp-meter/contracts/pricing';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONSOLE_DIR } from '../../control-plane/src/modules/console-app/routes';
import { launchChromium } from '../helpers/browser';
import {
  axeFindings,
  callBudgetOf,
  counting,
  csrfOf as csrfOfPage,
  heading,
  newPerson,
  shoot,
  unreachableByKeyboard,
  visit,
} from '../helpers/console-browser';
import { startListeningControlPlane, type TestControlPlane } from '../helpers/control-plane';
import { startMailbox } from '../helpers/mailbox';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';

/**
 * The provider console (issue 62) driven in Chromium against a running control plane, with mail
 * over real SMTP on loopback: sign up and verify by the mailed code, build a catalog with a tiered
 * plan whose preview prices as invoices do, invite teammates who join by the mailed link, a viewer
 * who can change nothing (the API refuses too), a webhook endpoint whose secret is shown once and
 * whose test delivery is in its log, a customer's usage on a chart that says what the API says,
 * the audit log, the sandbox/live switch; axe on every page, the keyboard alone, the script budget
 * and the API calls each page makes.
 */

/** The shell's JavaScript, gzipped: the budget. */
const SCRIPT_BUDGET_GZIP_BYTES = 250 * 1024;
const PASSWORD = 'a console passphrase';

let harness: TestControlPlane;
let baseUrl: string;
let browser: Browser;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
let receiver: Server;
let receiverUrl: string;
let origin: McpOrigin;
/** While true, the webhook receiver answers 500. */
let receiverFails = false;

beforeAll(async () => {
  mailbox = await startMailbox();
  ({ harness, url: baseUrl } = await startListeningControlPlane({
    bodyLimitBytes: 1024 * 1024,
    smtpUrl: mailbox.url,
    webhooks: { intervalMs: 200 },
  }));
  // The webhook worker runs, as in the service: events are delivered, and replays sent.
  harness.controlPlane.webhookWorker.start();
  receiver = createServer((_request, response) =>
    receiverFails ? response.writeHead(500).end('down') : response.writeHead(200).end('ok'),
  );
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  const address = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}/hooks`;
  origin = await startMcpOrigin();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  harness?.controlPlane.webhookWorker.stop();
  await harness?.close();
  await mailbox?.close();
  await origin?.close();
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
});

const person = () => newPerson(browser);

/** The link of the newest invitation mailed to `email`. */
async function invitationLink(email: string, after: number): Promise<string> {
  const text = await mailbox.textFor(email, after);
  const link = text.match(/(http:\/\/\S+\/console\/accept-invitation#token=[\w-]+)/)?.[1];
  if (link === undefined) throw new Error(`no invitation link in the mail to ${email}`);
  return link;
}

const csrfOf = (page: Page) => csrfOfPage(page, baseUrl);

describe('the console at /console', () => {
  it('is served under its CSP, loads nothing from elsewhere, and keeps its scripts within budget', async () => {
    const answer = await fetch(`${baseUrl}/console/catalog`);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(answer.headers.get('cache-control')).toBe('no-cache');
    const html = await answer.text();
    const scripts = [...html.matchAll(/src="\/console\/(assets\/[^"]+\.js)"/g)].map((m) => m[1] as string);
    expect(scripts.length).toBeGreaterThan(0);
    const asset = await fetch(`${baseUrl}/console/${scripts[0]}`);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    // Bodies are read to the end: an unread one keeps its connection busy, and the server's close waits.
    await asset.arrayBuffer();
    // Nothing but the built assets is read from disk.
    for (const path of [
      '/console/assets/..%2F..%2Fpackage.json',
      '/console/assets/nope.js',
      '/console/assets/x.txt',
    ]) {
      const refused = await fetch(`${baseUrl}${path}`);
      await refused.text();
      expect(refused.status).toBe(404);
    }
    const gzipped = readdirSync(join(DEFAULT_CONSOLE_DIR, 'assets'))
      .filter((file) => file.endsWith('.js'))
      .reduce(
        (sum, file) =>
          sum + gzipSync(readFileSync(join(DEFAULT_CONSOLE_DIR, 'assets', file)), { level: 9 }).length,
        0,
      );
    console.log(`console scripts: ${gzipped} bytes gzipped (budget ${SCRIPT_BUDGET_GZIP_BYTES})`);
    expect(gzipped).toBeLessThanOrEqual(SCRIPT_BUDGET_GZIP_BYTES);

    // Under the CSP as served (no bypass): the page renders, nothing is refused, nothing foreign.
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems: string[] = [];
    const foreign: string[] = [];
    page.on(
      'console',
      (m) => m.type() === 'error' && !m.text().includes('status of 401') && problems.push(m.text()),
    );
    page.on('pageerror', (e) => problems.push(e.message));
    page.on(
      'request',
      (r) => !r.url().startsWith(baseUrl) && !r.url().startsWith('data:') && foreign.push(r.url()),
    );
    await page.goto(`${baseUrl}/console/`);
    // Not signed in: the sign-in page.
    await heading(page, 'Sign in');
    expect(page.url()).toBe(`${baseUrl}/console/sign-in`);
    expect(problems).toEqual([]);
    expect(foreign).toEqual([]);
    await context.close();
    const { context: audited, page: signIn } = await person();
    await signIn.goto(`${baseUrl}/console/sign-in`);
    await heading(signIn, 'Sign in');
    expect(await axeFindings(signIn)).toEqual([]);
    expect(await unreachableByKeyboard(signIn)).toEqual([]);
    await shoot(signIn, 'sign-in');
    await audited.close();
  });

  it('a provider signs up, builds a catalog, invites a team, and runs the business', async () => {
    const owner = await person();
    const { page } = owner;
    const email = 'founder@tidewater.example';

    // Sign up, and verify by the code mailed over SMTP.
    await page.goto(`${baseUrl}/console/sign-up`);
    await heading(page, 'Create your account');
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByLabel('Business name').fill('Tidewater Data');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Email me a code' }).click();
    // The API's problem, shown by the field it names.
    await page.getByText('Choose a password of at least 8 characters').waitFor();
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Email me a code' }).click();
    await heading(page, 'Check your email');
    const code = await mailbox.codeFor(email);
    await page.getByLabel('Code').fill(code === '000000' ? '000001' : '000000');
    await page.getByRole('button', { name: 'Verify and continue' }).click();
    await page.getByText('That code is not right; 4 tries left').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByLabel('Code').fill(code);
    await page.getByRole('button', { name: 'Verify and continue' }).click();
    await heading(page, 'Overview');
    await page.getByText('No usage in the last 30 days').waitFor();
    expect(await page.getByRole('banner').innerText()).toContain('founder@tidewater.example · owner');
    // Sandbox only: live cannot be chosen until the operator enables it.
    expect(await page.getByRole('radio', { name: 'Live' }).isDisabled()).toBe(true);
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'overview-empty');

    // The catalog: empty, then a product.
    const calls: Record<string, string[]> = {};
    calls.catalog = await visit(page, 'Catalog', 'Catalog');
    await page.getByText('No products yet').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByRole('button', { name: 'Add product' }).click();
    await page.getByText('must NOT have fewer than 1 characters').first().waitFor();
    await page.getByLabel('Name').fill('Forecasts');
    await page.getByRole('button', { name: 'Add product' }).click();
    calls.product = await counting(page, 'Forecasts', () =>
      page.getByRole('link', { name: 'Forecasts' }).click(),
    );

    // A tiered plan: the preview prices N units as invoices do (the same code, exactly).
    await page.getByLabel('Name').fill('Metered');
    await page.getByLabel('Preview the price of').fill('2500');
    const expected = priceUsage(
      {
        model: 'graduated',
        tiers: [
          { upTo: 1000n, unitAmount: 0n, flatAmount: 0n },
          { upTo: null, unitAmount: 150_000_000_000n, flatAmount: 500n },
        ],
      },
      2500n,
      0n,
    );
    await page.getByLabel('Tier 2 cents per unit').fill('0.15');
    await page.getByLabel('Tier 2 flat fee').fill('5');
    expect(expected.total).toBe(725);
    expect(await page.getByTestId('preview-total').innerText()).toBe('$7.25');
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'plan-editor');
    await page.getByRole('button', { name: 'Add plan' }).click();
    await page.getByRole('cell', { name: '2 tiers (graduated)' }).waitFor();
    // A bad tier is refused by the API and shown by its field, and nothing is saved.
    await page.getByLabel('Name').fill('Broken');
    await page.getByLabel('Tier 1 up to').fill('0');
    await page.getByRole('button', { name: 'Add plan' }).click();
    await page.getByRole('alert').getByText('/tiers/0/upTo', { exact: false }).waitFor();
    const productId = new URL(page.url()).pathname.replace('/console/catalog/', '');
    const plans = await page.request.get(`${baseUrl}/v1/ui/products/${productId}/plans?limit=10`);
    expect(((await plans.json()) as { data: { name: string }[] }).data.map((p) => p.name)).toEqual([
      'Metered',
    ]);
    // The paywall's checkouts and the portal's plan changes offer a promotion-code field once the
    // product says so.
    await page.getByLabel('Promotion codes at the paywall').check();
    await page.getByLabel('Promotion codes in the customer portal').check();
    await page.getByRole('button', { name: 'Save promotion codes' }).click();
    await page.getByRole('status').getByText('Saved.').waitFor();
    const saved = await page.request.get(`${baseUrl}/v1/ui/products/${productId}`);
    expect(await saved.json()).toMatchObject({ paywallPromotionCodes: true, portalPromotionCodes: true });
    await page.reload();
    expect(await page.getByLabel('Promotion codes at the paywall').isChecked()).toBe(true);
    expect(await page.getByLabel('Promotion codes in the customer portal').isChecked()).toBe(true);
    // The retention offer names a coupon by its code: an unknown one is refused at its field.
    const coupon = await page.request.post(`${baseUrl}/v1/sdk/coupons`, {
      headers: { 'x-csrf-token': await csrfOf(page), 'content-type': 'application/json' },
      data: { name: 'Stay', code: 'STAY20', percentOff: 20, duration: 'once' },
    });
    expect(coupon.status()).toBe(201);
    const offered = page.getByLabel('Coupon offered instead of cancelling');
    await offered.fill('NOPE');
    await page.getByRole('button', { name: 'Save retention offer' }).click();
    await page.getByRole('alert').getByText('No coupon NOPE').waitFor();
    await offered.fill('stay20');
    await page.getByRole('button', { name: 'Save retention offer' }).click();
    const couponId = ((await coupon.json()) as { id: string }).id;
    // Saved, the field shows the coupon's id.
    await expect.poll(() => offered.inputValue()).toBe(couponId);
    const withOffer = await page.request.get(`${baseUrl}/v1/ui/products/${productId}`);
    expect(((await withOffer.json()) as { retentionCoupon: string }).retentionCoupon).toBe(couponId);
    expect(await axeFindings(page)).toEqual([]);
    expect(await axeFindings(page)).toEqual([]);

    // The team: invite a developer and a viewer, who join by the mailed links.
    calls.team = await visit(page, 'Team', 'Team');
    const invite = async (to: string, role: string) => {
      const before = mailbox.countFor(to);
      await page.getByLabel('Email').fill(to);
      await page.getByLabel('Role', { exact: true }).selectOption(role);
      await page.getByRole('button', { name: 'Send invitation' }).click();
      await page.getByRole('cell', { name: to, exact: true }).waitFor();
      return invitationLink(to, before);
    };
    const developerLink = await invite('dev@tidewater.example', 'developer');
    const viewerLink = await invite('viewer@tidewater.example', 'viewer');
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'team');

    const developer = await person();
    await developer.page.goto(developerLink);
    await heading(developer.page, 'Join Tidewater Data');
    expect(await axeFindings(developer.page)).toEqual([]);
    expect(await unreachableByKeyboard(developer.page)).toEqual([]);
    await developer.page.getByLabel('Password').fill('developer passphrase');
    await developer.page.getByRole('button', { name: 'Join the team' }).click();
    await heading(developer.page, 'Overview');
    expect(await developer.page.getByRole('banner').innerText()).toContain(
      'dev@tidewater.example · developer',
    );

    const viewer = await person();
    await viewer.page.goto(viewerLink);
    await viewer.page.getByLabel('Password').fill('viewer passphrase');
    await viewer.page.getByRole('button', { name: 'Join the team' }).click();
    await heading(viewer.page, 'Overview');
    await visit(viewer.page, 'Catalog', 'Catalog');
    await viewer.page.getByRole('link', { name: 'Forecasts' }).waitFor();
    // A viewer sees no form to change anything, and the API refuses the change anyway.
    expect(await viewer.page.getByRole('button', { name: 'Add product' }).count()).toBe(0);
    const refused = await viewer.page.request.post(`${baseUrl}/v1/ui/products`, {
      headers: { 'x-csrf-token': await csrfOf(viewer.page), 'content-type': 'application/json' },
      data: { name: 'Not allowed' },
    });
    expect(refused.status()).toBe(403);
    expect(((await refused.json()) as { code: string }).code).toBe('role_forbidden');
    await visit(viewer.page, 'Team', 'Team');
    expect(await viewer.page.getByRole('button', { name: 'Send invitation' }).count()).toBe(0);
    expect(await viewer.page.getByRole('combobox', { name: /Role of/ }).count()).toBe(0);

    // The owner sees both members joined.
    await page.reload();
    await heading(page, 'Team');
    await page.getByRole('cell', { name: 'viewer@tidewater.example', exact: true }).waitFor();
    expect(await page.getByRole('heading', { name: 'Open invitations' }).isVisible()).toBe(true);
    await page.getByText('No open invitations.').waitFor();

    // Developers: a webhook endpoint, its secret shown once, a test delivery in its log.
    calls.developers = await visit(developer.page, 'Developers', 'Developers');
    await developer.page.getByText('No webhook endpoints').waitFor();
    await developer.page.getByLabel('URL').fill(receiverUrl);
    await developer.page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await developer.page.getByTestId('secret').innerText();
    expect(secret).toMatch(/^whsec_/);
    expect(await axeFindings(developer.page)).toEqual([]);
    expect(await unreachableByKeyboard(developer.page)).toEqual([]);
    await shoot(developer.page, 'developers-secret');
    await developer.page.getByRole('button', { name: 'Done' }).click();
    expect(await developer.page.getByTestId('secret').count()).toBe(0);
    await developer.page.getByRole('button', { name: `Send a test event to ${receiverUrl}` }).click();
    await developer.page.getByRole('button', { name: `Deliveries to ${receiverUrl}` }).click();
    await developer.page.getByRole('cell', { name: '200 ok' }).waitFor({ timeout: 15_000 });
    expect(await axeFindings(developer.page)).toEqual([]);
    expect(await unreachableByKeyboard(developer.page)).toEqual([]);

    // API keys: one made (its secret shown once, and it opens the API), then rolled at once.
    const opens = async (key: string) => {
      const answer = await fetch(`${baseUrl}/v1/ui/products?limit=1`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await answer.arrayBuffer();
      return answer.status;
    };
    await developer.page.getByLabel('Key name').fill('CI');
    await developer.page.getByRole('button', { name: 'Create key' }).click();
    const firstKey = await developer.page.getByTestId('secret').innerText();
    expect(firstKey).toMatch(/^sk_test_/);
    expect(await opens(firstKey)).toBe(200);
    await developer.page.getByRole('button', { name: 'Done' }).click();
    await developer.page.getByLabel('When rolling a key').selectOption('0');
    await developer.page.getByRole('button', { name: 'Roll CI' }).click();
    const rolledKey = await developer.page.getByTestId('secret').innerText();
    expect(rolledKey).not.toBe(firstKey);
    expect(await opens(rolledKey)).toBe(200);
    expect(await opens(firstKey)).toBe(401);
    expect(await axeFindings(developer.page)).toEqual([]);
    expect(await unreachableByKeyboard(developer.page)).toEqual([]);
    await shoot(developer.page, 'developers-keys');
    await developer.page.getByRole('button', { name: 'Done' }).click();

    // MCP servers: a developer puts the origin behind the proxy; its page checks the origin's
    // health, imports its tools, sells one of them to a plan, and says how each client connects.
    calls.mcpServers = await visit(developer.page, 'MCP servers', 'MCP servers');
    await developer.page.getByText('No MCP servers yet').waitFor();
    await developer.page.getByLabel('Name', { exact: true }).fill('weather');
    await developer.page.getByLabel('Origin URL').fill(origin.url);
    await developer.page.getByLabel('Product').selectOption({ label: 'Forecasts' });
    await developer.page.getByRole('button', { name: 'Add MCP server' }).click();
    const proxyUrl = await developer.page.getByTestId('proxy-url').innerText();
    expect(proxyUrl).toMatch(/\/mcp\/weather$/);
    calls.mcpServer = await counting(developer.page, 'weather', () =>
      developer.page.getByRole('link', { name: 'weather', exact: true }).click(),
    );
    await developer.page.getByText('Healthy', { exact: true }).waitFor();
    expect(
      await developer.page.getByText(/answered initialize and tools\/list in \d+ ms: 4 tools/).count(),
    ).toBe(1);
    await developer.page.getByRole('button', { name: 'Import tools from the origin' }).click();
    await developer.page.getByRole('cell', { name: 'add', exact: true }).waitFor();
    await developer.page.getByRole('group', { name: 'Who may call add' }).getByLabel('Metered').check();
    await developer.page
      .getByRole('group', { name: 'Who may call countdown' })
      .getByLabel('Free for everyone')
      .check();
    await developer.page.getByRole('button', { name: 'Save who may call each tool' }).click();
    await developer.page.getByText('Tool access saved').waitFor();
    const server = (await (
      await developer.page.request.get(`${baseUrl}/v1/ui/mcp-servers/weather`)
    ).json()) as {
      tools: { name: string; planIds: string[]; noPlan: boolean }[];
    };
    const metered = (
      (await (
        await developer.page.request.get(`${baseUrl}/v1/ui/products/${productId}/plans?limit=10`)
      ).json()) as {
        data: { id: string; name: string }[];
      }
    ).data.find((p) => p.name === 'Metered')?.id;
    expect(server.tools.find((t) => t.name === 'add')).toMatchObject({ planIds: [metered], noPlan: false });
    expect(server.tools.find((t) => t.name === 'countdown')).toMatchObject({ planIds: [], noPlan: true });
    await developer.page.getByText(`claude mcp add --transport http weather ${proxyUrl}`).waitFor();
    expect(await axeFindings(developer.page)).toEqual([]);
    expect(await unreachableByKeyboard(developer.page)).toEqual([]);
    await shoot(developer.page, 'mcp-server');

    // A customer's usage on the chart: what the API says, to the record.
    const csrf = await csrfOf(page);
    const headers = { 'x-csrf-token': csrf, 'content-type': 'application/json' };
    // The receiver is down while Ada is created: customer.created's delivery fails.
    receiverFails = true;
    expect(
      (
        await page.request.post(`${baseUrl}/v1/sdk/customers`, {
          headers,
          data: { externalRef: 'ada', email: 'ada@example.com', name: 'Ada Lovelace' },
        })
      ).status(),
    ).toBe(201);
    type Attempt = { eventType: string; succeeded: boolean; statusCode: number | null };
    const attemptsOf = async (type: string): Promise<Attempt[]> => {
      const endpoints = (await (await page.request.get(`${baseUrl}/v1/webhook_endpoints`)).json()) as {
        data: { id: string }[];
      };
      const listed = await page.request.get(
        `${baseUrl}/v1/webhook_attempts?limit=50&endpointId=${endpoints.data[0]?.id}`,
      );
      return ((await listed.json()) as { data: Attempt[] }).data.filter((a) => a.eventType === type);
    };
    for (let i = 0; i < 100 && (await attemptsOf('customer.created')).length === 0; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect((await attemptsOf('customer.created')).map((a) => [a.succeeded, a.statusCode])).toEqual([
      [false, 500],
    ]);
    receiverFails = false;
    for (const id of ['call-1', 'call-2', 'call-3'])
      expect(
        (
          await page.request.post(`${baseUrl}/v1/sdk/meter-events`, {
            headers,
            data: { customerRef: 'ada', id },
          })
        ).status(),
      ).toBeLessThan(300);
    await harness.settled();
    calls.customers = await visit(page, 'Customers', 'Customers');
    await page.getByLabel('Email or external reference').fill('ada');
    await page.getByRole('button', { name: 'Search' }).click();
    calls.customer = await counting(page, 'Ada Lovelace', () =>
      page.getByRole('link', { name: 'Ada Lovelace' }).click(),
    );
    const daily = (await (
      await page.request.get(`${baseUrl}/ui/analytics/daily?customerRef=ada`)
    ).json()) as {
      data: { records: number }[];
    };
    const apiTotal = daily.data.reduce((sum, d) => sum + d.records, 0);
    expect(apiTotal).toBe(3);
    expect(await page.getByTestId('chart-total').innerText()).toBe(String(apiTotal));
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'customer');

    // Billing: Ada buys a $9 plan with the sandbox's test card; the owner refunds $3 of it.
    const pro = await page.request.post(`${baseUrl}/v1/ui/products/${productId}/plans`, {
      headers,
      data: { name: 'Pro', type: 'recurring', billingCycle: 'monthly', currency: 'usd', price: 900 },
    });
    expect(pro.status()).toBe(201);
    const card = { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' };
    expect(
      (
        await page.request.post(`${baseUrl}/v1/sdk/customers/ada/payment-methods`, {
          headers,
          data: { card },
        })
      ).status(),
    ).toBe(201);
    const bought = await page.request.post(`${baseUrl}/v1/sdk/activate`, {
      headers,
      data: { customerRef: 'ada', planRef: ((await pro.json()) as { id: string }).id },
    });
    expect(bought.status()).toBeLessThan(300);
    calls.billing = await visit(page, 'Billing', 'Billing');
    await page.getByRole('cell', { name: 'paid', exact: true }).waitFor();
    const payment = page.getByRole('button', { name: /^Refund txn_/ });
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await payment.click();
    // A typo is refused by the form, never read as "refund everything".
    await page.getByLabel('Amount to refund').fill('3,00');
    await page.getByRole('button', { name: 'Issue refund' }).click();
    await page.getByText('must be an amount such as 3.00, or empty to refund what is left').waitFor();
    await page.getByLabel('Amount to refund').fill('3.00');
    await page.getByRole('button', { name: 'Issue refund' }).click();
    await page.getByRole('button', { name: 'Issue refund' }).waitFor({ state: 'detached' });
    let refunds: { amount: number }[] = [];
    for (let i = 0; i < 100 && refunds.length === 0; i++) {
      const listed = await page.request.get(`${baseUrl}/v1/ui/transactions?limit=10&type=refund`);
      refunds = ((await listed.json()) as { data: { amount: number }[] }).data;
      if (refunds.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(refunds.map((r) => Math.abs(r.amount))).toEqual([300]);
    await page.reload();
    await heading(page, 'Billing');
    await page.getByRole('cell', { name: 'refund', exact: true }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'billing');

    // Ada, about to cancel in her portal, takes the retention offer instead (STAY20, set above);
    // the Revenue page counts her.
    const portal = await page.request.post(`${baseUrl}/v1/sdk/portal-sessions`, {
      headers,
      data: { customerRef: 'ada' },
    });
    expect(portal.status()).toBe(201);
    const ada = await newPerson(browser);
    await ada.page.goto(((await portal.json()) as { url: string }).url);
    const held = ((await bought.json()) as { purchaseRef: string }).purchaseRef;
    await ada.page.goto(`${baseUrl}/portal/cancel/${held}`);
    await ada.page.getByText('Keep your plan and get Stay (20% off)').waitFor();
    await ada.page.getByRole('button', { name: 'Keep my plan with this offer' }).click();
    await ada.page.waitForURL(/\/portal\?done=retained/);
    expect(ada.errors).toEqual([]);
    await ada.context.close();
    await visit(page, 'Revenue', 'Revenue');
    await page
      .getByText('1 customer took the retention offer in the portal instead of cancelling.')
      .waitFor();
    expect(await axeFindings(page)).toEqual([]);

    // Ada's money: the paid invoice, the card on file; her sign-ins revoked.
    await visit(page, 'Customers', 'Customers');
    await page.getByRole('link', { name: 'Ada Lovelace' }).click();
    await heading(page, 'Ada Lovelace');
    calls.customerMoney = await counting(page, 'Ada Lovelace', () =>
      page.getByRole('button', { name: 'Invoices, credits and cards' }).click(),
    );
    await page.getByText('visa ending 4242, expires 12/2035 (default)').waitFor();
    await page.getByRole('cell', { name: 'paid', exact: true }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByRole('button', { name: 'Revoke the customer’s sign-ins' }).click();
    await page.getByText('is revoked').waitFor();

    // The failed delivery, replayed from the endpoint's log once the receiver is back.
    await visit(developer.page, 'Developers', 'Developers');
    await developer.page.getByRole('button', { name: `Deliveries to ${receiverUrl}` }).click();
    await developer.page.getByRole('button', { name: 'Replay customer.created (1)' }).click();
    await developer.page.getByText('Queued again').waitFor();
    for (let i = 0; i < 100 && !(await attemptsOf('customer.created')).some((a) => a.succeeded); i++)
      await new Promise((r) => setTimeout(r, 100));
    expect((await attemptsOf('customer.created')).map((a) => a.succeeded).sort()).toEqual([false, true]);
    await developer.page.reload();
    await heading(developer.page, 'Developers');
    await developer.page.getByRole('button', { name: `Deliveries to ${receiverUrl}` }).click();
    await developer.page.getByRole('button', { name: 'Replay customer.created (2)' }).waitFor();
    // The failed attempt opened: the request (its ids and the signed envelope) and the answer.
    const failed = developer.page
      .getByRole('row')
      .filter({ has: developer.page.getByRole('button', { name: 'Replay customer.created (1)' }) });
    await failed.locator('summary').click();
    await failed.getByText('Response: HTTP 500:').waitFor();
    await failed.getByText('"type": "customer.created"').waitFor();
    expect(await failed.getByText(/^Request: POST http:\/\/127\.0\.0\.1:\d+\/hooks/).count()).toBe(1);
    expect(await axeFindings(developer.page)).toEqual([]);
    expect(await unreachableByKeyboard(developer.page)).toEqual([]);
    await shoot(developer.page, 'webhook-deliveries');
    calls.overview = await visit(page, 'Overview', 'Overview');
    expect(await page.getByTestId('chart-total').innerText()).toBe('3');

    // The audit log has what the team did.
    calls.audit = await visit(page, 'Audit log', 'Audit log');
    for (const operation of [
      'createProduct',
      'createPlan',
      'inviteMember',
      'acceptInvitation',
      'createWebhookEndpoint',
    ])
      await page.getByRole('cell', { name: operation, exact: true }).first().waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'audit-log');

    // Live mode, once enabled: the switch shows live data (none yet), and back.
    await harness.controlPlane.providers.setLiveEnabled(
      (await page.request.get(`${baseUrl}/v1/console/session`).then((r) => r.json())).provider.id,
      true,
    );
    await page.reload();
    await heading(page, 'Audit log');
    await visit(page, 'Catalog', 'Catalog');
    await page.getByRole('link', { name: 'Forecasts' }).waitFor();
    await page.getByText('Live', { exact: true }).click();
    await page.getByText('No products yet').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByText('Sandbox', { exact: true }).click();
    await page.getByRole('link', { name: 'Forecasts' }).waitFor();

    console.log(`API calls per page: ${JSON.stringify(calls)}`);
    for (const [name, made] of Object.entries(calls))
      expect(made.length, `${name}: ${made.join(', ')}`).toBeLessThanOrEqual(callBudgetOf(name));
    expect([...owner.errors, ...developer.errors, ...viewer.errors]).toEqual([]);
    await Promise.all([owner.context.close(), developer.context.close(), viewer.context.close()]);
  });

  it('works with the keyboard alone: sign in, move through the menu, sign out', async () => {
    const { context, page } = await person();
    await page.goto(`${baseUrl}/console/sign-in`);
    await heading(page, 'Sign in');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.getAttribute("name")')).toBe('email');
    await page.keyboard.type('founder@tidewater.example');
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await heading(page, 'Overview');
    // The skip link first, then the banner's controls, then the menu.
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Skip to content');
    for (let i = 0; i < 20; i++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate('document.activeElement?.textContent')) === 'Catalog') break;
    }
    await page.keyboard.press('Enter');
    await heading(page, 'Catalog');
    for (let i = 0; i < 20; i++) {
      await page.keyboard.press('Shift+Tab');
      if ((await page.evaluate('document.activeElement?.textContent')) === 'Sign out') break;
    }
    await page.keyboard.press('Enter');
    await heading(page, 'Sign in');
    await context.close();
  });
});
