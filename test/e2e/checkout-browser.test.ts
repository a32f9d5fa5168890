import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { TAX_ID_TYPES, taxIdLabel } from '@mcp-meter/contracts/billing-details';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderCheckout } from '../../control-plane/src/modules/checkout/page';
import { launchChromium } from '../helpers/browser';
import { axeFindings, newPerson } from '../helpers/console-browser';
import { startListeningControlPlane, type TestControlPlane } from '../helpers/control-plane';
import { root } from '../helpers/processes';

/**
 * A customer pays on the hosted checkout page in a real browser (Debian chromium driven by
 * playwright-core), the purchase becomes active and the customer lands on the provider's
 * return URL. Everything runs on 127.0.0.1.
 */

describe('hosted checkout in a browser', () => {
  let harness: TestControlPlane;
  let baseUrl: string;
  let returnServer: Server;
  let returnUrl: string;
  let browser: Browser;

  beforeAll(async () => {
    ({ harness, url: baseUrl } = await startListeningControlPlane({ bodyLimitBytes: 1024 * 1024 }));
    returnServer = createServer((req, res) => {
      res.writeHead(200, { 'content-type': req.url?.startsWith('/logo') ? 'image/svg+xml' : 'text/html' });
      res.end(
        req.url?.startsWith('/logo')
          ? '<svg xmlns="http://www.w3.org/2000/svg" width="80" height="20"/>'
          : '<h1>Thanks from the shop</h1>',
      );
    });
    await new Promise<void>((resolve) => returnServer.listen(0, '127.0.0.1', resolve));
    const address = returnServer.address();
    returnUrl = `http://127.0.0.1:${address !== null && typeof address === 'object' ? address.port : 0}`;
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    returnServer?.close();
    await harness?.close();
  });

  it('shows the merchant and plan, takes a sandbox card, activates the purchase and returns to the shop', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({
      displayName: 'Acme Tools',
    });
    const api = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${sandboxKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return (await response.json()) as Record<string, string>;
    };
    await api('PATCH', '/v1/sdk/merchant', {
      logoUrl: `${returnUrl}/logo.svg`,
      termsUrl: 'https://acme.example/terms',
      privacyUrl: 'https://acme.example/privacy',
    });
    const product = await api('POST', '/v1/ui/products', { name: 'Weather API' });
    const plan = await api('POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Pro',
      type: 'recurring',
      price: 900,
      setupFee: 100,
    });
    const customer = await api('POST', '/v1/sdk/customers', {
      externalRef: 'browser-buyer',
      email: 'buyer@example.com',
    });
    const session = await api('POST', '/v1/sdk/checkout-sessions', {
      customerRef: customer.reference,
      planRef: plan.reference,
      successUrl: `${returnUrl}/thanks`,
    });

    const page = await browser.newPage();
    await page.goto(session.url ?? '');
    const text = await page.locator('main').innerText();
    for (const expected of [
      'Acme Tools',
      'Weather API · Pro',
      '$9.00 per month',
      'One-time setup fee $1.00',
      '$10.00 due today',
      'Terms',
      'Privacy',
    ]) {
      expect(text).toContain(expected);
    }
    expect(await page.locator('a', { hasText: 'Terms' }).getAttribute('href')).toBe(
      'https://acme.example/terms',
    );
    await page.fill('#number', '4242 4242 4242 4242');
    await page.fill('#exp', '12/35');
    await page.fill('#cvc', '123');
    mkdirSync(join(root, 'data', 'screenshots'), { recursive: true });
    await page.screenshot({ path: join(root, 'data', 'screenshots', 'checkout.png') });
    await page.click('#submit');
    await page.waitForURL(`${returnUrl}/thanks?session_id=${session.id}`, { timeout: 15_000 });
    expect(await page.locator('h1').innerText()).toBe('Thanks from the shop');

    const purchases = (await api(
      'GET',
      `/v1/sdk/purchases?customerRef=${customer.reference}`,
    )) as unknown as { data: Record<string, string>[] };
    expect(purchases.data).toHaveLength(1);
    expect(purchases.data[0]).toMatchObject({ status: 'active', planRef: plan.reference });
    expect((await api('GET', `/v1/sdk/checkout-sessions/${session.id}`)).status).toBe('used');
    const { rows } = await harness.pool.query<{ type: string }>(
      'SELECT type FROM outbox_events WHERE provider_id = $1 ORDER BY created_at, id',
      [provider.id],
    );
    const types = rows.map((r) => r.type);
    for (const type of [
      'checkout_session.created',
      'purchase.created',
      'payment.succeeded',
      'purchase.activated',
      'checkout_session.completed',
    ]) {
      expect(types).toContain(type);
    }
    expect(types.indexOf('checkout_session.completed')).toBeGreaterThan(types.indexOf('purchase.activated'));
  });

  it("renders a live session's own page, which comes before Stripe's for a promotion code, accessibly", async () => {
    // The page as a live session that takes codes renders it (the way on is served by
    // control-plane/test/stripe.test.ts against stripe-mock); here its markup and script in Chromium.
    const person = await newPerson(browser);
    const view: Parameters<typeof renderCheckout>[0] = {
      sessionId: 'cs_live',
      merchant: {
        displayName: 'Acme Tools',
        logoUrl: null,
        brandColor: '#0a7',
        termsUrl: null,
        privacyUrl: null,
        supportEmail: 'help@acme.example',
      },
      title: 'Weather API · Pro',
      lines: ['$20.00 per month', 'Launch (25% off), on the first invoice'],
      dueNow: '$15.00 due today',
      action: 'Pay',
      cancelUrl: 'https://acme.example/cancel',
      sandbox: false,
      promotion: { applied: true },
      billing: null,
      continueUrl: '/checkout/cs_live/card',
    };
    await person.page.setContent(renderCheckout(view));
    const onward = person.page.getByRole('link', { name: 'Continue to payment' });
    expect(await onward.getAttribute('href')).toBe('/checkout/cs_live/card');
    expect(await person.page.locator('#number').count()).toBe(0);
    await person.page.getByRole('button', { name: 'Remove the promotion code' }).waitFor();
    expect(await axeFindings(person.page)).toEqual([]);
    expect(person.errors).toEqual([]);

    await person.context.close();

    // A sandbox page whose session requires a tax ID of a customer who has none: shown, required.
    const buyer = await newPerson(browser);
    await buyer.page.setContent(
      renderCheckout({
        ...view,
        continueUrl: null,
        promotion: null,
        billing: { address: false, taxId: 'required' },
      }),
    );
    expect(await buyer.page.locator('#business').count()).toBe(0);
    expect(await buyer.page.getByLabel('Tax ID number').isVisible()).toBe(true);
    expect(await buyer.page.getByLabel('Tax ID number').getAttribute('required')).toBe('');
    expect(await axeFindings(buyer.page)).toEqual([]);
    expect(buyer.errors).toEqual([]);
    await buyer.context.close();

    // With the address asked too, the country chosen decides, as Stripe's if_supported does: a
    // business in Germany gives its VAT ID, one in Mexico (no kind taken) may tick the box.
    const traveller = await newPerson(browser);
    await traveller.page.setContent(
      renderCheckout({
        ...view,
        continueUrl: null,
        promotion: null,
        billing: { address: null, taxId: 'required' },
      }),
    );
    const number = traveller.page.getByLabel('Tax ID number');
    const box = traveller.page.getByLabel("I'm buying as a business");
    expect([await number.isVisible(), await box.isVisible()]).toEqual([false, true]);
    const kind = traveller.page.getByLabel('Tax ID kind');
    const kindsOffered = () =>
      traveller.page.locator('#tax-id-type option:not([disabled])').allTextContents();
    const everyKind = await kindsOffered();
    expect(everyKind).toEqual(TAX_ID_TYPES.map(taxIdLabel));
    await traveller.page.getByLabel('Country').selectOption('DE');
    expect([await number.isVisible(), await box.isVisible()]).toEqual([true, false]);
    // Germany's kind, and only it, offered and picked.
    expect([await kindsOffered(), await kind.inputValue()]).toEqual([['EU VAT'], 'eu_vat']);
    await traveller.page.getByLabel('Country').selectOption('CA');
    expect((await kindsOffered()).length).toBe(2);
    expect(await kind.inputValue()).toBe('ca_bn');
    await kind.selectOption('ca_gst_hst');
    await traveller.page.getByLabel('Country').selectOption('DE');
    expect(await number.getAttribute('required')).toBe('');
    expect(await traveller.page.getByText('A business in this country gives its tax ID.').isVisible()).toBe(
      true,
    );
    expect(await axeFindings(traveller.page)).toEqual([]);
    await traveller.page.getByLabel('Country').selectOption('MX');
    expect([await number.isVisible(), await box.isVisible()]).toEqual([false, true]);
    // No kind taken for Mexico: every kind offered again.
    expect(await kindsOffered()).toEqual(everyKind);
    expect(await number.getAttribute('required')).toBeNull();
    await box.check();
    expect(await number.isVisible()).toBe(true);
    expect(await axeFindings(traveller.page)).toEqual([]);
    expect(traveller.errors).toEqual([]);
    await traveller.context.close();
  });
});
