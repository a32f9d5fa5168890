import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import type { Role } from '../src/modules/team/repository';
import { TeamService } from '../src/modules/team/service';

/**
 * Secret keys managed in the console (issue 62) on real PostgreSQL: created with the secret shown
 * once, rolled with an overlap during which both secrets work and after which the old one is
 * refused, revoked at once, rolled many times at once into one successor, and never managed with
 * a key; a viewer may not, a developer may.
 */
const clock = new MovableClock(new Date('2026-08-01T09:00:00.000Z'));
let harness: TestControlPlane;
let team: TeamService;

beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024, clock });
  team = new TeamService(harness.pool, clock);
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
type Json = any;
let n = 0;

async function signedIn(role: Role) {
  const created = await harness.controlPlane.providers.create({ displayName: `Keys ${++n}` });
  const email = `keys${n}@example.com`;
  await team.addMember({ providerId: created.provider.id, email, role, password: 'long enough pass' });
  const answer = await harness.controlPlane.app.inject({
    method: 'POST',
    url: '/v1/console/sessions',
    remoteAddress: `10.7.0.${n}`,
    payload: { email, password: 'long enough pass' },
  });
  const body = answer.json() as Json;
  return {
    ...created,
    headers: {
      cookie: String(answer.headers['set-cookie']).split(';')[0] ?? '',
      'x-csrf-token': body.csrfToken as string,
    },
  };
}

async function call(
  method: 'GET' | 'POST' | 'DELETE',
  url: string,
  headers: Record<string, string>,
  body?: unknown,
) {
  const answer = await harness.controlPlane.app.inject({
    method,
    url,
    headers,
    ...(body === undefined ? {} : { payload: body as object }),
  });
  return { status: answer.statusCode, body: answer.body === '' ? undefined : (answer.json() as Json) };
}

const withKey = (key: string) => call('GET', '/v1/ui/products', { authorization: `Bearer ${key}` });

describe('API keys in the console', () => {
  it('creates a key whose secret is answered once, lists it by hint, and the key opens the API', async () => {
    const { headers, sandboxKey } = await signedIn('owner');
    const made = await call('POST', '/v1/ui/api-keys', headers, { name: 'CI deploys' });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      id: expect.stringMatching(/^key_/),
      name: 'CI deploys',
      secret: expect.stringMatching(/^sk_test_/),
      hint: expect.stringMatching(/^sk_test_….{4}$/),
      expiresAt: null,
    });
    expect(made.body.hint.slice(-4)).toBe(made.body.secret.slice(-4));
    expect((await withKey(made.body.secret)).status).toBe(200);
    const listed = await call('GET', '/v1/ui/api-keys', headers);
    expect(listed.body.data.map((k: Json) => k.name)).toEqual(['CI deploys', null]);
    expect(JSON.stringify(listed.body)).not.toContain(made.body.secret);
    // A key may not make keys: a leaked one could otherwise outlive its revocation.
    const byKey = await call('POST', '/v1/ui/api-keys', { authorization: `Bearer ${sandboxKey}` }, {});
    expect([byKey.status, byKey.body.code]).toEqual([403, 'forbidden']);
    // In live, a live key (once live mode is on).
    const live = await call('POST', '/v1/ui/api-keys', { ...headers, 'mcp-meter-environment': 'live' }, {});
    expect(live.body.secret).toMatch(/^sk_live_/);
  });

  it('rolls a key: both secrets work for the overlap (10 minutes here), then only the new one', async () => {
    const { headers } = await signedIn('developer');
    const made = (await call('POST', '/v1/ui/api-keys', headers, { name: 'Server' })).body;
    const rolled = await call('POST', `/v1/ui/api-keys/${made.id}/roll`, headers, { overlapSeconds: 600 });
    expect(rolled.status).toBe(201);
    expect(rolled.body).toMatchObject({
      name: 'Server',
      secret: expect.stringMatching(/^sk_test_/),
      rolled: { id: made.id, expiresAt: new Date(clock.now().getTime() + 600_000).toISOString() },
    });
    expect((await withKey(made.secret)).status).toBe(200);
    expect((await withKey(rolled.body.secret)).status).toBe(200);
    const again = await call('POST', `/v1/ui/api-keys/${made.id}/roll`, headers, {});
    expect([again.status, again.body.code]).toEqual([409, 'key_rolled']);
    clock.advance(600_000);
    try {
      const old = await withKey(made.secret);
      expect([old.status, old.body.code]).toEqual([401, 'invalid_api_key']);
      expect((await withKey(rolled.body.secret)).status).toBe(200);
      const listed = await call('GET', '/v1/ui/api-keys', headers);
      expect(listed.body.data.map((k: Json) => k.id)).not.toContain(made.id);
    } finally {
      clock.advance(-600_000);
    }
  });

  it('rolled ten times at once, a key has one successor; revoked, it stops at once', async () => {
    const { headers } = await signedIn('admin');
    const made = (await call('POST', '/v1/ui/api-keys', headers, { name: 'Racing' })).body;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        call('POST', `/v1/ui/api-keys/${made.id}/roll`, headers, { overlapSeconds: 60 }),
      ),
    );
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status !== 201).map((a) => a.body.code)).toEqual(
      Array(9).fill('key_rolled'),
    );
    const successor = answers.find((a) => a.status === 201)?.body;
    const named = (await call('GET', '/v1/ui/api-keys', headers)).body.data.filter(
      (k: Json) => k.name === 'Racing',
    );
    expect(named).toHaveLength(2);
    const revoked = await call('DELETE', `/v1/ui/api-keys/${successor.id}`, headers);
    expect(revoked.body).toEqual({ id: successor.id, revoked: true });
    expect((await withKey(successor.secret)).status).toBe(401);
    expect((await call('DELETE', `/v1/ui/api-keys/${successor.id}`, headers)).status).toBe(404);
  });

  it('a viewer reads the keys but may not make, roll or revoke one', async () => {
    const { headers } = await signedIn('viewer');
    expect((await call('GET', '/v1/ui/api-keys', headers)).status).toBe(200);
    const refused = await call('POST', '/v1/ui/api-keys', headers, {});
    expect([refused.status, refused.body.code]).toEqual([403, 'role_forbidden']);
  });
});
