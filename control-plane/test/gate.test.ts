import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startMailbox } from '../../test/helpers/mailbox';
import { credentials, post, signInTarget } from '../../test/helpers/sign-in-target';
import { MovableClock } from '../src/clock';

/**
 * What the control plane refuses before it judges (issue 57): sign-in attempts are counted before
 * a password or code is checked, so many at once cannot get past the limits; bodies nested too
 * deep are refused with a code (test/mail-log.test.ts: codes and the log). On the run's real
 * PostgreSQL, driven over loopback.
 */

let harness: TestControlPlane;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
let base: string;
const clock = new MovableClock();
let api: Awaited<ReturnType<typeof signInTarget>>['api'];

let target: Awaited<ReturnType<typeof signInTarget>>;

const statuses = (responses: Response[]) => {
  const counted: Record<number, number> = {};
  for (const r of responses) counted[r.status] = (counted[r.status] ?? 0) + 1;
  return counted;
};

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  mailbox = await startMailbox();
  harness = await startTestControlPlane({
    bodyLimitBytes: 4 * 1024 * 1024,
    clock,
    publicUrl: base,
    smtpUrl: mailbox.url,
  });
  await harness.controlPlane.app.listen({ port, host: '127.0.0.1' });
  target = await signInTarget(harness, base);
  api = target.api;
});

afterAll(async () => {
  await harness?.close();
  await mailbox?.close();
});

describe('sign-in throttles reserve an attempt before they verify it', () => {
  it('evaluates 5 of 25 wrong passwords sent at once for one account, then 30 of 60 from one address', async () => {
    const email = `victim-${Date.now()}@example.com`;
    const burst = await Promise.all(
      Array.from({ length: 25 }, () => credentials(base, 'logins', target, email, 'wrong password 1')),
    );
    expect(statuses(burst)).toEqual({ 401: 5, 429: 20 });
    const { rows } = await harness.pool.query<{ failures: number }>(
      'SELECT failures FROM sign_in_failures WHERE key LIKE $1',
      [`account:%:${email}`],
    );
    expect(rows).toEqual([{ failures: 5 }]);
    const retry = burst.find((r) => r.status === 429);
    expect(Number(retry?.headers.get('retry-after'))).toBeGreaterThan(0);

    // A new window; 60 at once from one address, each for another account: 30 are judged.
    clock.advance(16 * 60_000);
    const spread = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        credentials(base, 'logins', target, `spray-${i}-${Date.now()}@example.com`, 'wrong password 2'),
      ),
    );
    expect(statuses(spread)).toEqual({ 401: 30, 429: 30 });
    clock.advance(16 * 60_000);
  });

  it('mails 5 codes of 25 sign-ups sent at once for one email, and judges 30 of 60 codes sent at once', async () => {
    const email = `inbox-${Date.now()}@example.com`;
    const starts = await Promise.all(
      Array.from({ length: 25 }, () => credentials(base, 'signups', target, email, 'correct horse battery')),
    );
    expect(statuses(starts)).toEqual({ 202: 5, 429: 20 });
    expect(mailbox.countFor(email)).toBe(5);

    // Twelve sign-ups of other emails, then 60 wrong codes at once across them (5 tries each).
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const started = await credentials(
        base,
        'signups',
        target,
        `code-${i}-${Date.now()}@example.com`,
        'pw-123456',
      );
      expect(started.status).toBe(202);
      ids.push(((await started.json()) as { verificationId: string }).verificationId);
    }
    const guesses = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        post(base, `/v1/customer/auth/signups/${ids[i % 12]}/verify`, { code: '000000' }),
      ),
    );
    // 30 judged by the address's limit (a wrong code is 400; a lucky guess of 000000 would be 200).
    const judged = guesses.filter((r) => r.status !== 429);
    expect(judged).toHaveLength(30);
    expect(guesses.filter((r) => r.status === 429)).toHaveLength(30);
    clock.advance(16 * 60_000);
  });

  it('clears an account with the right password and gives the address its attempt back', async () => {
    const email = `owner-${Date.now()}@example.com`;
    const mailed = mailbox.countFor(email);
    const started = await credentials(base, 'signups', target, email, 'the right password');
    const { verificationId } = (await started.json()) as { verificationId: string };
    const code = await mailbox.codeFor(email, mailed);
    expect((await post(base, `/v1/customer/auth/signups/${verificationId}/verify`, { code })).status).toBe(
      200,
    );
    for (let i = 0; i < 4; i++)
      expect((await credentials(base, 'logins', target, email, 'wrong')).status).toBe(401);
    expect((await credentials(base, 'logins', target, email, 'the right password')).status).toBe(200);
    // Cleared: four more wrong ones are judged, not refused.
    for (let i = 0; i < 4; i++)
      expect((await credentials(base, 'logins', target, email, 'wrong')).status).toBe(401);
    const { rows } = await harness.pool.query<{ key: string; failures: number }>(
      "SELECT key, failures FROM sign_in_failures WHERE key LIKE 'address:%'",
    );
    // The address holds the eight wrong ones of this window, not the right one or the sign-up.
    expect(rows.map((r) => r.failures)).toEqual([8]);
  });
});

describe('bodies nested too deep', () => {
  it('answers 400 too_deep for JSON deeper than 64 levels, on any route, and takes 64', async () => {
    const deep = (levels: number) => `{"name":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    const send = (body: string) =>
      fetch(`${base}/v1/ui/products`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${target.key}` },
        body,
      });
    for (const levels of [65, 100_000]) {
      const refused = await send(deep(levels));
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ code: 'too_deep', limit: 64 });
    }
    // 64 levels are read, then validated as usual (an array is not a name).
    const taken = await send(deep(64));
    expect(taken.status).toBe(400);
    expect(await taken.json()).toMatchObject({ code: 'validation_failed' });
    // Unauthenticated routes too: the customer sign-in's JSON endpoints.
    const signIn = await fetch(`${base}/v1/customer/auth/logins`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: deep(100_000),
    });
    expect(signIn.status).toBe(400);
    expect(await signIn.json()).toMatchObject({ code: 'too_deep' });
    expect((await api('GET', '/v1/ui/products')).status).toBe(200);
  });
});
