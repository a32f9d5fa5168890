import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import type { Role } from '../src/modules/team/repository';
import { SESSION_IDLE_MS, SESSION_LIFETIME_MS, TeamService } from '../src/modules/team/service';

/**
 * Console members and their sessions (issue 62) on real PostgreSQL: sign-in by email and
 * password, a cookie that calls the API as a key would, within the member's role and with CSRF
 * proof for changes, idle and absolute expiry, signing out here and everywhere, and the sign-in
 * throttle under concurrent guessing.
 */
const clock = new MovableClock(new Date('2026-06-01T09:00:00.000Z'));
let harness: TestControlPlane;
let team: TeamService;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
  team = new TeamService(harness.pool, clock);
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = any;

let emails = 0;
/** A provider with a member of `role`; its credentials. */
async function member(role: Role, providerId?: string) {
  const provider =
    providerId ?? (await harness.controlPlane.providers.create({ displayName: `P${role}` })).provider.id;
  const email = `m${++emails}-${role}@example.com`;
  const added = await team.addMember({
    providerId: provider,
    email,
    role,
    password: 'a long enough password',
  });
  return { providerId: provider, email, password: 'a long enough password', userId: added.userId };
}

async function call(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  options: { cookie?: string; csrf?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Json; headers: Record<string, unknown> }> {
  const answer = await harness.controlPlane.app.inject({
    method,
    url,
    headers: {
      ...(options.cookie === undefined ? {} : { cookie: options.cookie }),
      ...(options.csrf === undefined ? {} : { 'x-csrf-token': options.csrf }),
      ...options.headers,
    },
    ...(options.body === undefined ? {} : { payload: options.body as object }),
  });
  return {
    status: answer.statusCode,
    body: answer.body === '' ? undefined : answer.json(),
    headers: answer.headers,
  };
}

async function signIn(who: { email: string; password: string; providerId?: string }, remote = '10.0.0.1') {
  const answer = await harness.controlPlane.app.inject({
    method: 'POST',
    url: '/v1/console/sessions',
    remoteAddress: remote,
    payload: {
      email: who.email,
      password: who.password,
      ...(who.providerId ? { providerId: who.providerId } : {}),
    },
  });
  const setCookie = String(answer.headers['set-cookie'] ?? '');
  return {
    status: answer.statusCode,
    body: answer.json() as Json,
    setCookie,
    cookie: setCookie.split(';')[0] ?? '',
    headers: answer.headers,
  };
}

describe('console sessions', () => {
  it('signs a member in with a cookie that is HttpOnly, SameSite=Strict and as long-lived as the session', async () => {
    const owner = await member('owner');
    const session = await signIn({ email: owner.email.toUpperCase(), password: owner.password });
    expect(session.status).toBe(201);
    expect(session.body).toMatchObject({
      id: expect.stringMatching(/^ses_/),
      user: { email: owner.email },
      provider: { id: owner.providerId, liveEnabled: true },
      role: 'owner',
      csrfToken: expect.any(String),
      expiresAt: new Date(clock.now().getTime() + SESSION_LIFETIME_MS).toISOString(),
      idleExpiresAt: new Date(clock.now().getTime() + SESSION_IDLE_MS).toISOString(),
    });
    expect(session.setCookie).toMatch(
      /^mcpm_console=[\w-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    expect(session.headers['cache-control']).toBe('no-store');
    // Nothing of the secret is stored as sent.
    const secret = session.cookie.split('=')[1] ?? '';
    const { rows } = await harness.pool.query(
      'SELECT count(*)::int AS n FROM console_sessions WHERE token_hash = $1',
      [secret],
    );
    expect(rows[0].n).toBe(0);
    expect((await call('GET', '/v1/console/session', { cookie: session.cookie })).body.id).toBe(
      session.body.id,
    );
  });

  it('refuses wrong credentials alike for a known and an unknown email', async () => {
    const owner = await member('owner');
    const wrong = await signIn({ email: owner.email, password: 'not it at all' }, '10.0.1.1');
    const unknown = await signIn({ email: 'nobody@example.com', password: 'not it at all' }, '10.0.1.1');
    for (const answer of [wrong, unknown]) {
      expect(answer.status).toBe(401);
      expect(answer.body).toMatchObject({
        code: 'invalid_credentials',
        detail: 'The email or password is not right',
      });
      expect(answer.setCookie).toBe('');
    }
    const bad = await call('POST', '/v1/console/sessions', {
      body: { email: 'not an email', password: 'x' },
    });
    expect([bad.status, bad.body.code]).toEqual([400, 'validation_failed']);
  });

  it('calls the API with the cookie as a key would: reads freely, changes with the CSRF token, in the environment asked', async () => {
    const owner = await member('owner');
    const { cookie, body: session } = await signIn(owner);
    expect((await call('GET', '/v1/ui/products', { cookie })).status).toBe(200);
    const noCsrf = await call('POST', '/v1/ui/products', { cookie, body: { name: 'Weather' } });
    expect([noCsrf.status, noCsrf.body.code]).toEqual([403, 'csrf_failed']);
    const wrongCsrf = await call('POST', '/v1/ui/products', {
      cookie,
      csrf: 'x'.repeat(43),
      body: { name: 'W' },
    });
    expect(wrongCsrf.body.code).toBe('csrf_failed');
    const made = await call('POST', '/v1/ui/products', {
      cookie,
      csrf: session.csrfToken,
      body: { name: 'Weather' },
    });
    expect(made.status).toBe(201);
    // Sandbox by default; live when asked; the key of the same provider sees the same data.
    const live = await call('GET', '/v1/ui/products', {
      cookie,
      headers: { 'mcp-meter-environment': 'live' },
    });
    expect(live.body.data).toEqual([]);
    const sandbox = await call('GET', '/v1/ui/products', { cookie });
    expect(sandbox.body.data.map((p: Json) => p.id)).toEqual([made.body.id]);
    const odd = await call('GET', '/v1/ui/products', {
      cookie,
      headers: { 'mcp-meter-environment': 'staging' },
    });
    expect([odd.status, odd.body.code]).toEqual([400, 'validation_failed']);
    // A key in Authorization decides, whatever cookie comes with it.
    const other = await harness.controlPlane.providers.create({ displayName: 'Other' });
    const keyed = await call('GET', '/v1/ui/products', {
      cookie,
      headers: { authorization: `Bearer ${other.sandboxKey}` },
    });
    expect(keyed.body.data).toEqual([]);
  });

  it('holds each role to what it may do, and the API refuses it whatever the client', async () => {
    const owner = await member('owner');
    const viewer = await member('viewer', owner.providerId);
    const developer = await member('developer', owner.providerId);
    const admin = await member('admin', owner.providerId);
    const tries = async (who: typeof owner) => {
      const { cookie, body } = await signIn(who);
      const as = (method: 'POST' | 'GET', url: string, payload?: unknown) =>
        call(method, url, {
          cookie,
          csrf: body.csrfToken,
          ...(payload === undefined ? {} : { body: payload }),
        });
      return {
        read: (await as('GET', '/v1/ui/products')).status,
        product: (await as('POST', '/v1/ui/products', { name: `by ${who.email}` })).status,
        meter: (await as('POST', '/v1/ui/meters', { name: `m${emails++}`, aggregation: 'count' })).status,
        customer: (await as('POST', '/v1/sdk/customers', {})).status,
      };
    };
    expect(await tries(viewer)).toEqual({ read: 200, product: 403, meter: 403, customer: 403 });
    expect(await tries(developer)).toEqual({ read: 200, product: 403, meter: 201, customer: 403 });
    expect(await tries(admin)).toEqual({ read: 200, product: 201, meter: 201, customer: 201 });
    const { cookie, body } = await signIn(viewer);
    const refused = await call('POST', '/v1/ui/products', {
      cookie,
      csrf: body.csrfToken,
      body: { name: 'x' },
    });
    expect(refused.body).toMatchObject({
      status: 403,
      code: 'role_forbidden',
      detail: 'A viewer may not make this change',
    });
  });

  it('ends a session after 30 idle minutes, and after 12 hours however busy', async () => {
    const owner = await member('owner');
    const idle = await signIn(owner);
    clock.advance(SESSION_IDLE_MS - 1000);
    expect((await call('GET', '/v1/ui/products', { cookie: idle.cookie })).status).toBe(200);
    // Used a moment ago: the idle spell starts again.
    clock.advance(SESSION_IDLE_MS - 1000);
    expect((await call('GET', '/v1/console/session', { cookie: idle.cookie })).status).toBe(200);
    clock.advance(SESSION_IDLE_MS);
    const ended = await call('GET', '/v1/ui/products', { cookie: idle.cookie });
    expect([ended.status, ended.body.code]).toEqual([401, 'session_expired']);

    const busy = await signIn(owner);
    for (let spent = 0; spent < SESSION_LIFETIME_MS - SESSION_IDLE_MS; spent += 20 * 60_000) {
      clock.advance(20 * 60_000);
      expect((await call('GET', '/v1/console/session', { cookie: busy.cookie })).status).toBe(200);
    }
    clock.advance(SESSION_IDLE_MS - 60_000);
    expect((await call('GET', '/v1/console/session', { cookie: busy.cookie })).body.code).toBe(
      'session_expired',
    );
  });

  it('signs out here, everywhere, and when the password changes; a removed member is out at once', async () => {
    const owner = await member('owner');
    const [a, b, c] = [await signIn(owner), await signIn(owner), await signIn(owner)];
    const out = await call('DELETE', '/v1/console/session', { cookie: a.cookie });
    expect(out.body.code).toBe('csrf_failed');
    const signedOut = await call('DELETE', '/v1/console/session', {
      cookie: a.cookie,
      csrf: a.body.csrfToken,
    });
    expect(signedOut.body).toEqual({ signedOut: true });
    expect(String(signedOut.headers['set-cookie'])).toMatch(
      /^mcpm_console=; Path=\/; HttpOnly; SameSite=Strict; Max-Age=0/,
    );
    expect((await call('GET', '/v1/console/session', { cookie: a.cookie })).status).toBe(401);

    // A new password ends the other sessions, not this one; the old password stops working.
    const changed = await call('PUT', '/v1/console/password', {
      cookie: b.cookie,
      csrf: b.body.csrfToken,
      body: { currentPassword: owner.password, newPassword: 'another long password' },
    });
    expect(changed.body).toEqual({ changed: true });
    expect((await call('GET', '/v1/console/session', { cookie: c.cookie })).status).toBe(401);
    expect((await call('GET', '/v1/console/session', { cookie: b.cookie })).status).toBe(200);
    expect((await signIn(owner)).status).toBe(401);
    const fresh = await signIn({ ...owner, password: 'another long password' });
    expect(fresh.status).toBe(201);

    const everywhere = await call('POST', '/v1/console/session/sign-out-everywhere', {
      cookie: fresh.cookie,
      csrf: fresh.body.csrfToken,
    });
    expect(everywhere.body).toEqual({ ended: 2 });
    for (const s of [b, fresh])
      expect((await call('GET', '/v1/console/session', { cookie: s.cookie })).status).toBe(401);

    const again = await signIn({ ...owner, password: 'another long password' });
    await harness.pool.query('DELETE FROM provider_members WHERE user_id = $1', [owner.userId]);
    expect((await call('GET', '/v1/ui/products', { cookie: again.cookie })).body.code).toBe(
      'session_expired',
    );
  });

  it('asks which provider an account of several means, and refuses one it is not a member of', async () => {
    const first = await member('owner');
    const second = await harness.controlPlane.providers.create({ displayName: 'Second' });
    await team.addMember({ providerId: second.provider.id, email: first.email, role: 'viewer' });
    const ambiguous = await signIn({ email: first.email, password: first.password });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.code).toBe('provider_required');
    expect(ambiguous.body.providers.map((p: Json) => [p.id, p.role])).toEqual([
      [first.providerId, 'owner'],
      [second.provider.id, 'viewer'],
    ]);
    const chosen = await signIn({ ...first, providerId: second.provider.id });
    expect(chosen.body).toMatchObject({ role: 'viewer', provider: { id: second.provider.id } });
    const stranger = await harness.controlPlane.providers.create({ displayName: 'Stranger' });
    expect((await signIn({ ...first, providerId: stranger.provider.id })).body.code).toBe('forbidden');
    // The same member twice is refused; an account keeps its own password in a new provider.
    await expect(
      team.addMember({ providerId: second.provider.id, email: first.email, role: 'admin' }),
    ).rejects.toThrow(/member of/);
  });

  it('evaluates at most 5 of 20 wrong passwords sent at once for one account, then refuses with Retry-After', async () => {
    const owner = await member('owner');
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        signIn({ email: owner.email, password: `wrong ${i}` }, `10.1.0.${i}`),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    const limited = answers.find((a) => a.status === 429);
    expect(limited?.body.code).toBe('too_many_attempts');
    expect(Number(limited?.headers['retry-after'])).toBeGreaterThan(0);
    // Even the right password waits out the window.
    expect((await signIn(owner, '10.1.1.1')).status).toBe(429);
  });

  it("logs every change a member makes and their sign-ins, for owners, admins and the provider's keys to read", async () => {
    const keys = await harness.controlPlane.providers.create({ displayName: 'Audited' });
    const owner = await member('owner', keys.provider.id);
    const developer = await member('developer', owner.providerId);
    const dev = await signIn(developer, '10.2.0.7');
    const meter = await call('POST', '/v1/ui/meters', {
      cookie: dev.cookie,
      csrf: dev.body.csrfToken,
      body: { name: 'audited', aggregation: 'count' },
      headers: { 'user-agent': 'console-test/1.0' },
    });
    expect(meter.status).toBe(201);
    // A change tried and refused by validation is a change too; reads and refused roles are not.
    await call('POST', '/v1/ui/meters', { cookie: dev.cookie, csrf: dev.body.csrfToken, body: { name: '' } });
    await call('GET', '/v1/ui/meters', { cookie: dev.cookie });
    await call('POST', '/v1/ui/products', {
      cookie: dev.cookie,
      csrf: dev.body.csrfToken,
      body: { name: 'no' },
    });
    // Not a developer's to read.
    expect((await call('GET', '/v1/ui/audit-events', { cookie: dev.cookie })).body.code).toBe(
      'role_forbidden',
    );

    const own = await signIn(owner);
    const log = await call('GET', '/v1/ui/audit-events?limit=10', { cookie: own.cookie });
    expect(log.status).toBe(200);
    expect(log.body.data.map((e: Json) => [e.actor.email, e.operation, e.status, e.environment])).toEqual([
      [owner.email, 'signInToConsole', 201, null],
      [developer.email, 'createMeter', 400, 'sandbox'],
      [developer.email, 'createMeter', 201, 'sandbox'],
      [developer.email, 'signInToConsole', 201, null],
    ]);
    expect(log.body.data[2]).toMatchObject({
      id: expect.stringMatching(/^aud_/),
      actor: { role: 'developer' },
      method: 'POST',
      path: '/v1/ui/meters',
      address: '127.0.0.1',
      userAgent: 'console-test/1.0',
      requestId: expect.stringMatching(/^req_/),
    });
    // Paged newest first; the provider's secret key reads the same log.
    const first = await call('GET', '/v1/ui/audit-events?limit=3', { cookie: own.cookie });
    const rest = await call('GET', `/v1/ui/audit-events?limit=3&cursor=${first.body.nextCursor}`, {
      cookie: own.cookie,
    });
    expect([...first.body.data, ...rest.body.data].map((e: Json) => e.id)).toEqual(
      log.body.data.map((e: Json) => e.id),
    );
    const keyed = await call('GET', '/v1/ui/audit-events?limit=10', {
      headers: { authorization: `Bearer ${keys.sandboxKey}` },
    });
    expect(keyed.body.data.map((e: Json) => e.id)).toEqual(log.body.data.map((e: Json) => e.id));
    // Sign-outs are logged too, under the member who signed out.
    await call('DELETE', '/v1/console/session', { cookie: dev.cookie, csrf: dev.body.csrfToken });
    const after = await call('GET', '/v1/ui/audit-events?limit=1', { cookie: own.cookie });
    expect(after.body.data[0]).toMatchObject({
      operation: 'signOutOfConsole',
      actor: { email: developer.email },
    });
  });
});
