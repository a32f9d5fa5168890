import { readFileSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser';
import {
  axeFindings,
  callBudgetOf,
  counting,
  csrfOf,
  heading,
  newPerson,
  shoot,
  unreachableByKeyboard,
  visit,
} from '../helpers/console-browser';
import { startListeningControlPlane, type TestControlPlane } from '../helpers/control-plane';
import { startMailbox } from '../helpers/mailbox';
import { type StripeMock, startStripeMock } from '../helpers/stripe-mock';

/**
 * The console's operations pages (issue 62) in Chromium against a running control plane: the
 * business profile and brand colour the hosted checkout then wears, a customer's credit movements
 * and events, the event catalog, disputes (opened on a real sandbox payment, answered, closed),
 * payouts, test clocks, and in live the Stripe connection (stripe-mock); axe on every page and
 * the API calls each page makes.
 */

let harness: TestControlPlane;
let baseUrl: string;
let browser: Browser;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
let stripe: StripeMock;

beforeAll(async () => {
  mailbox = await startMailbox();
  stripe = await startStripeMock({ payments: 'succeed' });
  ({ harness, url: baseUrl } = await startListeningControlPlane({
    bodyLimitBytes: 1024 * 1024,
    smtpUrl: mailbox.url,
    stripeApiUrl: stripe.url,
  }));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await harness?.close();
  await mailbox?.close();
  await stripe?.close();
});

/** Signs up through the pages, verifying by the mailed code, and lands on the overview. */
async function signUp(page: Page, business: string, email: string) {
  await page.goto(`${baseUrl}/console/sign-up`);
  await page.getByLabel('Business name').fill(business);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill('a console passphrase');
  await page.getByRole('button', { name: 'Email me a code' }).click();
  await heading(page, 'Check your email');
  await page.getByLabel('Code').fill(await mailbox.codeFor(email));
  await page.getByRole('button', { name: 'Verify and continue' }).click();
  await heading(page, 'Overview');
}

describe('the console’s operations pages', () => {
  it('settings, a customer’s activity, events, disputes, payouts, test clocks and Stripe', async () => {
    const owner = await newPerson(browser);
    const { page } = owner;
    await signUp(page, 'Harbor Maps', 'owner@harbor.example');
    const calls: Record<string, string[]> = {};
    // What the pages will show, made through the same API with the session.
    const headers = { 'x-csrf-token': await csrfOf(page, baseUrl), 'content-type': 'application/json' };
    const post = async (path: string, data: unknown) => {
      const answer = await page.request.post(`${baseUrl}${path}`, { headers, data });
      expect(answer.status(), `${path}: ${await answer.text()}`).toBeLessThan(300);
      return (await answer.json()) as Record<string, unknown>;
    };
    const product = await post('/v1/ui/products', { name: 'Tiles' });
    const plan = await post(`/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      type: 'recurring',
      price: 900,
    });
    await post('/v1/sdk/customers', { externalRef: 'ada', email: 'ada@example.com', name: 'Ada Lovelace' });
    await post('/v1/sdk/customers/ada/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    await post('/v1/sdk/activate', { customerRef: 'ada', planRef: plan.id });

    // Plans of the other kinds: paid from credits with a top-up pack, and priced per package.
    await visit(page, 'Catalog', 'Catalog');
    await page.getByRole('link', { name: 'Tiles' }).click();
    await heading(page, 'Tiles');
    await page.getByLabel('Name').fill('Credits');
    await page.getByLabel('Paid').selectOption('pre-paid');
    await page.getByLabel('Credits per call').fill('2');
    await page.getByLabel('Top-up pack: credits').fill('100');
    await page.getByLabel('Top-up pack: price').fill('5.00');
    await page.getByRole('button', { name: 'Add plan' }).click();
    await page.getByRole('cell', { name: 'Credits', exact: true }).waitFor();
    await page.getByLabel('Name').fill('Packs');
    await page.getByLabel('Paid').selectOption('post-paid');
    await page.getByLabel('Billing period').selectOption('yearly');
    await page.getByLabel('Model').selectOption('package');
    await page.getByLabel('Cents per package').fill('50');
    await page.getByLabel('Units per package').fill('1000');
    // 2,500 units are three started packages of 1,000 at 50 cents: $1.50, as invoices price them.
    expect(await page.getByTestId('preview-total').innerText()).toBe('$1.50');
    await page.getByRole('button', { name: 'Add plan' }).click();
    await page.getByRole('cell', { name: 'Packs', exact: true }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    const made = (
      (await (await page.request.get(`${baseUrl}/v1/ui/products/${product.id}/plans?limit=10`)).json()) as {
        data: Record<string, unknown>[];
      }
    ).data;
    expect(made.find((p) => p.name === 'Credits')).toMatchObject({
      billingModel: 'pre-paid',
      creditsPerUnit: 2,
      topUp: { credits: 100, amount: 500 },
    });
    expect(made.find((p) => p.name === 'Packs')).toMatchObject({
      billingCycle: 'yearly',
      packageSize: 1000,
      unitAmount: 50,
    });

    // Settings: the business profile and brand colour, refused by field, then worn by checkout.
    calls.settings = await visit(page, 'Settings', 'Settings');
    await page.getByLabel('Brand colour').fill('green');
    await page.getByRole('button', { name: 'Save business profile' }).click();
    await page.locator('#field-brandColor-error').waitFor();
    await page.getByLabel('Brand colour').fill('#0B6E4F');
    expect(await page.getByTestId('brand-preview').getAttribute('style')).toBe(
      'background: rgb(11, 110, 79); color: rgb(255, 255, 255);',
    );
    await page.getByLabel('Support email').fill('help@harbor.example');
    await page.getByRole('button', { name: 'Save business profile' }).click();
    await page.getByText('Saved: the hosted pages show it now.').waitFor();
    await page.getByLabel('Low balance threshold (credits)').fill('-5');
    await page.getByRole('button', { name: 'Save threshold' }).click();
    await page.getByText('must be a whole number of credits, 0 or more').waitFor();
    await page.getByLabel('Low balance threshold (credits)').fill('50');
    await page.getByRole('button', { name: 'Save threshold' }).click();
    await page.getByText('Saved.', { exact: true }).waitFor();
    // On invoices: the legal details and postal address every invoice is issued under.
    await page.getByLabel('VAT number').fill('x');
    await page.getByRole('button', { name: 'Save invoice details' }).click();
    await page.locator('#field-vatNumber-error').waitFor();
    await page.getByLabel('VAT number').fill('GB123456789');
    await page.getByLabel('Company number').fill('01234567');
    await page.getByLabel('Address line 1').fill('1 Harbour Rd');
    await page.getByLabel('City').fill('Bristol');
    await page.getByLabel('Country').selectOption('GB');
    await page.getByRole('button', { name: 'Save invoice details' }).click();
    await page.getByText('Saved: the next invoices show it.').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'settings');
    const merchant = (await (await page.request.get(`${baseUrl}/v1/sdk/merchant`)).json()) as Record<
      string,
      unknown
    >;
    expect(merchant).toMatchObject({
      brandColor: '#0b6e4f',
      supportEmail: 'help@harbor.example',
      vatNumber: 'GB123456789',
      companyNumber: '01234567',
      address: { line1: '1 Harbour Rd', city: 'Bristol', country: 'GB', line2: null },
    });
    const session = await post('/v1/sdk/checkout-sessions', {
      customerRef: 'ada',
      topup: { credits: 10, amount: 500 },
    });
    const checkout = await page.request.get(`${baseUrl}/checkout/${session.id}`);
    expect(await checkout.text()).toContain('--brand:#0b6e4f;--on-brand:#ffffff');

    // Usage analytics: the page renders its charts' questions and answers (the numbers against
    // real tool calls are checked in console-usage-browser.test.ts).
    calls.usage = await visit(page, 'Usage', 'Usage');
    await page.getByText('No tool calls in this range.').waitFor();
    await page.getByLabel('Group by').selectOption('customer');
    await page.getByLabel('Per').selectOption('week');
    await page.getByTestId('usage-total').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);

    // A customer's activity: a grant (once, whatever the clicks), its movement and its events.
    await visit(page, 'Customers', 'Customers');
    await page.getByRole('link', { name: 'Ada Lovelace' }).click();
    await heading(page, 'Ada Lovelace');
    calls.customerActivity = await counting(page, 'Ada Lovelace', () =>
      page.getByRole('button', { name: 'Credit movements and events' }).click(),
    );
    await page.getByText('No credits have moved for this customer.').waitFor();
    await page.getByRole('cell', { name: 'customer.created', exact: true }).waitFor();
    await page.getByLabel('Credits to grant').fill('2.5');
    await page.getByRole('button', { name: 'Grant credits' }).click();
    await page.getByText('must be a whole number of credits, 1 or more').waitFor();
    await page.getByLabel('Credits to grant').fill('500');
    await page.getByLabel('Reason').fill('Welcome');
    await page.getByRole('button', { name: 'Grant credits' }).click();
    await page.getByRole('cell', { name: '+500' }).waitFor();
    await page.getByRole('cell', { name: 'customer.credit.granted', exact: true }).waitFor();
    const balance = (await (await page.request.get(`${baseUrl}/v1/sdk/customers/ada/balance`)).json()) as {
      credits: number;
    };
    expect(balance.credits).toBe(500);
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'customer-activity');

    // The customer's billing details, which their next invoices name them by.
    await page.getByRole('button', { name: 'Invoices, credits and cards' }).click();
    await page.getByRole('heading', { name: 'Billing details' }).waitFor();
    await page.getByLabel('Kind').selectOption('eu_vat');
    await page.getByLabel('Number', { exact: true }).fill('123');
    await page.getByRole('button', { name: 'Add tax ID' }).click();
    await page.getByText('is not a valid EU VAT number').waitFor();
    await page.getByLabel('Number', { exact: true }).fill('de 123 456 789');
    await page.getByRole('button', { name: 'Add tax ID' }).click();
    await page.getByRole('cell', { name: 'DE123456789', exact: true }).waitFor();
    await page.getByLabel('Address line 1').fill('Unter den Linden 1');
    await page.getByLabel('Postal code').fill('10117');
    await page.getByLabel('Country').selectOption('DE');
    await page.getByRole('button', { name: 'Save address' }).click();
    await page.getByText('Unter den Linden 1, 10117, Germany').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    expect(
      (await (await page.request.get(`${baseUrl}/v1/sdk/customers/ada`)).json()) as unknown,
    ).toMatchObject({
      address: { line1: 'Unter den Linden 1', postalCode: '10117', country: 'DE' },
      taxIds: [{ type: 'eu_vat', value: 'DE123456789' }],
    });
    // A sandbox customer's tax ID is never checked against a registry (only Stripe's are).
    await page.getByRole('table', { name: 'Tax IDs' }).getByRole('cell', { name: 'Not checked' }).waitFor();
    await page.getByRole('button', { name: 'Remove EU VAT DE123456789' }).click();
    await page.getByText('No tax IDs.').waitFor();

    // The event catalog and the events recorded, filtered by type.
    // An endpoint that takes only the events chosen, by group, from the catalog.
    await visit(page, 'Developers', 'Developers');
    await page.getByLabel('URL').fill('http://127.0.0.1:9/hooks');
    await page.getByText('Events: all (choose some)').click();
    await page.getByRole('group', { name: 'payment' }).getByLabel('payment.disputed').check();
    await page.getByRole('group', { name: 'payout' }).getByLabel('payout.paid').check();
    await page.getByText('Events: 2 chosen (choose some)').waitFor();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByTestId('secret').waitFor();
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByText('events: payment.disputed, payout.paid').waitFor();
    calls.events = await visit(page, 'Events', 'Events', 'Developers');
    await page.getByRole('heading', { name: 'checkout_session' }).waitFor();
    await page.getByRole('cell', { name: 'A payment was disputed' }).waitFor();
    await page.getByLabel('Event type').selectOption('purchase.activated');
    const recent = page.getByRole('table', { name: 'Events, newest first' });
    await recent.getByRole('cell', { name: 'purchase.activated', exact: true }).waitFor();
    expect(await recent.getByRole('cell', { name: 'customer.created', exact: true }).count()).toBe(0);
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'events');

    // Disputes: one opened on Ada's payment, answered with evidence, then won.
    await visit(page, 'Billing', 'Billing');
    calls.disputes = await visit(page, 'Disputes', 'Disputes', 'Billing');
    await page.getByText('No disputes').waitFor();
    await page.getByLabel('Payment').selectOption({ index: 1 });
    await page.getByRole('button', { name: 'Open a dispute' }).click();
    const respond = page.getByRole('button', { name: /^Respond to dp_/ });
    await respond.waitFor();
    await page.getByRole('cell', { name: '$9.00' }).waitFor();
    await respond.click();
    await page.getByLabel('Your answer to the bank').fill('Delivered: the customer used 1,204 tiles.');
    await page.getByRole('button', { name: 'Submit evidence' }).click();
    await page.getByRole('cell', { name: 'under review' }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'disputes');
    await page.getByRole('button', { name: /^Close as won: dp_/ }).click();
    await page.getByRole('cell', { name: 'won', exact: true }).waitFor();

    // Payouts: more than the balance is refused with the balance; the whole balance goes.
    calls.payouts = await visit(page, 'Payouts', 'Payouts', 'Billing');
    await page.getByText('No payouts yet').waitFor();
    await page.getByLabel('Amount').fill('100000');
    await page.getByRole('button', { name: 'Send payout' }).click();
    await page.getByRole('alert').getByText('balance is', { exact: false }).waitFor();
    await page.getByLabel('Amount').fill('');
    await page.getByRole('button', { name: 'Send payout' }).click();
    await page.getByRole('cell', { name: 'pending' }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);

    // Test clocks: one made, then advanced a month.
    calls.testClocks = await visit(page, 'Test clocks', 'Test clocks', 'Billing');
    await page.getByText('No test clocks yet.').waitFor();
    await page.getByLabel('Clock name').fill('Renewals');
    await page.getByLabel('Starts at (UTC)').fill('2027-01-01T00:00');
    await page.getByRole('button', { name: 'Create clock' }).click();
    await page.getByRole('cell', { name: 'Renewals', exact: true }).waitFor();
    await page.getByLabel('New time of Renewals (UTC)').fill('2027-02-01T12:00');
    await page.getByRole('button', { name: 'Advance' }).click();
    await page.getByRole('cell', { name: '1 Feb 2027, 12:00' }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'test-clocks');

    // The overview at a glance: this month's net revenue as the P&L counts it, endpoints failing.
    const pnl = (await (
      await page.request.get(`${baseUrl}/v1/ui/financials/pnl?period=this-month`)
    ).json()) as {
      current: { netRevenue: number };
    };
    expect(pnl.current.netRevenue).toBeGreaterThan(0);
    calls.overview = await visit(page, 'Overview', 'Overview');
    // Read fresh on opening: what was cached from the first visit shows until the answer comes.
    await page
      .getByTestId('revenue-month')
      .filter({ hasText: `$${(pnl.current.netRevenue / 100).toFixed(2)}` })
      .waitFor();
    expect(await page.getByTestId('failing-endpoints').innerText()).toBe('All delivering.');
    // Ada's $9.00 a month is the MRR, and she the one paying customer.
    expect(await page.getByTestId('mrr-glance').innerText()).toBe('$9.00');
    expect(await page.getByTestId('paying-glance').innerText()).toBe('1 paying customers');
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);

    // Revenue: the cards, the chart's months and both tables say what the API answers, and the
    // CSV a person downloads holds the table's rows.
    const month = (back: number) => {
      const now = new Date();
      return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - back, 1)).toISOString().slice(0, 7);
    };
    const revenue = (await (
      await page.request.get(`${baseUrl}/v1/ui/analytics/revenue?from=${month(5)}&to=${month(0)}`)
    ).json()) as {
      months: {
        month: string;
        mrr: { end: number; new: number };
        customers: { paying: number };
        revenue: { net: number; gross: number };
      }[];
    };
    const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;
    const now = revenue.months.at(-1) as (typeof revenue.months)[number];
    expect(now.mrr).toMatchObject({ end: 900, new: 900 });
    calls.revenue = await visit(page, 'Revenue', 'Revenue');
    expect(await page.getByTestId('mrr-now').innerText()).toBe(dollars(now.mrr.end));
    expect(await page.getByTestId('paying-now').innerText()).toBe(String(now.customers.paying));
    const label = await page.getByTestId('mrr-chart').getAttribute('aria-label');
    for (const m of revenue.months) expect(label).toContain(`${m.month}: MRR ${dollars(m.mrr.end)}`);
    const mrrTable = page.getByRole('table', { name: 'MRR and its movements per month' });
    const moneyTable = page.getByRole('table', { name: 'Revenue per month by what it paid for' });
    for (const m of revenue.months) {
      const mrrRow = mrrTable.getByRole('row').filter({ hasText: m.month });
      expect(await mrrRow.getByRole('cell').nth(7).innerText()).toBe(dollars(m.mrr.end));
      const customerRow = page
        .getByRole('table', { name: 'Paying and active customers and churn per month' })
        .getByRole('row')
        .filter({ hasText: m.month });
      expect(await customerRow.getByRole('cell').nth(1).innerText()).toBe(String(m.customers.paying));
      const moneyRow = moneyTable.getByRole('row').filter({ hasText: m.month });
      expect(await moneyRow.getByRole('cell').nth(6).innerText()).toBe(dollars(m.revenue.gross));
      expect(await moneyRow.getByRole('cell').nth(10).innerText()).toBe(dollars(m.revenue.net));
    }
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export revenue as CSV' }).click(),
    ]);
    const csv = readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\r\n');
    expect(csv[0]).toBe(
      'Month,Recurring (USD),Usage (USD),One-time (USD),Credits (USD),Other (USD),Gross (USD),Refunds (USD),Disputes (USD),Fees (USD),Net (USD),Payers,Net per payer (USD)',
    );
    expect(csv.slice(1).map((line) => line.split(',')[0])).toEqual(revenue.months.map((m) => m.month));
    expect(csv.slice(1).map((line) => line.split(',')[10])).toEqual(
      revenue.months.map((m) => (m.revenue.net / 100).toFixed(2)),
    );
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'revenue');

    // Live, once the operator enables it: test clocks are sandbox-only, and Stripe connects.
    const providerId = (await (await page.request.get(`${baseUrl}/v1/console/session`)).json()).provider.id;
    await harness.controlPlane.providers.setLiveEnabled(providerId, true);
    await page.reload();
    await heading(page, 'Revenue');
    await page.getByText('Live', { exact: true }).click();
    await visit(page, 'Billing', 'Billing');
    await visit(page, 'Test clocks', 'Test clocks', 'Billing');
    await page.getByText('Test clocks are a sandbox tool').waitFor();
    calls.liveSettings = await visit(page, 'Settings', 'Settings');
    await page.getByText('Not connected').waitFor();
    await page.getByText(`/v1/processors/stripe/webhooks/${providerId}`).waitFor();
    await page.getByLabel('Stripe secret key').fill('pk_live_notasecret');
    await page.getByLabel('Webhook signing secret').fill('whsec_abcdefghijklmnop');
    await page.getByRole('button', { name: 'Connect Stripe' }).click();
    await page.locator('#field-secretKey-error').waitFor();
    await page.getByLabel('Stripe secret key').fill('sk_test_4eC39HqLyjWDarjtT1zdp7dc');
    await page.getByRole('button', { name: 'Connect Stripe' }).click();
    await page.getByText(/Connected to acct_\w+ \(test mode\), key ending p7dc/).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'settings-stripe');
    await page.getByRole('button', { name: 'Disconnect Stripe' }).click();
    await page.getByText('Not connected').waitFor();

    // The account: a wrong current password is refused by the form (the session stays); a new
    // one works; signing out everywhere ends this session and a second one alike.
    const second = await newPerson(browser);
    await second.page.goto(`${baseUrl}/console/sign-in`);
    await second.page.getByLabel('Email').fill('owner@harbor.example');
    await second.page.getByLabel('Password').fill('a console passphrase');
    await second.page.getByRole('button', { name: 'Sign in' }).click();
    await heading(second.page, 'Overview');
    calls.account = await counting(page, 'Your account', () =>
      page.getByRole('link', { name: /^Your account: owner@harbor.example/ }).click(),
    );
    await page.getByLabel('Current password').fill('not my password');
    await page.getByLabel('New password').fill('a newer passphrase');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('The current password is not right').waitFor();
    await page.getByLabel('Current password').fill('a console passphrase');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed; your other sessions have ended.').waitFor();
    // The other session ended: its next read sends it to sign-in.
    await second.page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Customers' })
      .click();
    await heading(second.page, 'Sign in');
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByRole('button', { name: 'Sign out everywhere' }).click();
    await heading(page, 'Sign in');
    await page.getByLabel('Email').fill('owner@harbor.example');
    await page.getByLabel('Password').fill('a newer passphrase');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await heading(page, 'Overview');
    await second.context.close();

    console.log(`API calls per page: ${JSON.stringify(calls)}`);
    for (const [name, made] of Object.entries(calls))
      expect(made.length, `${name}: ${made.join(', ')}`).toBeLessThanOrEqual(callBudgetOf(name));
    expect(owner.errors).toEqual([]);
    await owner.context.close();
  });

  it('coupons: one made on its page, redeemed by a customer, counted, then archived', async () => {
    const owner = await newPerson(browser);
    const { page } = owner;
    await signUp(page, 'Coupon Maps', 'owner@coupons.example');
    await visit(page, 'Billing', 'Billing');
    const calls = await visit(page, 'Coupons', 'Coupons', 'Billing');
    expect(calls.length).toBeLessThanOrEqual(callBudgetOf('coupons'));
    await page.getByText('No coupons yet: make one below to offer a discount.').waitFor();
    // Refused at the edge, the API's words under the field.
    await page.getByLabel('Coupon name').fill('Launch');
    await page.getByLabel('Percent off').fill('12.345');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.locator('#field-percentOff-error').waitFor();
    await page.getByLabel('Code').fill('LAUNCH20');
    await page.getByLabel('Percent off').fill('20');
    await page.getByLabel('Applies to').selectOption('repeating');
    await page.getByLabel('Months').fill('3');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.getByRole('cell', { name: 'LAUNCH20' }).waitFor();
    await page.getByRole('cell', { name: '20%' }).waitFor();
    await page.getByRole('cell', { name: '3 months' }).waitFor();
    // An amount off in a currency without decimals is typed and shown in yen, not hundredths.
    await page.getByLabel('Coupon name').fill('Yen welcome');
    await page.getByLabel('Takes off').selectOption('amount');
    await page.getByLabel('Amount off').fill('500.5');
    await page.getByLabel('Currency').fill('jpy');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.locator('#field-amountOff-error').getByText('must be an amount such as 500').waitFor();
    await page.getByLabel('Amount off').fill('500');
    await page.getByLabel('Applies to').selectOption('once');
    await page.getByLabel('First purchase only').check();
    // A minimum purchase in the same currency's units: whole yen.
    await page.getByLabel('Minimum purchase').fill('2000.5');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.locator('#field-minimumAmount-error').getByText('must be an amount such as 5000').waitFor();
    await page.getByLabel('Minimum purchase').fill('2000');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.getByRole('cell', { name: '¥500' }).waitFor();
    await page.getByRole('cell', { name: 'customers who never paid, on purchases from ¥2,000' }).waitFor();
    const yen = (await (await page.request.get(`${baseUrl}/v1/sdk/coupons?limit=10`)).json()) as {
      data: Array<{
        name: string;
        amountOff: number | null;
        currency: string | null;
        firstTimeOnly: boolean;
        minimumAmount: number | null;
        minimumAmountCurrency: string | null;
      }>;
    };
    expect(yen.data.find((c) => c.name === 'Yen welcome')).toMatchObject({
      amountOff: 500,
      currency: 'jpy',
      firstTimeOnly: true,
      minimumAmount: 2000,
      minimumAmountCurrency: 'jpy',
    });

    // A customer redeems it with their activation: 20 % off the first invoice.
    const headers = { 'x-csrf-token': await csrfOf(page, baseUrl), 'content-type': 'application/json' };
    const post = async (path: string, data: unknown) => {
      const answer = await page.request.post(`${baseUrl}${path}`, { headers, data });
      expect(answer.status(), `${path}: ${await answer.text()}`).toBeLessThan(300);
      return (await answer.json()) as Record<string, unknown>;
    };
    const product = await post('/v1/ui/products', { name: 'Maps' });
    const plan = await post(`/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      type: 'recurring',
      price: 1500,
    });
    await post('/v1/sdk/customers', {
      externalRef: 'hedy',
      email: 'hedy@coupons.example',
      name: 'Hedy Lamarr',
    });
    await post('/v1/sdk/customers/hedy/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    const activation = await post('/v1/sdk/activate', {
      customerRef: 'hedy',
      planRef: plan.id,
      coupon: 'launch20',
    });
    expect(activation.status).toBe('activated');
    const invoices = (await (
      await page.request.get(`${baseUrl}/v1/sdk/invoices?customerRef=hedy`)
    ).json()) as {
      data: Array<{ total: number }>;
    };
    expect(invoices.data.map((invoice) => invoice.total)).toEqual([1200]);
    await page.reload();
    await page.getByRole('cell', { name: '1', exact: true }).waitFor();
    // A coupon for one product's plans: ticked among the products, named in the table.
    await page.getByLabel('Coupon name').fill('Maps only');
    await page.getByLabel('Percent off').fill('10');
    await page.getByRole('group', { name: 'Products' }).getByLabel('Maps').check();
    // For one customer, named by the provider's own reference: an unknown one is refused first.
    await page.getByLabel('For one customer').fill('nobody');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.locator('#field-customerRef-error').getByText('no customer nobody').waitFor();
    await page.getByLabel('For one customer').fill('hedy');
    await page.getByRole('button', { name: 'Create coupon' }).click();
    await page.getByRole('cell', { name: 'Maps', exact: true }).waitFor();
    const scoped = (await (await page.request.get(`${baseUrl}/v1/sdk/coupons?limit=10`)).json()) as {
      data: Array<{ name: string; productIds: string[]; customerRef: string | null }>;
    };
    const hedy = (await (await page.request.get(`${baseUrl}/v1/sdk/customers/hedy`)).json()) as {
      id: string;
    };
    expect(scoped.data.find((c) => c.name === 'Maps only')).toMatchObject({
      productIds: [product.id],
      customerRef: hedy.id,
    });
    await page.getByRole('cell', { name: `${hedy.id} only` }).waitFor();
    expect(await page.getByRole('cell', { name: 'all, and top-ups' }).count()).toBe(2);
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'coupons');

    // The customer's page shows the discount; a manager removes it and redeems the code again.
    await visit(page, 'Customers', 'Customers');
    await page.getByRole('link', { name: 'Hedy Lamarr' }).click();
    await heading(page, 'Hedy Lamarr');
    const discount = page.getByRole('cell', { name: /^Launch: 20% off, until / });
    await discount.waitFor();
    await page.getByRole('button', { name: 'Remove discount' }).click();
    await discount.waitFor({ state: 'detached' });
    await page.getByLabel(`Coupon for ${plan.id}`).fill('NOPE');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('alert').getByText('No coupon NOPE').waitFor();
    await page.getByLabel(`Coupon for ${plan.id}`).fill('launch20');
    await page.getByRole('button', { name: 'Apply' }).click();
    await discount.waitFor();
    // A cancellation's reason, as the customer gave it, beside the status.
    await post(`/v1/sdk/purchases/${String(activation.purchaseRef)}/cancel`, {
      atPeriodEnd: true,
      cancellationDetails: { feedback: 'switched_service', comment: 'Going in-house' },
    });
    await page.reload();
    await page.getByText('Why: switched service').waitFor();
    expect(await page.locator('q').innerText()).toContain('Going in-house');
    expect(await axeFindings(page)).toEqual([]);
    // The Revenue page says why customers cancelled, with what they wrote.
    await visit(page, 'Revenue', 'Revenue');
    const reasons = page.getByRole('table', {
      name: 'Cancellations asked for, by the reason the customer gave',
    });
    await reasons.getByRole('row', { name: 'Switched to another service 1 100.0%' }).waitFor();
    expect(await page.getByRole('listitem').filter({ hasText: 'Going in-house' }).count()).toBe(1);
    expect(await axeFindings(page)).toEqual([]);
    await visit(page, 'Customers', 'Customers');
    await page.getByRole('link', { name: 'Hedy Lamarr' }).click();
    await heading(page, 'Hedy Lamarr');
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await visit(page, 'Billing', 'Billing');
    await visit(page, 'Coupons', 'Coupons', 'Billing');
    await page.getByRole('cell', { name: '2', exact: true }).waitFor();

    // Another customer types the code on the hosted checkout page, then pays what it shows.
    await post('/v1/sdk/customers', { externalRef: 'ida', email: 'ida@coupons.example' });
    const session = await post('/v1/sdk/checkout-sessions', {
      customerRef: 'ida',
      planRef: plan.id,
      allowPromotionCodes: true,
      billingAddressCollection: 'required',
      taxIdCollection: { enabled: true },
    });
    const buyer = await newPerson(browser);
    await buyer.page.goto(String(session.url));
    await buyer.page.getByText('$15.00 due today').waitFor();
    await buyer.page.getByLabel('Promotion code').fill('NOPE');
    await buyer.page.getByRole('button', { name: 'Apply code' }).click();
    await buyer.page.getByText('No promotion code NOPE').waitFor();
    await buyer.page.getByLabel('Promotion code').fill('launch20');
    await buyer.page.getByRole('button', { name: 'Apply code' }).click();
    await buyer.page.getByText('$12.00 due today').waitFor();
    await buyer.page.getByText('Launch (20% off), on invoices for 3 months').waitFor();
    expect(await axeFindings(buyer.page)).toEqual([]);
    // The session asks for a billing address and takes a tax ID: the page will not send the
    // payment without the address (the API refuses it too: checkout.test.ts).
    await buyer.page.getByLabel('Card number').fill('4242424242424242');
    await buyer.page.getByLabel('Expiry (MM/YY)').fill('12/35');
    await buyer.page.getByLabel('CVC').fill('123');
    await buyer.page.getByRole('button', { name: 'Pay' }).click();
    expect(
      await buyer.page
        .getByLabel('Address line 1')
        .evaluate(
          (input) => (input as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing,
        ),
    ).toBe(true);
    expect(buyer.page.url()).toBe(String(session.url));
    await buyer.page.getByLabel('Address line 1').fill('Unter den Linden 1');
    await buyer.page.getByLabel('City').fill('Berlin');
    await buyer.page.getByLabel('Postal code').fill('10117');
    await buyer.page.getByLabel('Country').selectOption('DE');
    await buyer.page.getByLabel("I'm buying as a business").check();
    await buyer.page.getByLabel('Tax ID kind').selectOption('eu_vat');
    await buyer.page.getByLabel('Tax ID number').fill('nope');
    await buyer.page.getByRole('button', { name: 'Pay' }).click();
    await buyer.page.getByRole('alert').getByText('Tax ID number is not a valid').waitFor();
    await buyer.page.getByLabel('Tax ID number').fill('DE 123 456 789');
    expect(await axeFindings(buyer.page)).toEqual([]);
    await buyer.page.getByLabel('Card number').fill('4242424242424242');
    await buyer.page.getByLabel('Expiry (MM/YY)').fill('12/35');
    await buyer.page.getByLabel('CVC').fill('123');
    await buyer.page.getByRole('button', { name: 'Pay' }).click();
    await buyer.page.waitForURL(/\/complete\?session_id=/);
    const paid = (await (await page.request.get(`${baseUrl}/v1/sdk/invoices?customerRef=ida`)).json()) as {
      data: Array<{ total: number; customerAddress: Record<string, unknown>; customerTaxIds: unknown[] }>;
    };
    expect(paid.data.map((invoice) => invoice.total)).toEqual([1200]);
    // The first invoice names the address and VAT number given on the page.
    expect(paid.data[0]?.customerAddress).toMatchObject({
      line1: 'Unter den Linden 1',
      city: 'Berlin',
      country: 'DE',
    });
    expect(paid.data[0]?.customerTaxIds).toEqual([{ type: 'eu_vat', value: 'DE123456789' }]);
    expect(buyer.errors).toEqual([]);
    await buyer.context.close();
    await page.reload();
    await page.getByRole('cell', { name: '3', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Archive Launch' }).click();
    await page.getByRole('cell', { name: 'archived' }).waitFor();
    expect(owner.errors).toEqual([]);
    await owner.context.close();
  });

  it('customer emails: the kinds chosen, then a receipt listed as sent', async () => {
    const owner = await newPerson(browser);
    const { page } = owner;
    await signUp(page, 'Quay Charts', 'owner@quay.example');
    await visit(page, 'Settings', 'Settings');
    const calls = await visit(page, 'Customer emails', 'Customer emails', 'Settings');
    expect(calls.length).toBeLessThanOrEqual(callBudgetOf('customer-emails'));
    await page.getByText('None yet: mails of the kinds chosen appear here.').waitFor();
    expect(await page.getByRole('checkbox', { name: /Receipts/ }).isChecked()).toBe(false);
    await page.getByRole('checkbox', { name: /Receipts/ }).check();
    await page.getByRole('checkbox', { name: /Failed payments/ }).check();
    await page.getByRole('checkbox', { name: /^Refunds/ }).check();
    await page.getByRole('checkbox', { name: /Expiring cards/ }).check();
    await page.getByRole('button', { name: 'Save customer emails' }).click();
    await page.getByText('Saved: mails of the kinds chosen go out from now on.').waitFor();
    expect(await axeFindings(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);

    // A customer pays; the scheduler's pass mails the receipt, and the page lists it.
    const headers = { 'x-csrf-token': await csrfOf(page, baseUrl), 'content-type': 'application/json' };
    const post = async (path: string, data: unknown) => {
      const answer = await page.request.post(`${baseUrl}${path}`, { headers, data });
      expect(answer.status(), `${path}: ${await answer.text()}`).toBeLessThan(300);
      return (await answer.json()) as Record<string, unknown>;
    };
    const product = await post('/v1/ui/products', { name: 'Charts' });
    const plan = await post(`/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      type: 'recurring',
      price: 900,
    });
    await post('/v1/sdk/customers', { externalRef: 'grace', email: 'grace@quay.example', name: 'Grace' });
    await post('/v1/sdk/customers/grace/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    await post('/v1/sdk/activate', { customerRef: 'grace', planRef: plan.id });
    await harness.controlPlane.care.customerEmails.runDue();
    expect(await mailbox.textFor('grace@quay.example')).toContain('Thank you: we received $9.00');
    await page.reload();
    await page
      .getByRole('cell', { name: '[Sandbox] Quay Charts: receipt for your payment of $9.00' })
      .waitFor();
    await page.getByRole('cell', { name: 'grace@quay.example' }).waitFor();
    expect(await page.getByRole('checkbox', { name: /Receipts/ }).isChecked()).toBe(true);
    expect(await page.getByRole('checkbox', { name: /Upcoming renewals/ }).isChecked()).toBe(false);
    expect(await page.getByRole('checkbox', { name: /^Refunds/ }).isChecked()).toBe(true);
    expect(await page.getByRole('checkbox', { name: /Failed auto top-ups/ }).isChecked()).toBe(false);
    expect(await page.getByRole('checkbox', { name: /Expiring cards/ }).isChecked()).toBe(true);
    expect(await (await page.request.get(`${baseUrl}/v1/sdk/customer-emails`)).json()).toMatchObject({
      refunds: true,
      expiringCards: true,
    });
    expect(await axeFindings(page)).toEqual([]);
    await shoot(page, 'customer-emails');
    expect(owner.errors).toEqual([]);
    await owner.context.close();
  });
});
