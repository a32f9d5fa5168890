import { freePort } from '@mcp-meter/contracts/kit';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { credentials, signInTarget } from '../../test/helpers/sign-in-target';

/**
 * Without SMTP_URL, and with MAIL_TO_LOG off (its default whenever DATABASE_URL is set), a sign-in
 * code is never written to a log: the sign-up is told the code could not be sent, and the log
 * names the missing setting. (`npm start` on embedded defaults turns MAIL_TO_LOG on, with a
 * warning line: docs/configuration.md.)
 */
let harness: TestControlPlane;
let base: string;
const logged: string[] = [];

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    publicUrl: base,
    logger: pino({ level: 'debug' }, { write: (line: string) => void logged.push(line) }),
  });
  await harness.controlPlane.app.listen({ port, host: '127.0.0.1' });
});

afterAll(async () => {
  await harness?.close();
});

describe('sign-in codes and the log', () => {
  it('without SMTP_URL and MAIL_TO_LOG, a sign-up is told the code could not be sent, and no log holds it', async () => {
    const target = await signInTarget(harness, base);
    const email = `quiet-${Date.now()}@example.com`;
    const answer = await credentials(base, 'signups', target, email, 'correct horse battery');
    expect(answer.status).toBe(503);
    expect(await answer.json()).toMatchObject({ code: 'mail_unavailable' });
    const log = logged.join('\n');
    expect(log).toContain('SMTP_URL is unset');
    expect(log).not.toContain(email);
    expect(log).not.toMatch(/\d{6} is your/);
    expect(log).not.toMatch(/"text":/);
  });
});
