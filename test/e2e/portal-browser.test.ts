import { internalToken } from '@mcp-meter/contracts/snapshots';
import { callRecord } from '@mcp-meter/contracts/usage-record';
import type { Browser } from 'playwright-core';
import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneLink } from '../../proxy/src/control-link';
import { launchChromium } from '../helpers/browser';
import { axeFindings, newPerson, shoot } from '../helpers/console-browser';
import {
  injectClient,
  startListeningControlPlane,
  TEST_SECRET_KEY,
  type TestControlPlane,
} from '../helpers/control-plane';
import { creditsProduct } from '../helpers/credit-plans';
import { startMailbox } from '../helpers/mailbox';
import { credentials, post, signInTarget } from '../helpers/sign-in-target';

/**
 * The customer portal in Chromium (issue 64): a customer opens the link their provider made,
 * sees the balance the API answers, sets an auto top-up in the form, and after calls' worth of
 * credits are drawn across the threshold sees the one top-up it made; the page passes axe. The
 * link, used once, then shows its expired page.
 */
describe('customer portal in a browser', () => {
  let harness: TestControlPlane;
  let baseUrl: string;
  let browser: Browser;
  let mailbox: Awaited<ReturnType<typeof startMailbox>>;

  beforeAll(async () => {
    mailbox = await startMailbox();
    ({ harness, url: baseUrl } = await startListeningControlPlane({
      bodyLimitBytes: 1024 * 1024,
      smtpUrl: mailbox.url,
    }));
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await harness?.close();
    await mailbox?.close();
  });

  it('shows the balance, sets an auto top-up, and shows the top-up it made', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({
      displayName: 'Acme Search',
    });
    const api = injectClient(harness.controlPlane, sandboxKey);
    await api('PATCH', '/v1/sdk/merchant', { brandColor: '#1d4ed8', supportEmail: 'help@acme.example' });
    const { product, plan } = await creditsProduct(api, { product: 'Search API', plan: 'Pay as you go' });
    const ada = (await api('POST', '/v1/sdk/customers', { externalRef: 'ada', email: 'ada@example.com' }))
      .body.id as string;
    expect(
      (
        await api('POST', '/v1/sdk/customers/ada/payment-methods', {
          card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
        })
      ).status,
    ).toBe(201);
    await api('POST', '/v1/sdk/customers/ada/credits', {
      kind: 'grant',
      amount: 30,
      reason: 'Welcome credits',
    });
    expect((await api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: plan })).body.status).toBe(
      'activated',
    );
    const link = (
      await api('POST', '/v1/sdk/portal-sessions', { customerRef: 'ada', returnUrl: `${baseUrl}/healthz` })
    ).body.url as string;
    expect(link.startsWith(`${baseUrl}/portal/sessions/`)).toBe(true);

    const { page, errors } = await newPerson(browser);
    await page.goto(link);
    await page.getByRole('heading', { level: 1, name: 'Acme Search' }).waitFor();
    expect(page.url()).toBe(`${baseUrl}/portal`);
    const balance = (await api('GET', '/v1/sdk/customers/ada/balance')).body.credits as number;
    expect(balance).toBe(30);
    expect(await page.locator('#balance').innerText()).toBe(String(balance));
    expect(await page.getByRole('row', { name: /Search API Pay as you go active/ }).count()).toBe(1);
    expect(await axeFindings(page)).toEqual([]);

    await page.getByLabel('When my balance falls below (credits)').fill('10');
    await page.getByLabel('Packs to buy each time').fill('2');
    await page.getByRole('button', { name: 'Save auto top-up' }).click();
    await page.getByRole('status').waitFor();
    expect(await page.getByRole('status').innerText()).toBe('Auto top-up saved.');
    expect((await api('GET', '/v1/sdk/customers/ada/auto-top-up')).body).toMatchObject({
      productRef: product,
      threshold: 10,
      packs: 2,
    });

    // Calls' worth of credits drawn across the threshold: one top-up of 2 packs (100 credits).
    await api('POST', '/v1/sdk/customers/ada/credits', { kind: 'debit', amount: 25 });
    await harness.controlPlane.scheduler.runDue();
    await page.reload();
    expect(await page.locator('#balance').innerText()).toBe('105');
    expect((await api('GET', '/v1/sdk/customers/ada/balance')).body.credits).toBe(105);
    expect(await page.getByRole('row', { name: /auto_top_up \+100 105/ }).count()).toBe(1);
    expect(await axeFindings(page)).toEqual([]);
    await shoot(page, 'portal');

    // Credits bought from the portal: the hosted checkout, then back to the portal.
    await page.getByLabel('Packs', { exact: true }).fill('1');
    await page.getByRole('button', { name: 'Buy credits' }).click();
    await page.waitForURL(/\/checkout\/cs_/);
    await page.fill('#number', '4242 4242 4242 4242');
    await page.fill('#exp', '12/35');
    await page.fill('#cvc', '123');
    await page.click('#submit');
    await page.waitForURL(/\/portal\?done=bought/, { timeout: 15_000 });
    expect(await page.getByRole('status').innerText()).toBe('Thank you: your credits are bought.');
    expect(await page.locator('#balance').innerText()).toBe('155');
    expect((await api('GET', '/v1/sdk/customers/ada/balance')).body.credits).toBe(155);

    // A monthly plan of another product, cancelled from the portal at the end of its period.
    const monthly = (await api('POST', '/v1/ui/products', { name: 'Alerts' })).body.id as string;
    const pro = (
      await api('POST', `/v1/ui/products/${monthly}/plans`, {
        name: 'Alerts Pro',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 900,
        currency: 'usd',
        limit: 100,
      })
    ).body.id as string;
    const bought = await api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: pro });
    expect(bought.body.status).toBe('activated');
    // Three calls of the period: the allowance column says what the limit check would.
    const meter = {
      providerId: provider.id,
      environment: 'sandbox' as const,
      meterRef: (await api('GET', '/v1/ui/meters/requests')).body.id as string,
      meterName: 'requests',
    };
    await harness.store.store.insert(
      Array.from({ length: 3 }, () =>
        callRecord(meter, ada, new Date().toISOString(), {
          outcome: 'success',
          admitted: true,
          productId: monthly,
        }),
      ),
    );
    const check = await api('POST', '/v1/sdk/limits', {
      customerRef: 'ada',
      productRef: monthly,
      consume: false,
    });
    expect(check.body).toMatchObject({ used: 3, limit: 100, remaining: 97 });
    await page.goto(`${baseUrl}/portal`);
    expect(
      await page
        .getByRole('row', { name: /Alerts Alerts Pro active .* 3 of 100 calls used, 97 left/ })
        .count(),
    ).toBe(1);
    // Cancelled on its page, saying why (Stripe's choices) in the one form both buttons send.
    // The product's retention offer comes first on the cancel page; this customer declines it.
    const stay = (await api('POST', '/v1/sdk/coupons', { name: 'Stay', percentOff: 20, duration: 'once' }))
      .body;
    await api('PATCH', `/v1/ui/products/${monthly}`, { retentionCoupon: stay.id });
    await page.getByRole('link', { name: 'Cancel: Alerts, Alerts Pro' }).click();
    await page.getByRole('heading', { name: 'Before you go' }).waitFor();
    expect(await page.locator('#retention').innerText()).toContain('Stay (20% off), on the first invoice');
    await page.getByLabel('Why are you cancelling? (optional)').selectOption('unused');
    await page.getByLabel('Anything you would like to tell us? (optional)').fill('Back next season');
    expect(await axeFindings(page)).toEqual([]);
    await page.getByRole('button', { name: 'Cancel at period end' }).click();
    await page.waitForURL(/\/portal\?done=cancelled/);
    expect(await page.getByRole('status').innerText()).toBe('Your plan will end at the end of its period.');
    expect((await api('GET', `/v1/sdk/purchases/${bought.body.purchaseRef}`)).body).toMatchObject({
      status: 'active',
      cancelAtPeriodEnd: true,
      cancellationDetails: {
        reason: 'cancellation_requested',
        feedback: 'unused',
        comment: 'Back next season',
      },
    });
    expect(await page.getByRole('row', { name: /Alerts Pro active \(cancels at period end\)/ }).count()).toBe(
      1,
    );
    // An alert of the customer's own, added in the form.
    await page.getByLabel('Mail me').selectOption('credit_balance');
    await page.getByLabel('Threshold').fill('20');
    await page.getByRole('button', { name: 'Add alert' }).click();
    await page.waitForURL(/\/portal\?done=alert/);
    expect((await api('GET', '/v1/sdk/alerts?customerRef=ada')).body.data).toMatchObject([
      { kind: 'credit_balance', threshold: 20 },
    ]);
    expect(await page.getByText('When my credit balance falls below 20 credits').count()).toBe(1);
    expect(await axeFindings(page)).toEqual([]);
    expect(errors).toEqual([]);

    // The link worked once.
    await page.goto(link);
    expect(await page.locator('#gone').innerText()).toContain('has expired or was already used');
  });

  it('pays a refused renewal with Pay now once the card works', async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Owed Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    const product = (await api('POST', '/v1/ui/products', { name: 'Forecasts' })).body.id as string;
    const plan = (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Monthly',
        type: 'recurring',
        price: 900,
        billingCycle: 'monthly',
      })
    ).body.id as string;
    // On a test clock, June: the card pays the first month, then fails from the renewal on.
    const clock = (await api('POST', '/v1/sdk/test-clocks', { frozenTime: '2026-06-01T00:00:00Z' })).body;
    await api('POST', '/v1/sdk/customers', {
      externalRef: 'bo',
      email: 'bo@example.com',
      testClock: clock.id,
    });
    const card = (number: string) =>
      api('POST', '/v1/sdk/customers/bo/payment-methods', {
        card: { number, expMonth: 12, expYear: 2035, cvc: '123' },
      });
    expect((await card('4242424242424242')).status).toBe(201);
    expect((await api('POST', '/v1/sdk/activate', { customerRef: 'bo', planRef: plan })).body.status).toBe(
      'activated',
    );
    expect((await card('4000000000000341')).status).toBe(201);
    const advanced = await api('POST', `/v1/sdk/test-clocks/${clock.id}/advance`, {
      frozenTime: '2026-07-01T00:02:00Z',
    });
    expect(advanced.status).toBe(200);
    const open = (await api('GET', '/v1/sdk/invoices?customerRef=bo&status=open')).body.data[0] as {
      id: string;
    };
    expect(open).toBeDefined();

    const link = (await api('POST', '/v1/sdk/portal-sessions', { customerRef: 'bo' })).body.url as string;
    const { page, errors } = await newPerson(browser);
    await page.goto(link);
    const payNow = page.getByRole('button', { name: `Pay now: invoice ${open.id}, with your default card` });
    await payNow.waitFor();
    expect(await axeFindings(page)).toEqual([]);
    // Still the refusing card: the portal says why, and the invoice is still open.
    await payNow.click();
    expect(await page.getByText(/Not done: The card was declined/).count()).toBe(1);
    expect(await axeFindings(page)).toEqual([]);
    expect((await api('GET', `/v1/sdk/invoices/${open.id}`)).body.status).toBe('open');
    // A card that works, and Pay now pays it.
    expect((await card('4242424242424242')).status).toBe(201);
    await page.goto(`${baseUrl}/portal`);
    await payNow.click();
    await page.getByRole('status').waitFor();
    expect(await page.getByRole('status').innerText()).toBe('Thank you: the invoice is paid.');
    expect(await payNow.count()).toBe(0);
    expect(await axeFindings(page)).toEqual([]);
    expect((await api('GET', `/v1/sdk/invoices/${open.id}`)).body.status).toBe('paid');
    expect(errors).toEqual([]);
  });

  it('keeps the customer’s details, and a new email address once its mailed code comes back', async () => {
    const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Details Co' });
    const api = injectClient(harness.controlPlane, sandboxKey);
    await api('POST', '/v1/sdk/customers', { externalRef: 'cy', email: 'cy@old.example', name: 'Cy' });
    const link = (await api('POST', '/v1/sdk/portal-sessions', { customerRef: 'cy' })).body.url as string;
    const { page, errors } = await newPerson(browser);
    await page.goto(link);
    await page.getByLabel('Name').fill('Cyrus Smith');
    await page.getByLabel('Telephone').fill('+1 555 0100');
    await page.getByRole('button', { name: 'Save details' }).click();
    await page.waitForURL(/\/portal\?done=details/);
    expect(await page.getByRole('status').innerText()).toBe('Your details are saved.');
    expect((await api('GET', '/v1/sdk/customers/cy')).body).toMatchObject({
      name: 'Cyrus Smith',
      telephone: '+1 555 0100',
    });
    expect(await axeFindings(page)).toEqual([]);

    // The billing address and a tax ID, which invoices name the customer by.
    await page.getByLabel('Address line 1').fill('5 Harbour St');
    await page.getByLabel('City').fill('Auckland');
    await page.getByLabel('Postal code').fill('1010');
    await page.getByLabel('Country').selectOption({ label: 'New Zealand' });
    await page.getByRole('button', { name: 'Save address' }).click();
    await page.waitForURL(/\/portal\?done=address/);
    // The address's country picks its kind of tax ID.
    expect(await page.getByLabel('Kind').inputValue()).toBe('nz_gst');
    await page.getByLabel('Number', { exact: true }).fill('123-456-789');
    await page.getByRole('button', { name: 'Add tax ID' }).click();
    await page.waitForURL(/\/portal\?done=taxId/);
    expect(await page.locator('#tax-ids').innerText()).toContain('NZ GST 123456789');
    expect((await api('GET', '/v1/sdk/customers/cy')).body).toMatchObject({
      address: { line1: '5 Harbour St', city: 'Auckland', postalCode: '1010', country: 'NZ' },
      taxIds: [{ type: 'nz_gst', value: '123456789' }],
    });
    expect(await axeFindings(page)).toEqual([]);

    await page.getByLabel('New email address').fill('cy@new.example');
    await page.getByRole('button', { name: 'Email a code to the new address' }).click();
    await page.waitForURL(/\/portal\/email\?code=ptc_/);
    expect(await page.locator('#code-sent').innerText()).toContain('a six-digit code to cy@new.example');
    expect(await axeFindings(page)).toEqual([]);
    await page.getByLabel('Code').fill(await mailbox.codeFor('cy@new.example'));
    await page.getByRole('button', { name: 'Use this address' }).click();
    await page.waitForURL(/\/portal\?done=email/);
    expect(await page.locator('#email').innerText()).toBe('cy@new.example');
    expect((await api('GET', '/v1/sdk/customers/cy')).body.email).toBe('cy@new.example');
    expect(await mailbox.textFor('cy@old.example')).toContain('is now cy@new.example');
    expect(await axeFindings(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('signs a customer in with the account MCP sign-in made, from the page of a spent link', async () => {
    // The account, made as an MCP client's sign-up makes it: the form, the mailed code.
    const target = await signInTarget(harness, baseUrl);
    const started = await credentials(
      baseUrl,
      'signups',
      target,
      'zed@example.com',
      'a long enough password',
    );
    expect(started.status).toBe(202);
    const { verificationId } = (await started.json()) as { verificationId: string };
    const verified = await post(baseUrl, `/v1/customer/auth/signups/${verificationId}/verify`, {
      code: await mailbox.codeFor('zed@example.com'),
    });
    expect(verified.status).toBe(200);
    const customer = (await target.api('GET', '/v1/sdk/customers?email=zed@example.com')).body.data[0] as {
      id: string;
    };
    const link = (await target.api('POST', '/v1/sdk/portal-sessions', { customerRef: customer.id })).body
      .url as string;
    expect((await fetch(link, { redirect: 'manual' })).status).toBe(303); // used once, elsewhere

    // The paywall offers this customer the portal's sign-in beside the checkout: what the control
    // plane answers the proxy's own link (a customer without an account is offered none).
    const products = (await target.api('GET', '/v1/ui/products')).body.data as Array<{ id: string }>;
    const proxyLink = new ControlPlaneLink(baseUrl, internalToken(TEST_SECRET_KEY), new Agent());
    const ask = {
      providerId: target.providerId,
      environment: 'sandbox' as const,
      reason: 'no_plan' as const,
    };
    expect(
      (await proxyLink.paywall({ ...ask, customerId: customer.id, productId: products[0]?.id ?? '' }))
        ?.portalUrl,
    ).toBe(`${baseUrl}/portal/sign-in/${target.providerId}?environment=sandbox`);
    const apiOnly = (await target.api('POST', '/v1/sdk/customers', {})).body.id as string;
    expect(
      (await proxyLink.paywall({ ...ask, customerId: apiOnly, productId: products[0]?.id ?? '' }))?.portalUrl,
    ).toBeNull();

    const { page, errors } = await newPerson(browser);
    await page.goto(link);
    await page.getByRole('link', { name: 'Sign in with your account instead' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in to your Gate Co account' }).waitFor();
    expect(await axeFindings(page)).toEqual([]);
    // A wrong password is said so, on the page, with the email kept.
    await page.getByLabel('Email', { exact: true }).fill('zed@example.com');
    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.getByRole('alert').innerText()).toBe('The email or password is not right');
    expect(await page.getByLabel('Email', { exact: true }).inputValue()).toBe('zed@example.com');
    await page.getByLabel('Password').fill('a long enough password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${baseUrl}/portal`);
    expect(await page.getByText('Signed in as zed@example.com').count()).toBe(1);
    expect(errors).toEqual([]);
  });
});
