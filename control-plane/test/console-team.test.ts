import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startMailbox } from '../../test/helpers/mailbox';
import { MovableClock } from '../src/clock';
import { ERROR_STATUS } from '../src/errors';
import { INVITATION_TTL_MS } from '../src/modules/team/members';
import type { Role } from '../src/modules/team/repository';
import { TeamService } from '../src/modules/team/service';
import { ConsoleSignups } from '../src/modules/team/signup';

/**
 * The console's team (issue 62) on real PostgreSQL with mail over real SMTP on loopback: sign-up
 * proven by a mailed code into a new provider, invitations mailed as links and accepted into a
 * session, roles changed and members removed within the rules (only owners touch the owner role;
 * a team keeps an owner, even under concurrent changes), and the audit log of it all.
 */
const clock = new MovableClock(new Date('2026-07-01T09:00:00.000Z'));
let harness: TestControlPlane;
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
let team: TeamService;

beforeAll(async () => {
  mailbox = await startMailbox();
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    smtpUrl: mailbox.url,
    publicUrl: 'http://console.test:8080',
  });
  team = new TeamService(harness.pool, clock);
});
afterAll(async () => {
  await harness?.close();
  await mailbox?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = any;
let n = 0;
let addresses = 0;
/** A distinct client address per test, so the per-address throttles of one test touch no other. */
const nextAddress = () => `10.9.${Math.floor(++addresses / 250)}.${addresses % 250}`;

async function call(
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  options: { session?: Session; body?: unknown; remote?: string } = {},
): Promise<{ status: number; body: Json; setCookie: string }> {
  const answer = await harness.controlPlane.app.inject({
    method,
    url,
    remoteAddress: options.remote ?? '10.8.0.1',
    headers: {
      ...(options.session === undefined
        ? {}
        : { cookie: options.session.cookie, 'x-csrf-token': options.session.csrfToken }),
    },
    ...(options.body === undefined ? {} : { payload: options.body as object }),
  });
  return {
    status: answer.statusCode,
    body: answer.body === '' ? undefined : answer.json(),
    setCookie: String(answer.headers['set-cookie'] ?? ''),
  };
}

interface Session {
  cookie: string;
  csrfToken: string;
  body: Json;
}
const sessionOf = (answer: { body: Json; setCookie: string }): Session => ({
  cookie: answer.setCookie.split(';')[0] ?? '',
  csrfToken: answer.body.csrfToken,
  body: answer.body,
});

/** Signs up a new business and verifies it with the mailed code: its owner's session. */
async function signUp(businessName = `Business ${++n}`) {
  const email = `owner${++n}@example.com`;
  const remote = nextAddress();
  const started = await call('POST', '/v1/console/signups', {
    body: { email, password: 'correct horse battery', businessName },
    remote,
  });
  expect(started.status).toBe(202);
  const code = await mailbox.codeFor(email);
  const verified = await call('POST', `/v1/console/signups/${started.body.verificationId}/verify`, {
    body: { code },
    remote,
  });
  expect(verified.status).toBe(201);
  return { email, session: sessionOf(verified) };
}

/** Invites `email` as `role` and answers the link's token from the mail. */
async function invite(by: Session, email: string, role: Role) {
  const before = mailbox.countFor(email);
  const answer = await call('POST', '/v1/ui/team/invitations', { session: by, body: { email, role } });
  expect(answer.status).toBe(201);
  const text = await mailbox.textFor(email, before);
  const token = text.match(/\/console\/accept-invitation#token=([\w-]+)/)?.[1];
  expect(token).toBeDefined();
  return { invitation: answer.body, token: token ?? '' };
}

async function join(by: Session, role: Role) {
  const email = `member${++n}@example.com`;
  const { token } = await invite(by, email, role);
  const accepted = await call('POST', '/v1/console/invitations/accept', {
    body: { token, password: 'another fine password' },
    remote: nextAddress(),
  });
  expect(accepted.status).toBe(201);
  return { email, session: sessionOf(accepted) };
}

describe('console sign-up', () => {
  it('mails a code, and the code makes a sandbox-only provider with its owner signed in', async () => {
    const email = 'Founder@Example.com';
    const remote = nextAddress();
    const started = await call('POST', '/v1/console/signups', {
      body: { email, password: 'correct horse battery', businessName: '  Weather Co  ' },
      remote,
    });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({
      verificationId: expect.stringMatching(/^sgn_/),
      email: 'founder@example.com',
    });
    // Nothing exists before the code comes back.
    const before = await harness.pool.query(
      "SELECT count(*)::int AS n FROM console_users WHERE email = 'founder@example.com'",
    );
    expect(before.rows[0].n).toBe(0);
    const code = await mailbox.codeFor('founder@example.com');
    const wrong = await call('POST', `/v1/console/signups/${started.body.verificationId}/verify`, {
      body: { code: code === '000000' ? '000001' : '000000' },
      remote,
    });
    expect([wrong.status, wrong.body.code, wrong.body.detail]).toEqual([
      400,
      'invalid_verification_code',
      'That code is not right; 4 tries left',
    ]);
    const verified = await call('POST', `/v1/console/signups/${started.body.verificationId}/verify`, {
      body: { code },
      remote,
    });
    expect(verified.status).toBe(201);
    expect(verified.setCookie).toMatch(
      /^mcpm_console=[\w-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    expect(verified.body).toMatchObject({
      role: 'owner',
      user: { email: 'founder@example.com' },
      provider: { id: expect.stringMatching(/^prv_/), displayName: 'Weather Co', liveEnabled: false },
    });
    const session = sessionOf(verified);
    // The new provider works through the API with the session, in sandbox.
    const product = await call('POST', '/v1/ui/products', { session, body: { name: 'Forecasts' } });
    expect(product.status).toBe(201);
    // The code works once.
    const again = await call('POST', `/v1/console/signups/${started.body.verificationId}/verify`, {
      body: { code },
      remote,
    });
    expect([again.status, again.body.code]).toEqual([400, 'verification_expired']);
    const events = await call('GET', '/v1/ui/audit-events?limit=10', { session });
    expect(events.body.data.map((e: Json) => e.operation)).toEqual(['createProduct', 'verifyConsoleSignup']);
    // A change is in the log by the time its answer arrives: the next request reads it.
    const seen = new Set<string>([events.body.data[0].id]);
    for (let i = 0; i < 10; i++) {
      expect((await call('POST', '/v1/ui/products', { session, body: { name: `Tides ${i}` } })).status).toBe(
        201,
      );
      const newest = (await call('GET', '/v1/ui/audit-events?limit=1', { session })).body.data[0];
      expect([newest.operation, seen.has(newest.id)]).toEqual(['createProduct', false]);
      seen.add(newest.id);
    }
  });

  it('makes one provider when the same code is sent ten times at once', async () => {
    const email = `race${++n}@example.com`;
    const remote = nextAddress();
    const started = await call('POST', '/v1/console/signups', {
      body: { email, password: 'correct horse battery', businessName: 'Racing' },
      remote,
    });
    const code = await mailbox.codeFor(email);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        call('POST', `/v1/console/signups/${started.body.verificationId}/verify`, { body: { code }, remote }),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    // Five attempts per sign-up: the rest are refused before the code is read.
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s !== 201 && s !== 400)).toEqual([]);
    const made = await harness.pool.query(
      `SELECT count(*)::int AS n FROM provider_members m JOIN console_users u ON u.id = m.user_id WHERE u.email = $1`,
      [email],
    );
    expect(made.rows[0].n).toBe(1);
    const providers = await harness.pool.query(
      "SELECT count(*)::int AS n FROM providers WHERE display_name = 'Racing'",
    );
    expect(providers.rows[0].n).toBe(1);
  });

  it('refuses bad input by field, weak passwords, and sign-up where it is closed', async () => {
    const bad = await call('POST', '/v1/console/signups', {
      body: { email: 'not-an-email', password: 'x', businessName: '' },
      remote: nextAddress(),
    });
    expect([bad.status, bad.body.code]).toEqual([400, 'validation_failed']);
    const blank = await call('POST', '/v1/console/signups', {
      body: { email: 'a@example.com', password: 'long enough pass', businessName: '   ' },
      remote: nextAddress(),
    });
    expect([blank.status, blank.body.code, blank.body.errors?.[0]?.path]).toEqual([
      400,
      'validation_failed',
      '/businessName',
    ]);
    const weak = await call('POST', '/v1/console/signups', {
      body: { email: 'a@example.com', password: 'short', businessName: 'B' },
      remote: nextAddress(),
    });
    expect([weak.status, weak.body.code]).toEqual([400, 'weak_password']);
    // CONSOLE_SIGNUP=closed: one control plane per test process, so the service is built apart.
    const closed = new ConsoleSignups(
      harness.pool,
      clock,
      { delivers: true, send: () => Promise.reject(new Error('no mail expected')), close: () => {} },
      harness.controlPlane.providers,
      team,
      false,
    );
    await expect(
      closed.start({
        email: 'a@example.com',
        password: 'long enough pass',
        businessName: 'B',
        address: '::1',
      }),
    ).rejects.toMatchObject({ code: 'signup_closed' });
    expect(ERROR_STATUS.signup_closed).toBe(403);
    const unknown = await call('POST', '/v1/console/signups/sgn_nope/verify', { body: { code: '123456' } });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'verification_not_found']);
  });
});

describe('the team', () => {
  it('invites by mail; the link shows the team and joins a new account with the role, once', async () => {
    const { session: owner } = await signUp('Invites Inc');
    const email = `dev${++n}@example.com`;
    const { invitation, token } = await invite(owner, email, 'developer');
    expect(invitation).toMatchObject({
      id: expect.stringMatching(/^ivt_/),
      email,
      role: 'developer',
      invitedBy: owner.body.user.email,
      expiresAt: new Date(clock.now().getTime() + INVITATION_TTL_MS).toISOString(),
    });
    const lookup = await call('POST', '/v1/console/invitations/lookup', { body: { token } });
    expect(lookup.body).toMatchObject({
      provider: { displayName: 'Invites Inc' },
      email,
      role: 'developer',
      accountExists: false,
    });
    const listed = await call('GET', '/v1/ui/team', { session: owner });
    expect(listed.body.invitations.map((i: Json) => i.email)).toEqual([email]);
    const weak = await call('POST', '/v1/console/invitations/accept', { body: { token, password: 'short' } });
    expect([weak.status, weak.body.code]).toEqual([400, 'weak_password']);
    const accepted = await call('POST', '/v1/console/invitations/accept', {
      body: { token, password: 'a developer password' },
      remote: nextAddress(),
    });
    expect(accepted.status).toBe(201);
    expect(accepted.body).toMatchObject({ role: 'developer', provider: { id: owner.body.provider.id } });
    const again = await call('POST', '/v1/console/invitations/accept', {
      body: { token, password: 'a developer password' },
      remote: nextAddress(),
    });
    expect([again.status, again.body.code]).toEqual([409, 'invitation_closed']);
    const after = await call('GET', '/v1/ui/team', { session: owner });
    expect(after.body.members.map((m: Json) => [m.email, m.role])).toEqual([
      [owner.body.user.email, 'owner'],
      [email, 'developer'],
    ]);
    expect(after.body.invitations).toEqual([]);
    // A developer may not manage the team: the API refuses it.
    const dev = sessionOf(accepted);
    const denied = await call('POST', '/v1/ui/team/invitations', {
      session: dev,
      body: { email: 'x@example.com', role: 'viewer' },
    });
    expect([denied.status, denied.body.code]).toEqual([403, 'role_forbidden']);
    const unknown = await call('POST', '/v1/console/invitations/lookup', { body: { token: 'nope' } });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'invitation_not_found']);
  });

  it('an existing account joins a second team with its own password, and then names the team at sign-in', async () => {
    const { session: first, email } = await signUp('First Team');
    const { session: second } = await signUp('Second Team');
    const { token } = await invite(second, email, 'viewer');
    expect(
      (await call('POST', '/v1/console/invitations/lookup', { body: { token } })).body.accountExists,
    ).toBe(true);
    const wrong = await call('POST', '/v1/console/invitations/accept', {
      body: { token, password: 'not my password' },
      remote: nextAddress(),
    });
    expect([wrong.status, wrong.body.code]).toEqual([401, 'invalid_credentials']);
    const accepted = await call('POST', '/v1/console/invitations/accept', {
      body: { token, password: 'correct horse battery' },
      remote: nextAddress(),
    });
    expect(accepted.body).toMatchObject({ role: 'viewer', provider: { id: second.body.provider.id } });
    const ambiguous = await call('POST', '/v1/console/sessions', {
      body: { email, password: 'correct horse battery' },
      remote: nextAddress(),
    });
    expect([ambiguous.status, ambiguous.body.code]).toEqual([409, 'provider_required']);
    expect(ambiguous.body.providers.map((p: Json) => p.id).sort()).toEqual(
      [first.body.provider.id, second.body.provider.id].sort(),
    );
  });

  it('expired and revoked invitations are closed; a new invitation replaces the open one', async () => {
    const { session: owner } = await signUp();
    const email = `late${++n}@example.com`;
    const first = await invite(owner, email, 'viewer');
    const second = await invite(owner, email, 'admin');
    const replaced = await call('POST', '/v1/console/invitations/lookup', { body: { token: first.token } });
    expect([replaced.status, replaced.body.code]).toEqual([409, 'invitation_closed']);
    const revoked = await call('DELETE', `/v1/ui/team/invitations/${second.invitation.id}`, {
      session: owner,
    });
    expect(revoked.body).toEqual({ id: second.invitation.id, revoked: true });
    expect(
      (await call('POST', '/v1/console/invitations/lookup', { body: { token: second.token } })).status,
    ).toBe(409);
    expect(
      (await call('DELETE', `/v1/ui/team/invitations/${second.invitation.id}`, { session: owner })).status,
    ).toBe(404);
    const third = await invite(owner, email, 'viewer');
    clock.advance(INVITATION_TTL_MS + 1000);
    try {
      const expired = await call('POST', '/v1/console/invitations/accept', {
        body: { token: third.token, password: 'long enough pass' },
        remote: nextAddress(),
      });
      expect([expired.status, expired.body.code]).toEqual([409, 'invitation_closed']);
    } finally {
      clock.advance(-(INVITATION_TTL_MS + 1000));
    }
    const member = await call('POST', '/v1/ui/team/invitations', {
      session: owner,
      body: { email: owner.body.user.email, role: 'viewer' },
    });
    expect([member.status, member.body.code]).toEqual([409, 'member_exists']);
  });

  it('only owners touch the owner role, and a team keeps its last owner even when both owners step down at once', async () => {
    const { session: owner } = await signUp();
    const admin = await join(owner, 'admin');
    const grant = await call('POST', '/v1/ui/team/invitations', {
      session: admin.session,
      body: { email: `o${++n}@example.com`, role: 'owner' },
    });
    expect([grant.status, grant.body.code]).toEqual([403, 'role_forbidden']);
    const demote = await call('PATCH', `/v1/ui/team/members/${owner.body.user.id}`, {
      session: admin.session,
      body: { role: 'viewer' },
    });
    expect([demote.status, demote.body.code]).toEqual([403, 'role_forbidden']);
    const last = await call('PATCH', `/v1/ui/team/members/${owner.body.user.id}`, {
      session: owner,
      body: { role: 'admin' },
    });
    expect([last.status, last.body.code]).toEqual([409, 'last_owner']);
    // A second owner; then both owners demote themselves at the same moment: one stays owner.
    const promoted = await call('PATCH', `/v1/ui/team/members/${admin.session.body.user.id}`, {
      session: owner,
      body: { role: 'owner' },
    });
    expect(promoted.body).toMatchObject({ role: 'owner' });
    const both = await Promise.all(
      [owner, admin.session].map((s) =>
        call('PATCH', `/v1/ui/team/members/${s.body.user.id}`, { session: s, body: { role: 'developer' } }),
      ),
    );
    expect(both.map((a) => a.status).sort()).toEqual([200, 409]);
    const roles = (await call('GET', '/v1/ui/team', { session: owner })).body.members.map(
      (m: Json) => m.role,
    );
    expect(roles.filter((r: string) => r === 'owner')).toHaveLength(1);
    // Whichever stepped down first, the other is still owner, and may manage the team.
    const stillOwner = both[0]?.status === 409 ? owner : admin.session;
    const missing = await call('PATCH', '/v1/ui/team/members/usr_nope', {
      session: stillOwner,
      body: { role: 'viewer' },
    });
    expect([missing.status, missing.body.code]).toEqual([404, 'member_not_found']);
  });

  it('removing a member ends their sessions at once; a viewer changes nothing', async () => {
    const { session: owner } = await signUp();
    const viewer = await join(owner, 'viewer');
    expect((await call('GET', '/v1/ui/products', { session: viewer.session })).status).toBe(200);
    const create = await call('POST', '/v1/ui/products', { session: viewer.session, body: { name: 'No' } });
    expect([create.status, create.body.code]).toEqual([403, 'role_forbidden']);
    const removeOwner = await call('DELETE', `/v1/ui/team/members/${owner.body.user.id}`, {
      session: viewer.session,
    });
    expect([removeOwner.status, removeOwner.body.code]).toEqual([403, 'role_forbidden']);
    const removed = await call('DELETE', `/v1/ui/team/members/${viewer.session.body.user.id}`, {
      session: owner,
    });
    expect(removed.body).toEqual({ userId: viewer.session.body.user.id, removed: true });
    const after = await call('GET', '/v1/ui/products', { session: viewer.session });
    expect([after.status, after.body.code]).toEqual([401, 'session_expired']);
    const events = await call('GET', '/v1/ui/audit-events?limit=20', { session: owner });
    expect(events.body.data.map((e: Json) => e.operation)).toEqual(
      expect.arrayContaining(['removeMember', 'inviteMember', 'acceptInvitation', 'verifyConsoleSignup']),
    );
  });

  it('a secret key manages the team as an owner would', async () => {
    const created = await harness.controlPlane.providers.create({ displayName: 'Keyed' });
    await team.addMember({ providerId: created.provider.id, email: `k${++n}@example.com`, role: 'owner' });
    const answer = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/ui/team/invitations',
      headers: { authorization: `Bearer ${created.sandboxKey}` },
      payload: { email: `keyed${n}@example.com`, role: 'owner' },
    });
    expect(answer.statusCode).toBe(201);
    expect(answer.json()).toMatchObject({ role: 'owner', invitedBy: null });
  });
});
