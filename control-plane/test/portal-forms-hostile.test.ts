import { describe, expect, it } from 'vitest';
import { portalSuite } from '../../test/helpers/portal-shop';

/**
 * The customer portal's forms, sent hostile (docs/portal.md): a signed-in customer's browser can
 * post anything. Every form is sent with each of its fields replaced in turn by text with a NUL,
 * control characters, an emoji, 100 kB, numbers out of any range, markup and nothing, the others
 * left sane; and with a field given twice. Each answer is a page (a redirect, or the form again
 * with a 4xx), never a 5xx, and markup sent is never echoed as markup.
 */
const { get, harnessOf, post, shop } = portalSuite(new Date('2026-03-01T00:00:00.000Z'), { mail: true });

const HOSTILE = [
  '',
  ' ',
  'a\u0000b',
  '\u0001\u001f\u007f',
  '\r\nSet-Cookie: x=1',
  'Zoë 😀',
  'x'.repeat(100_000),
  '-1',
  '1e309',
  '99999999999999999999999',
  '0x10',
  '<script>alert(1)</script>',
];

describe('hostile portal forms', () => {
  it('answers every form, with any field hostile, with a page: never a 5xx', async () => {
    const s = await shop('Hostile Forms Co');
    await s.customer('ada');
    const held = (await s.api('POST', '/v1/sdk/activate', { customerRef: 'ada', planRef: s.pro })).body
      .purchaseRef as string;
    const { cookie, csrf } = await s.signIn('ada');
    /** Each form, with sane values for its fields. */
    const forms: Record<string, Record<string, string>> = {
      '/portal/change': { purchaseRef: held, planRef: s.basic, prorationDate: '', code: '' },
      '/portal/retention': { purchaseRef: held },
      '/portal/cards/default': { id: 'pm_nothing' },
      '/portal/cards/remove': { id: 'pm_nothing' },
      '/portal/auto-top-up': { productRef: s.product, threshold: '100', packs: '1' },
      '/portal/buy-credits': { productRef: s.product, packs: '1' },
      '/portal/invoices/pay': { id: 'inv_nothing' },
      '/portal/alerts': { kind: 'spend_amount', threshold: '25.50' },
      '/portal/alerts/remove': { id: 'alt_nothing' },
      '/portal/details': { name: 'Ada', telephone: '+1 555 0100' },
      '/portal/address': {
        line1: '1 Main St',
        line2: '',
        city: 'Paris',
        state: '',
        postalCode: '75001',
        country: 'FR',
      },
      '/portal/tax-ids': { type: 'eu_vat', value: 'FR12345678901' },
      '/portal/tax-ids/remove': { type: 'eu_vat', value: 'FR12345678901' },
      '/portal/email': { email: 'ada@new.example' },
      '/portal/email/confirm': { codeId: 'nothing', code: '123456' },
      // Last: they end the plan the forms above act on.
      '/portal/cancel': { purchaseRef: held, feedback: 'too_expensive', comment: 'Too dear' },
      '/portal/cancel-now': { purchaseRef: held, prorationDate: '', feedback: 'other', comment: '' },
    };
    const failures: string[] = [];
    let sent = 0;
    const send = async (path: string, form: Record<string, string>, what: string) => {
      const answer = await post(path, { csrf, ...form }, cookie);
      sent++;
      if (answer.statusCode >= 500) failures.push(`${path} ${what}: ${answer.statusCode}`);
      if (answer.body.includes('<script>alert(1)</script>')) failures.push(`${path} ${what}: markup echoed`);
    };
    for (const [path, sane] of Object.entries(forms)) {
      for (const field of Object.keys(sane))
        for (const value of HOSTILE)
          await send(path, { ...sane, [field]: value }, `${field}=${JSON.stringify(value).slice(0, 24)}`);
      // An unknown field, and the form with no fields but the token.
      await send(path, { ...sane, extra: 'x'.repeat(1000) }, 'extra field');
      await send(path, {}, 'no fields');
      // A field given twice: URLSearchParams keeps both.
      const twice = new URLSearchParams({ csrf, ...sane });
      const first = Object.keys(sane)[0] ?? 'x';
      twice.append(first, 'again');
      const answer = await harnessOf().controlPlane.app.inject({
        method: 'POST',
        url: path,
        payload: twice.toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      });
      sent++;
      if (answer.statusCode >= 500) failures.push(`${path} ${first} twice: ${answer.statusCode}`);
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(400);
    // Still signed in and served.
    expect((await get('/portal', cookie)).statusCode).toBe(200);
  }, 600_000);
});
