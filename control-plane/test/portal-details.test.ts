import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startMailbox } from '../../test/helpers/mailbox';
import { MovableClock } from '../src/clock';

/**
 * A customer keeping their own details in the portal, on real PostgreSQL and SMTP: name and
 * telephone saved (and announced as `customer.updated`), bad values refused with the page and
 * nothing changed; a new email address only once the code mailed to it comes back, the old
 * address told, the portal then signing in with the new one; a confirming code that signs nobody
 * in, is the asking customer's alone, works once under a race, and mail to strangers throttled.
 */
const clock = new MovableClock(new Date('2026-05-01T09:00:00.000Z'));
let harness: TestControlPlane;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
beforeAll(async () => {
  mailbox = await startMailbox();
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock, smtpUrl: mailbox.url });
});
afterAll(async () => {
  await harness?.close();
  await mailbox?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = Record<string, any>;

const inject = (method: 'GET' | 'POST', url: string, form?: Record<string, string>, cookie?: string) =>
  harness.controlPlane.app.inject({
    method,
    url,
    ...(form === undefined ? {} : { payload: new URLSearchParams(form).toString() }),
    headers: {
      ...(form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
      ...(cookie === undefined ? {} : { cookie }),
    },
    remoteAddress: '127.0.0.7',
  });
const field = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? '';

async function shop(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const customer = async (ref: string, email: string) =>
    expect((await api('POST', '/v1/sdk/customers', { externalRef: ref, email, name: 'Ada' })).status).toBe(
      201,
    );
  const signIn = async (ref: string) => {
    const link = (await api('POST', '/v1/sdk/portal-sessions', { customerRef: ref })).body.url as string;
    const opened = await inject('GET', new URL(link).pathname);
    const cookie = String(opened.headers['set-cookie']).split(';')[0] ?? '';
    const csrf = field((await inject('GET', '/portal', undefined, cookie)).body, 'csrf');
    return { cookie, csrf };
  };
  return { api, provider, customer, signIn };
}

describe('a customer’s own details in the portal', () => {
  it('saves name and telephone, refuses what the API would, and announces the change', async () => {
    const s = await shop('Details Co');
    await s.customer('ada', 'ada@details.example');
    const { cookie, csrf } = await s.signIn('ada');
    const portal = (await inject('GET', '/portal', undefined, cookie)).body;
    expect(portal).toContain('<h2>Your details</h2>');
    expect(portal).toContain('name="name" autocomplete="name" maxlength="200" value="Ada"');
    expect(portal).toContain('<strong id="email">ada@details.example</strong>');

    const saved = await inject(
      'POST',
      '/portal/details',
      { csrf, name: '  Ada <Lovelace> 🧮 ', telephone: '+44 7700 900123' },
      cookie,
    );
    expect([saved.statusCode, saved.headers.location]).toEqual([303, '/portal?done=details']);
    const shown = (await inject('GET', '/portal?done=details', undefined, cookie)).body;
    expect(shown).toContain('Your details are saved.');
    expect(shown).toContain('value="Ada &lt;Lovelace&gt; 🧮"');
    expect((await s.api('GET', '/v1/sdk/customers/ada')).body).toMatchObject({
      name: 'Ada <Lovelace> 🧮',
      telephone: '+44 7700 900123',
      email: 'ada@details.example',
    });
    const [updated] = (await s.api('GET', '/v1/events?type=customer.updated')).body.data as Json[];
    expect(updated?.data.previous_attributes).toMatchObject({ name: 'Ada', telephone: null });

    // Refused with the page and why, nothing changed: a bad telephone, a name too long, a field
    // twice, a forged form.
    for (const [form, status, why] of [
      [{ csrf, name: 'Ada', telephone: 'call me' }, 400, 'telephone is not a telephone number'],
      [{ csrf, name: 'x'.repeat(201), telephone: '' }, 400, 'name must be at most 200 characters'],
      [{ csrf: 'forged', name: 'Eve', telephone: '' }, 403, 'The form is out of date'],
      [{ csrf, name: 'Eve\u0000', telephone: '' }, 400, 'must not contain the NUL character'],
    ] as const) {
      const refused = await inject('POST', '/portal/details', { ...form }, cookie);
      expect([refused.statusCode, refused.body.includes(why)]).toEqual([status, true]);
    }
    const twice = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/portal/details',
      payload: `csrf=${csrf}&name=Eve&name=Mallory`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    });
    expect([twice.statusCode, twice.body.includes('name was given twice')]).toEqual([400, true]);
    expect((await inject('POST', '/portal/details', { csrf, name: 'Eve' })).statusCode).toBe(401);
    expect((await s.api('GET', '/v1/sdk/customers/ada')).body.name).toBe('Ada <Lovelace> 🧮');

    // Empty clears.
    await inject('POST', '/portal/details', { csrf, name: '', telephone: ' ' }, cookie);
    expect((await s.api('GET', '/v1/sdk/customers/ada')).body).toMatchObject({ name: null, telephone: null });
  });

  it('keeps a billing address and tax IDs that invoices name the customer by', async () => {
    const s = await shop('Invoice Co');
    await s.customer('lin', 'lin@invoice.example');
    const { cookie, csrf } = await s.signIn('lin');
    const portal = (await inject('GET', '/portal', undefined, cookie)).body;
    expect(portal).toContain('<h3>Billing address</h3>');
    expect(portal).toContain('<option value="GB">United Kingdom</option>');
    expect(portal).toContain('<p>No tax ID.</p>');

    const address = { line1: ' 1 Rue <Haute> ', line2: '', city: 'Lyon', state: '', postalCode: '69001' };
    const saved = await inject('POST', '/portal/address', { csrf, ...address, country: 'FR' }, cookie);
    expect([saved.statusCode, saved.headers.location]).toEqual([303, '/portal?done=address']);
    expect((await s.api('GET', '/v1/sdk/customers/lin')).body.address).toEqual({
      line1: '1 Rue <Haute>',
      line2: null,
      city: 'Lyon',
      state: null,
      postalCode: '69001',
      country: 'FR',
    });
    const shown = (await inject('GET', '/portal?done=address', undefined, cookie)).body;
    expect(shown).toContain('Your billing address is saved.');
    expect(shown).toContain('value="1 Rue &lt;Haute&gt;"');
    expect(shown).toContain('<option value="FR" selected>France</option>');

    const added = await inject(
      'POST',
      '/portal/tax-ids',
      { csrf, type: 'eu_vat', value: 'fr 12 345678901' },
      cookie,
    );
    expect([added.statusCode, added.headers.location]).toEqual([303, '/portal?done=taxId']);
    expect((await s.api('GET', '/v1/sdk/customers/lin')).body.taxIds).toEqual([
      { type: 'eu_vat', value: 'FR12345678901', verification: null },
    ]);
    expect((await inject('GET', '/portal', undefined, cookie)).body).toContain('EU VAT FR12345678901');

    // Refused with the page and why, nothing changed.
    for (const [url, form, why] of [
      [
        '/portal/address',
        { csrf, line1: 'a\tb', country: 'FR' },
        'address/line1 is too long or holds a line break',
      ],
      ['/portal/address', { csrf, line1: 'x', country: 'XX' }, 'address/country'],
      ['/portal/address', { csrf, line1: 'x', country: 'France' }, 'address/country is not a country'],
      ['/portal/tax-ids', { csrf, type: 'eu_vat', value: 'FR1' }, 'is not a valid EU VAT number'],
      ['/portal/tax-ids', { csrf, type: 'eu_vat', value: 'FR 12345678901' }, 'is already in the list'],
      ['/portal/tax-ids', { csrf, type: 'vat', value: '123' }, 'taxIds/type is not a kind of tax ID'],
      ['/portal/tax-ids', { csrf, type: 'eu_vat', value: '' }, 'taxIds/value is not a tax ID'],
    ] as const) {
      const refused = await inject('POST', url, { ...form }, cookie);
      expect([refused.statusCode, refused.body.includes(why)], why).toEqual([400, true]);
    }
    expect(
      (
        await inject(
          'POST',
          '/portal/tax-ids',
          { csrf: 'forged', type: 'us_ein', value: '123456789' },
          cookie,
        )
      ).statusCode,
    ).toBe(403);
    expect((await inject('POST', '/portal/address', { csrf, line1: 'Elsewhere' })).statusCode).toBe(401);
    expect((await s.api('GET', '/v1/sdk/customers/lin')).body).toMatchObject({
      address: { line1: '1 Rue <Haute>', country: 'FR' },
      taxIds: [{ type: 'eu_vat', value: 'FR12345678901' }],
    });

    // Removed by the button; every part empty clears the address.
    const removed = await inject(
      'POST',
      '/portal/tax-ids/remove',
      { csrf, type: 'eu_vat', value: 'FR12345678901' },
      cookie,
    );
    expect(removed.headers.location).toBe('/portal?done=untaxed');
    await inject('POST', '/portal/address', { csrf, line1: ' ', country: '' }, cookie);
    expect((await s.api('GET', '/v1/sdk/customers/lin')).body).toMatchObject({ address: null, taxIds: [] });

    // Five added at once (two tabs, a double click): each is made from the row as it stands under
    // its lock, so all five stand; a sixth is refused whole.
    const einOf = (i: number) => `12-345678${i}`;
    const adds = await Promise.all(
      [1, 2, 3, 4, 5].map((i) =>
        inject('POST', '/portal/tax-ids', { csrf, type: 'us_ein', value: einOf(i) }, cookie),
      ),
    );
    expect(adds.map((a) => a.statusCode)).toEqual([303, 303, 303, 303, 303]);
    const held = (await s.api('GET', '/v1/sdk/customers/lin')).body.taxIds as Array<{ value: string }>;
    expect(held.map((t) => t.value).sort()).toEqual([1, 2, 3, 4, 5].map((i) => einOf(i).replace('-', '')));
    const sixth = await inject('POST', '/portal/tax-ids', { csrf, type: 'us_ein', value: einOf(6) }, cookie);
    expect([sixth.statusCode, sixth.body.includes('holds at most 5 tax IDs')]).toEqual([400, true]);
    // Two removals of different ones at once: both go.
    await Promise.all(
      [1, 2].map((i) =>
        inject(
          'POST',
          '/portal/tax-ids/remove',
          { csrf, type: 'us_ein', value: einOf(i).replace('-', '') },
          cookie,
        ),
      ),
    );
    expect(((await s.api('GET', '/v1/sdk/customers/lin')).body.taxIds as unknown[]).length).toBe(3);
  });

  it('changes the email address only with the code mailed to it, and tells the old one', async () => {
    const s = await shop('Address Co');
    await s.customer('grace', 'grace@old.example');
    await s.customer('linus', 'linus@address.example');
    const { cookie, csrf } = await s.signIn('grace');

    const asked = await inject('POST', '/portal/email', { csrf, email: ' Grace@New.example ' }, cookie);
    expect(asked.statusCode).toBe(303);
    const codePage = String(asked.headers.location);
    expect(codePage).toMatch(/^\/portal\/email\?code=ptc_/);
    const codeId = decodeURIComponent(codePage.split('code=')[1] ?? '');
    const page = await inject('GET', codePage, undefined, cookie);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('We have mailed a six-digit code to grace@new.example.');
    const mail = await mailbox.textFor('grace@new.example');
    expect(mail).toContain('is your code to confirm this address with Address Co');
    const code = await mailbox.codeFor('grace@new.example');
    // Nothing changes until the code comes back.
    expect((await s.api('GET', '/v1/sdk/customers/grace')).body.email).toBe('grace@old.example');

    // The code is for this: it signs nobody in at the portal's sign-in.
    const signInBase = `/portal/sign-in/${s.provider.id}`;
    const signInPage = await inject('GET', `${signInBase}?environment=sandbox`);
    const signInCookie = String(signInPage.headers['set-cookie']).split(';')[0] ?? '';
    const asSignIn = await inject(
      'POST',
      `${signInBase}/verify?environment=sandbox`,
      { codeId, code, email: 'grace@new.example', csrf: field(signInPage.body, 'csrf') },
      signInCookie,
    );
    expect([asSignIn.statusCode, asSignIn.headers['set-cookie']]).toEqual([404, undefined]);
    // And it is Grace's alone: Linus, signed in, cannot see or use it.
    const linus = await s.signIn('linus');
    expect((await inject('GET', codePage, undefined, linus.cookie)).statusCode).toBe(404);
    const stolen = await inject(
      'POST',
      '/portal/email/confirm',
      { csrf: linus.csrf, codeId, code },
      linus.cookie,
    );
    expect(stolen.statusCode).toBe(404);
    expect((await s.api('GET', '/v1/sdk/customers/linus')).body.email).toBe('linus@address.example');

    // A wrong code: its page again, with the tries left.
    const wrong = await inject(
      'POST',
      '/portal/email/confirm',
      { csrf, codeId, code: code === '000000' ? '111111' : '000000' },
      cookie,
    );
    expect([wrong.statusCode, wrong.body.includes('That code is not right; 4 tries left')]).toEqual([
      400,
      true,
    ]);
    expect(wrong.body).toContain('We have mailed a six-digit code to grace@new.example.');

    // The right one, sent five times at once: the address changes once, and the old one is told once.
    const answers = await Promise.all(
      Array.from({ length: 5 }, () =>
        inject('POST', '/portal/email/confirm', { csrf, codeId, code }, cookie),
      ),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([303, 400, 400, 400, 400]);
    expect(answers.find((a) => a.statusCode === 303)?.headers.location).toBe('/portal?done=email');
    expect((await s.api('GET', '/v1/sdk/customers/grace')).body.email).toBe('grace@new.example');
    const events = (await s.api('GET', '/v1/events?type=customer.updated')).body.data as Json[];
    expect(events.map((e) => e.data.previous_attributes.email)).toEqual(['grace@old.example']);
    const notice = await mailbox.textFor('grace@old.example');
    expect(notice).toContain("Subject: Your Address Co account's email address was changed");
    expect(notice).toContain('The email address of your Address Co account is now grace@new.example');
    expect(mailbox.countFor('grace@old.example')).toBe(1);
    expect((await inject('GET', '/portal?done=email', undefined, cookie)).body).toContain(
      '<strong id="email">grace@new.example</strong>',
    );

    // The portal's sign-in now mails codes to the new address, and none to the old.
    const ask = (email: string) =>
      inject(
        'POST',
        `${signInBase}/code?environment=sandbox`,
        { email, csrf: field(signInPage.body, 'csrf') },
        signInCookie,
      );
    await ask('grace@new.example');
    await ask('grace@old.example');
    expect(mailbox.countFor('grace@new.example')).toBe(2);
    expect(mailbox.countFor('grace@old.example')).toBe(1);

    // Refused: not an address, the address already theirs, a forged form; nothing mailed.
    for (const [form, status, why] of [
      [{ csrf, email: 'not-an-address' }, 400, 'email is not an email address'],
      [{ csrf, email: 'GRACE@new.example' }, 400, 'email is already your address'],
      [{ csrf: 'forged', email: 'eve@else.example' }, 403, 'The form is out of date'],
    ] as const) {
      const refused = await inject('POST', '/portal/email', { ...form }, cookie);
      expect([refused.statusCode, refused.body.includes(why)]).toEqual([status, true]);
    }
    expect(mailbox.countFor('eve@else.example')).toBe(0);

    // A customer mails codes to at most five new addresses in fifteen minutes: the first, and four.
    for (let i = 1; i <= 4; i++)
      expect(
        (await inject('POST', '/portal/email', { csrf, email: `g${i}@spam.example` }, cookie)).statusCode,
      ).toBe(303);
    const sixth = await inject('POST', '/portal/email', { csrf, email: 'g6@spam.example' }, cookie);
    expect([sixth.statusCode, Number(sixth.headers['retry-after']) > 0]).toEqual([429, true]);
    expect(mailbox.countFor('g6@spam.example')).toBe(0);
    clock.advance(16 * 60_000);
    // (Signed in again: the portal signs a browser out after its idle time.)
    const later = await s.signIn('grace');
    expect(
      (await inject('POST', '/portal/email', { csrf: later.csrf, email: 'g6@spam.example' }, later.cookie))
        .statusCode,
    ).toBe(303);
    // A code expires after ten minutes.
    const late = await inject(
      'POST',
      '/portal/email',
      { csrf: later.csrf, email: 'g7@spam.example' },
      later.cookie,
    );
    const lateId = decodeURIComponent(String(late.headers.location).split('code=')[1] ?? '');
    const lateCode = await mailbox.codeFor('g7@spam.example');
    clock.advance(10 * 60_000 + 1);
    const expired = await inject(
      'POST',
      '/portal/email/confirm',
      { csrf: later.csrf, codeId: lateId, code: lateCode },
      later.cookie,
    );
    expect([expired.statusCode, expired.body.includes('expired or was used up')]).toEqual([400, true]);
    expect((await s.api('GET', '/v1/sdk/customers/grace')).body.email).toBe('grace@new.example');
  });
});
