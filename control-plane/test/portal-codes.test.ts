import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startMailbox } from '../../test/helpers/mailbox';
import { MovableClock } from '../src/clock';

/**
 * Signing in to the portal by a mailed code alone (issue 64), on real PostgreSQL and SMTP: a
 * customer the provider created with an email (no password anywhere) asks for a code, gets it by
 * mail and is signed in once; an unknown address sees the same page and gets no mail; wrong codes
 * count down, a used or expired code is refused, mail to one inbox is throttled, and one code
 * entered five times at once signs in once.
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

const inject = (method: 'GET' | 'POST', url: string, form?: Record<string, string>, cookie?: string) =>
  harness.controlPlane.app.inject({
    method,
    url,
    ...(form === undefined ? {} : { payload: new URLSearchParams(form).toString() }),
    headers: {
      ...(form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
      ...(cookie === undefined ? {} : { cookie }),
    },
    remoteAddress: '127.0.0.9',
  });
const field = (html: string, name: string) =>
  new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? '';

async function shop(name: string) {
  const { sandboxKey, provider } = await harness.controlPlane.providers.create({ displayName: name });
  const api = injectClient(harness.controlPlane, sandboxKey);
  const base = `/portal/sign-in/${provider.id}`;
  // The browser's sign-in CSRF cookie and the token its forms carry, from the sign-in page.
  const page = await inject('GET', `${base}?environment=sandbox`);
  const cookie = String(page.headers['set-cookie']).split(';')[0] ?? '';
  const csrf = field(page.body, 'csrf');
  const ask = (email: string) => inject('POST', `${base}/code?environment=sandbox`, { email, csrf }, cookie);
  const verify = (codeId: string, code: string) =>
    inject('POST', `${base}/verify?environment=sandbox`, { codeId, code, email: 'x', csrf }, cookie);
  return { api, provider, base, ask, verify, cookie, csrf };
}

describe('signing in to the portal by a mailed code', () => {
  it('signs a customer without a password in once, and tells an unknown address nothing', async () => {
    const s = await shop('Code Co');
    await s.api('POST', '/v1/sdk/customers', { externalRef: 'ada', email: 'ada@code.example' });
    const form = await inject('GET', `${s.base}?environment=sandbox`, undefined, s.cookie);
    expect(form.body).toContain('Email me a code');
    // The browser keeps its token: the page does not set another.
    expect(form.headers['set-cookie']).toBeUndefined();
    expect(field(form.body, 'csrf')).toBe(s.csrf);
    expect(form.body).toContain(`action="${s.base}/code?environment=sandbox"`);

    const asked = await s.ask('ADA@Code.example ');
    expect(asked.statusCode).toBe(200);
    expect(asked.body).toContain(
      'If ada@code.example has an account with Code Co, we have mailed it a six-digit code.',
    );
    const codeId = field(asked.body, 'codeId');
    expect(codeId).toMatch(/^ptc_/);
    const code = await mailbox.codeFor('ada@code.example');

    const wrong = await s.verify(codeId, code === '000000' ? '111111' : '000000');
    expect([wrong.statusCode, wrong.body.includes('That code is not right; 4 tries left')]).toEqual([
      400,
      true,
    ]);
    const right = await s.verify(codeId, code);
    expect([right.statusCode, right.headers.location]).toEqual([303, '/portal']);
    const cookie = String(right.headers['set-cookie']).split(';')[0] ?? '';
    expect((await inject('GET', '/portal', undefined, cookie)).body).toContain(
      'Signed in as ada@code.example',
    );
    // Once.
    const again = await s.verify(codeId, code);
    expect([again.statusCode, again.body.includes('expired or was used up')]).toEqual([400, true]);

    // An address with no customer: the same page, no mail, and no code signs anyone in.
    const unknown = await s.ask('nobody@code.example');
    expect(unknown.statusCode).toBe(200);
    expect(unknown.body).toContain('If nobody@code.example has an account with Code Co');
    const unknownId = field(unknown.body, 'codeId');
    expect(unknownId).toMatch(/^ptc_/);
    expect(mailbox.countFor('nobody@code.example')).toBe(0);
    for (const guess of ['123456', '000000'])
      expect((await s.verify(unknownId, guess)).headers['set-cookie']).toBeUndefined();

    // A code of this provider is unknown to another; not an email is 400.
    const other = await shop('Other Co');
    expect((await other.verify(codeId, code)).statusCode).toBe(404);
    expect((await s.ask('not-an-email')).statusCode).toBe(400);

    // A form posted without the browser's own CSRF token (another site's) signs nobody in, mails nothing.
    const sent = mailbox.countFor('ada@code.example');
    for (const [form, cookie] of [
      [{ email: 'ada@code.example' }, s.cookie],
      [{ email: 'ada@code.example', csrf: s.csrf }, undefined],
      [{ email: 'ada@code.example', csrf: 'forged' }, s.cookie],
    ] as const) {
      const forged = await inject('POST', `${s.base}/code?environment=sandbox`, { ...form }, cookie);
      expect([forged.statusCode, forged.body.includes('The form is out of date')]).toEqual([403, true]);
    }
    const forgedPassword = await inject(
      'POST',
      `${s.base}?environment=sandbox`,
      { email: 'ada@code.example', password: 'whatever-it-is' },
      s.cookie,
    );
    expect(forgedPassword.statusCode).toBe(403);
    expect(mailbox.countFor('ada@code.example')).toBe(sent);
  });

  it('closes a code after five wrong tries or ten minutes, throttles mail, and signs in once under a race', async () => {
    const s = await shop('Strict Code Co');
    await s.api('POST', '/v1/sdk/customers', { externalRef: 'bo', email: 'bo@code.example' });
    const first = field((await s.ask('bo@code.example')).body, 'codeId');
    const code = await mailbox.codeFor('bo@code.example');
    const wrongCode = code === '000000' ? '111111' : '000000';
    for (let i = 0; i < 5; i++) expect((await s.verify(first, wrongCode)).statusCode).toBe(400);
    const closed = await s.verify(first, code);
    expect([closed.statusCode, closed.body.includes('expired or was used up')]).toEqual([400, true]);

    const second = field((await s.ask('bo@code.example')).body, 'codeId');
    const secondCode = await mailbox.codeFor('bo@code.example', 1);
    clock.advance(10 * 60_000 + 1);
    expect((await s.verify(second, secondCode)).statusCode).toBe(400);

    const third = field((await s.ask('bo@code.example')).body, 'codeId');
    const thirdCode = await mailbox.codeFor('bo@code.example', 2);
    const answers = await Promise.all(Array.from({ length: 5 }, () => s.verify(third, thirdCode)));
    expect(answers.filter((a) => a.statusCode === 303)).toHaveLength(1);
    const { rowCount } = await harness.pool.query(
      `SELECT 1 FROM portal_sessions WHERE customer_id = (SELECT id FROM customers WHERE email = 'bo@code.example')`,
    );
    expect(rowCount).toBe(1);

    // Five codes to one inbox in fifteen minutes; the sixth waits.
    await s.ask('bo@code.example');
    await s.ask('bo@code.example');
    const throttled = await s.ask('bo@code.example');
    expect(throttled.statusCode).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    expect(mailbox.countFor('bo@code.example')).toBe(5);
  });
});
