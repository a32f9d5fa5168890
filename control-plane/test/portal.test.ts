import { callRecord } from '@mcp-meter/contracts/usage-record';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { creditsProduct } from '../../test/helpers/credit-plans';
import { MovableClock } from '../src/clock';

/**
 * The customer portal (issue 64) on real PostgreSQL, as a browser meets it: a single-use link
 * that signs one customer in, pages that show that customer's figures only, the auto top-up form
 * with its CSRF token, and every bad link, cookie and form answered with a clear page.
 */
const clock = new MovableClock(new Date('2026-07-01T09:00:00.000Z'));
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
});
afterAll(() => harness?.close());

async function seller(name: string) {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  return { api, ...(await creditsProduct(api)) };
}

const get = (url: string, cookie?: string) =>
  harness.controlPlane.app.inject({ method: 'GET', url, headers: cookie === undefined ? {} : { cookie } });
const post = (url: string, form: string, cookie?: string) =>
  harness.controlPlane.app.inject({
    method: 'POST',
    url,
    payload: form,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(cookie === undefined ? {} : { cookie }),
    },
  });

describe('customer portal', () => {
  it('opens once per link, for one customer, and sets the auto top-up with the form', async () => {
    const s = await seller('Portal Co');
    await s.api('POST', '/v1/sdk/customers', { externalRef: 'ada', email: 'ada@example.com' });
    await s.api('POST', '/v1/sdk/customers', { externalRef: 'bob', email: 'bob@example.com' });
    await s.api('POST', '/v1/sdk/customers/ada/credits', { kind: 'grant', amount: 30 });
    expect(
      (await s.api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: s.plan })).body.status,
    ).toBe('activated');
    const link = await s.api('POST', '/v1/sdk/portal-sessions', {
      customerRef: 'ada',
      returnUrl: 'https://portal-co.example/account',
    });
    expect(link.status).toBe(201);
    expect(link.body.url).toMatch(/\/portal\/sessions\/[A-Za-z0-9_-]{43}$/);
    const path = new URL(link.body.url).pathname;

    const opened = await get(path);
    expect(opened.statusCode).toBe(303);
    expect(opened.headers.location).toBe('/portal');
    const setCookie = String(opened.headers['set-cookie']);
    expect(setCookie).toMatch(
      /^mcpm_portal=[A-Za-z0-9_-]+; Path=\/portal; HttpOnly; SameSite=Lax; Max-Age=3600$/,
    );
    const cookie = setCookie.split(';')[0] ?? '';
    // Used once: the same link again is a clear page, naming the merchant, and signs nobody in.
    const again = await get(path);
    expect(again.statusCode).toBe(410);
    expect(again.body).toContain('This link to your Portal Co account has expired or was already used');
    expect(again.headers['set-cookie']).toBeUndefined();

    const page = await get('/portal', cookie);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.body).toContain('Signed in as ada@example.com');
    expect(page.body).toContain('<span class="balance" id="balance">30</span>');
    expect(page.body).toContain('50 credits for $5.00');
    expect(page.body).not.toContain('bob@example.com');
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
    expect(csrf).not.toBe('');

    // The form: saved through the same service as the API, read back by the API.
    const saved = await post(
      '/portal/auto-top-up',
      `csrf=${csrf}&productRef=${s.product}&threshold=10&packs=2`,
      cookie,
    );
    // Redirected after the change, so a reload does not post the form again.
    expect([saved.statusCode, saved.headers.location]).toEqual([303, '/portal?done=saved']);
    expect((await get('/portal?done=saved', cookie)).body).toContain('Auto top-up saved.');
    expect((await get('/portal?done=%3Cscript%3E', cookie)).body).not.toContain('<script>');
    expect((await s.api('GET', '/v1/sdk/customers/ada/auto-top-up')).body).toMatchObject({
      productRef: s.product,
      threshold: 10,
      packs: 2,
      status: 'active',
    });
    // Refused: a stale CSRF token, numbers that are not whole, a field twice; nothing changes.
    const refusals: Array<[string, number, string]> = [
      [`csrf=nope&productRef=${s.product}&threshold=3&packs=1`, 403, 'reload the page'],
      [`csrf=${csrf}&productRef=${s.product}&threshold=-3&packs=1`, 400, 'threshold must be a whole number'],
      [`csrf=${csrf}&productRef=${s.product}&threshold=1e3&packs=1`, 400, 'threshold must be a whole number'],
      [`csrf=${csrf}&productRef=${s.product}&threshold=3&packs=500`, 400, 'packs must be a whole number'],
      [
        `csrf=${csrf}&productRef=${s.product}&threshold=3&threshold=4&packs=1`,
        400,
        'threshold was given twice',
      ],
      [`csrf=${csrf}&productRef=prd_nope&threshold=3&packs=1`, 404, 'No product prd_nope'],
    ];
    for (const [form, status, text] of refusals) {
      const answer = await post('/portal/auto-top-up', form, cookie);
      expect([answer.statusCode, answer.body.includes(text)], form).toEqual([status, true]);
    }
    expect((await s.api('GET', '/v1/sdk/customers/ada/auto-top-up')).body.threshold).toBe(10);
    // Buying credits opens a hosted checkout for the plan's pack; cancelling is for one's own plans.
    const buy = await post('/portal/buy-credits', `csrf=${csrf}&productRef=${s.product}&packs=3`, cookie);
    expect(buy.statusCode).toBe(303);
    const checkoutId = /\/checkout\/(cs_[A-Za-z0-9]+)$/.exec(String(buy.headers.location))?.[1];
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${checkoutId}`)).body).toMatchObject({
      kind: 'topup',
      customerRef: (await s.api('GET', '/v1/sdk/customers/ada')).body.id,
      credits: 150,
      amount: 1500,
      currency: 'usd',
      allowPromotionCodes: false,
    });
    // A product that takes promotion codes in its portal takes them on its packs' checkout too.
    await s.api('PATCH', `/v1/ui/products/${s.product}`, { portalPromotionCodes: true });
    const coded = await post('/portal/buy-credits', `csrf=${csrf}&productRef=${s.product}&packs=1`, cookie);
    const codedId = /\/checkout\/(cs_[A-Za-z0-9]+)$/.exec(String(coded.headers.location))?.[1];
    expect((await s.api('GET', `/v1/sdk/checkout-sessions/${codedId}`)).body).toMatchObject({
      kind: 'topup',
      amount: 500,
      allowPromotionCodes: true,
    });
    await s.api('POST', '/v1/sdk/customers/bob/credits', { kind: 'grant', amount: 5 });
    const bobs = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'bob', planRef: s.plan })).body
      .purchaseRef as string;
    for (const [path, form, status, text] of [
      [
        '/portal/buy-credits',
        `csrf=${csrf}&productRef=prd_nope&packs=1`,
        400,
        'productRef names no plan of yours',
      ],
      [
        '/portal/buy-credits',
        `csrf=${csrf}&productRef=${s.product}&packs=x`,
        400,
        'packs must be a whole number',
      ],
      ['/portal/buy-credits', `csrf=stale&productRef=${s.product}&packs=1`, 403, 'reload the page'],
      ['/portal/cancel', `csrf=${csrf}&purchaseRef=${bobs}`, 404, `No purchase ${bobs}`],
      ['/portal/cancel', `csrf=${csrf}&purchaseRef=pur_nope`, 404, 'No purchase pur_nope'],
    ] as const) {
      const answer = await post(path, form, cookie);
      expect([answer.statusCode, answer.body.includes(text)], form).toEqual([status, true]);
    }
    expect((await s.api('GET', `/v1/sdk/purchases/${bobs}`)).body.cancelAtPeriodEnd).toBe(false);
    // Alerts of the customer's own: added and removed in the portal, as the API then lists them.
    const added = await post('/portal/alerts', `csrf=${csrf}&kind=credit_balance&threshold=20`, cookie);
    expect(added.headers.location).toBe('/portal?done=alert');
    const adas = (await s.api('GET', '/v1/sdk/alerts?customerRef=ada')).body.data;
    expect(adas).toMatchObject([{ kind: 'credit_balance', threshold: 20 }]);
    expect((await get('/portal', cookie)).body).toContain('When my credit balance falls below 20 credits');
    const bobsAlert = (
      await s.api('POST', '/v1/sdk/alerts', { customerRef: 'bob', kind: 'credit_balance', threshold: 5 })
    ).body.id as string;
    for (const [path, form, status, text] of [
      ['/portal/alerts', `csrf=${csrf}&kind=nope&threshold=1`, 400, 'kind names no kind of alert'],
      [
        '/portal/alerts',
        `csrf=${csrf}&kind=allowance_percent&threshold=0`,
        400,
        'a percent of the allowance',
      ],
      [
        '/portal/alerts',
        `csrf=${csrf}&kind=credit_balance&threshold=20`,
        409,
        'The same alert exists already',
      ],
      ['/portal/alerts/remove', `csrf=${csrf}&id=${bobsAlert}`, 404, `No alert ${bobsAlert}`],
    ] as const) {
      const answer = await post(path, form, cookie);
      expect([answer.statusCode, answer.body.includes(text)], form).toEqual([status, true]);
    }
    expect(
      (await post('/portal/alerts/remove', `csrf=${csrf}&id=${adas[0].id}`, cookie)).headers.location,
    ).toBe('/portal?done=unalerted');
    expect((await s.api('GET', '/v1/sdk/alerts?customerRef=ada')).body.data).toEqual([]);
    expect((await s.api('GET', '/v1/sdk/alerts?customerRef=bob')).body.data).toHaveLength(1);
    // Turned off from the portal.
    expect((await post('/portal/auto-top-up', `csrf=${csrf}&off=1`, cookie)).headers.location).toBe(
      '/portal?done=off',
    );
    expect((await get('/portal?done=off', cookie)).body).toContain('Auto top-up is off.');
    expect((await s.api('GET', '/v1/sdk/customers/ada/auto-top-up')).status).toBe(404);

    // Signing out ends the session and returns to the provider.
    const out = await post('/portal/sign-out', `csrf=${csrf}`, cookie);
    expect([out.statusCode, out.headers.location]).toEqual([303, 'https://portal-co.example/account']);
    const after = await get('/portal', cookie);
    expect(after.statusCode).toBe(401);
    expect(after.body).toContain('You are not signed in');
  });

  it('shows usage priced by the period as the upcoming invoice answers it, to the cent', async () => {
    const { sandboxKey, provider } = await harness.controlPlane.providers.create({
      displayName: 'Metered Co',
    });
    const api = injectClient(harness.controlPlane, sandboxKey);
    const product = (await api('POST', '/v1/ui/products', { name: 'Geocoder' })).body.id as string;
    const plan = (
      await api('POST', `/v1/ui/products/${product}/plans`, {
        name: 'Metered',
        type: 'usage-based',
        billingModel: 'post-paid',
        billingCycle: 'monthly',
        price: 3,
        currency: 'usd',
        freeUnits: 2,
      })
    ).body.id as string;
    const id = (await api('POST', '/v1/sdk/customers', { externalRef: 'gus' })).body.id as string;
    await api('POST', '/v1/sdk/customers/gus/payment-methods', {
      card: { number: '4242424242424242', expMonth: 12, expYear: 2035, cvc: '123' },
    });
    const activated = await api('POST', '/v1/sdk/activate', { customerRef: 'gus', planRef: plan });
    expect(activated.body.status).toBe('activated');
    const meter = {
      providerId: provider.id,
      environment: 'sandbox' as const,
      meterRef: (await api('GET', '/v1/ui/meters/requests')).body.id as string,
      meterName: 'requests',
    };
    await harness.store.store.insert(
      Array.from({ length: 9 }, () =>
        callRecord(meter, id, clock.now().toISOString(), {
          outcome: 'success',
          admitted: true,
          productId: product,
        }),
      ),
    );
    const upcoming = (await api('GET', `/v1/sdk/invoices/upcoming?purchaseRef=${activated.body.purchaseRef}`))
      .body;
    expect(upcoming).toMatchObject({ usage: { units: 9, freeUnits: 2, billableUnits: 7 }, total: 21 });
    const link = (await api('POST', '/v1/sdk/portal-sessions', { customerRef: 'gus' })).body.url as string;
    const cookie = String((await get(new URL(link).pathname)).headers['set-cookie']).split(';')[0] ?? '';
    expect((await get('/portal', cookie)).body).toContain(
      'Usage so far this period (Geocoder, Metered): $0.21 for 7 billable calls, on your next invoice',
    );
  });

  it('refuses another provider’s customer, bad return URLs, and links past their 15 minutes', async () => {
    const s = await seller('Strict Co');
    const other = await seller('Other Co');
    await other.api('POST', '/v1/sdk/customers', { externalRef: 'eve' });
    expect((await s.api('POST', '/v1/sdk/portal-sessions', { customerRef: 'eve' })).body.code).toBe(
      'customer_not_found',
    );
    await s.api('POST', '/v1/sdk/customers', { externalRef: 'cyd' });
    for (const returnUrl of [
      'javascript:alert(1)',
      'ftp://x.example/',
      'not a url',
      `https://x.example/${'a'.repeat(2100)}`,
    ])
      expect(
        (await s.api('POST', '/v1/sdk/portal-sessions', { customerRef: 'cyd', returnUrl })).body.code,
      ).toBe('validation_failed');
    const link = await s.api('POST', '/v1/sdk/portal-sessions', { customerRef: 'cyd' });
    clock.advance(15 * 60_000 + 1);
    const late = await get(new URL(link.body.url).pathname);
    expect(late.statusCode).toBe(410);
    expect(late.body).toContain('Strict Co');
    // The spent link's page offers the sign-in of this provider's accounts, which refuses
    // unknown providers and wrong credentials with a page of its own.
    const signInLink = /href="(\/portal\/sign-in\/[^"]+)"/.exec(late.body)?.[1] ?? '';
    expect(signInLink).toMatch(/^\/portal\/sign-in\/prv_[A-Za-z0-9]+\?environment=sandbox$/);
    expect((await get(signInLink)).body).toContain('Sign in to your Strict Co account');
    expect((await get('/portal/sign-in/prv_nope?environment=sandbox')).statusCode).toBe(404);
    const signInPage = await get(signInLink);
    const signInCookie = String(signInPage.headers['set-cookie']).split(';')[0] ?? '';
    const signInCsrf = /name="csrf" value="([^"]+)"/.exec(signInPage.body)?.[1] ?? '';
    const wrong = await post(
      signInLink,
      `csrf=${signInCsrf}&email=cyd%40example.com&password=nope-nope-nope`,
      signInCookie,
    );
    expect([wrong.statusCode, wrong.body.includes('The email or password is not right')]).toEqual([
      401,
      true,
    ]);
    expect(wrong.headers['set-cookie']).toBeUndefined();
    // A link that never was, and a cookie that is not a session.
    expect((await get('/portal/sessions/nope')).statusCode).toBe(410);
    expect((await get('/portal', 'mcpm_portal=forged')).statusCode).toBe(401);
    expect(
      (await post('/portal/auto-top-up', 'csrf=x&threshold=1&packs=1', 'mcpm_portal=forged')).statusCode,
    ).toBe(401);
  });

  it('signs a browser out after 15 minutes alone, and after its hour however busy', async () => {
    const s = await seller('Idle Co');
    await s.api('POST', '/v1/sdk/customers', { externalRef: 'ida' });
    const open = async () => {
      const link = (await s.api('POST', '/v1/sdk/portal-sessions', { customerRef: 'ida' })).body
        .url as string;
      return String((await get(new URL(link).pathname)).headers['set-cookie']).split(';')[0] ?? '';
    };
    const idle = await open();
    clock.advance(14 * 60_000);
    expect((await get('/portal', idle)).statusCode).toBe(200);
    // Seen at 14 minutes: 28 minutes after opening, 14 since, it is still signed in.
    clock.advance(14 * 60_000);
    expect((await get('/portal', idle)).statusCode).toBe(200);
    clock.advance(15 * 60_000 + 1);
    expect((await get('/portal', idle)).statusCode).toBe(401);

    const busy = await open();
    for (let minute = 10; minute < 60; minute += 10) {
      clock.advance(10 * 60_000);
      expect((await get('/portal', busy)).statusCode, `${minute} minutes`).toBe(200);
    }
    clock.advance(10 * 60_000);
    expect((await get('/portal', busy)).statusCode).toBe(401);
  });
});
