import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { freePort } from '@mcp-meter/contracts/kit';
import * as oauth from 'oauth4webapi';
import { pino } from 'pino';
import { generate as selfSigned } from 'selfsigned';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { startMailbox } from '../../test/helpers/mailbox';
import { MovableClock } from '../src/clock';

/**
 * The customer sign-in authorization server, driven by oauth4webapi (a certified OAuth client
 * library, nobody's code here) against the control plane listening on loopback, on the run's
 * real PostgreSQL. The proxy's side is in test/e2e/customer-sign-in.test.ts.
 */
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const REDIRECT = 'http://127.0.0.1:7777/callback';

let harness: TestControlPlane;
/** Every line the control plane logged at error level or above (a handler that threw). */
const errorsLogged: string[] = [];
let mailbox: Awaited<ReturnType<typeof startMailbox>>;
/** Client ID Metadata Documents served over https on loopback: path → answer; fetches counted. */
const documents = new Map<string, { body: string; headers?: Record<string, string> }>();
const fetches = new Map<string, number>();
let documentServer: HttpsServer;
let documentBase: string;
let base: string;
const clock = new MovableClock();
let as: oauth.AuthorizationServer;
let resource: string;
let api: ReturnType<typeof injectClient>;
let providerId: string;
let productId: string;
let subdomain: string;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  mailbox = await startMailbox();
  const tls = await selfSigned([{ name: 'commonName', value: '127.0.0.1' }], {
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
  });
  documentServer = createHttpsServer({ key: tls.private, cert: tls.cert }, (request, response) => {
    const path = request.url ?? '';
    fetches.set(path, (fetches.get(path) ?? 0) + 1);
    const document = documents.get(path);
    response.writeHead(document === undefined ? 404 : 200, {
      'content-type': 'application/json',
      ...document?.headers,
    });
    response.end(document?.body ?? '{}');
  });
  await new Promise<void>((resolve) => documentServer.listen(0, '127.0.0.1', resolve));
  documentBase = `https://127.0.0.1:${(documentServer.address() as { port: number }).port}`;
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    publicUrl: base,
    smtpUrl: mailbox.url,
    outboundCa: tls.cert,
    logger: pino({ level: 'error' }, { write: (line: string) => void errorsLogged.push(line) }),
  });
  await harness.controlPlane.app.listen({ port, host: '127.0.0.1' });
  const created = await harness.controlPlane.providers.create({ displayName: 'Sign-in Co' });
  providerId = created.provider.id;
  api = injectClient(harness.controlPlane, created.sandboxKey);
  productId = (await api('POST', '/v1/ui/products', { name: 'Weather' })).body.id;
  const free = await api('POST', `/v1/ui/products/${productId}/plans`, {
    name: 'Free',
    type: 'recurring',
    billingCycle: 'monthly',
    currency: 'usd',
    price: 0,
    limit: 5,
    default: true,
  });
  expect(free.status).toBe(201);
  const server = await api('POST', '/v1/ui/mcp-servers', {
    name: 'weather',
    url: 'http://127.0.0.1:1/mcp',
    productId,
    defaultPlanId: free.body.id,
  });
  expect(server.status).toBe(201);
  subdomain = server.body.subdomain;
  resource = server.body.mcpProxyUrl;
  const issuer = new URL(base);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
});
afterAll(async () => {
  await harness?.close();
  await mailbox?.close();
  documentServer?.close();
});

const register = async (metadata: Record<string, unknown> = {}) => {
  const response = await oauth.dynamicClientRegistrationRequest(
    as,
    {
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'none',
      client_name: 'Test client',
      ...metadata,
    },
    insecure,
  );
  return oauth.processDynamicClientRegistrationResponse(response);
};

let emails = 0;
const newEmail = () => `person${++emails}-${Date.now()}@example.com`;

/**
 * Signs in through spec 4.3's JSON endpoint, or signs up: starts the sign-up, reads the code from
 * the mail the SMTP server received, and finishes it. Answers the last response (the redirect the
 * browser would follow, when it worked) and the PKCE verifier.
 */
const signIn = async (
  client: oauth.Client,
  options: {
    email?: string;
    password?: string;
    intent?: 'signups' | 'logins';
    challenge?: string;
    state?: string;
  } = {},
) => {
  const verifier = oauth.generateRandomCodeVerifier();
  const challenge = options.challenge ?? (await oauth.calculatePKCECodeChallenge(verifier));
  const email = options.email ?? newEmail();
  const mailed = mailbox.countFor(email);
  const start = await postCredentials(options.intent ?? 'signups', client, {
    email,
    password: options.password ?? 'correct horse battery',
    state: options.state ?? 'st-1',
    code_challenge: challenge,
    scope: 'mcp',
  });
  if (options.intent === 'logins' || start.status !== 202) return { response: start, verifier };
  const { verificationId } = (await start.json()) as { verificationId: string };
  const code = await mailbox.codeFor(email, mailed);
  return { response: await verify(verificationId, code), verifier, verificationId };
};

const verify = (verificationId: string, code: string) =>
  fetch(`${base}/v1/customer/auth/signups/${verificationId}/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code }),
  });

/** Starts a sign-up and answers its 202 body, without finishing it. */
const startSignup = async (client: oauth.Client, email: string, password = 'correct horse battery') => {
  const response = await postCredentials('signups', client, {
    email,
    password,
    code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()),
  });
  return { status: response.status, body: await jsonOf(response) };
};

/** Spec 4.3's JSON sign-in or sign-up for this file's server, redirect URI and S256. */
const postCredentials = (
  intent: 'signups' | 'logins',
  client: oauth.Client,
  fields: Record<string, string>,
) =>
  fetch(`${base}/v1/customer/auth/${intent}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_id: client.client_id,
      redirect_uri: REDIRECT,
      code_challenge_method: 'S256',
      resource,
      ...fields,
    }),
  });

const exchange = async (client: oauth.Client, redirectUrl: string, verifier: string, state = 'st-1') => {
  const params = oauth.validateAuthResponse(as, client, new URL(redirectUrl), state);
  const response = await oauth.authorizationCodeGrantRequest(
    as,
    client,
    oauth.None(),
    params,
    REDIRECT,
    verifier,
    { ...insecure, additionalParameters: { resource } },
  );
  return oauth.processAuthorizationCodeResponse(as, client, response);
};

// biome-ignore lint/suspicious/noExplicitAny: answers are asserted field by field
type Json = Record<string, any>;
const jsonOf = async (response: Response): Promise<Json> => (await response.json()) as Json;

const tokenForm = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${base}/v1/customer/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields),
  });

describe('customer sign-in: the authorization server', () => {
  it('publishes RFC 8414 metadata with S256 only, also as the OpenID discovery document', async () => {
    expect(as).toMatchObject({
      issuer: base,
      code_challenge_methods_supported: ['S256'],
      registration_endpoint: `${base}/v1/customer/auth/register`,
      token_endpoint: `${base}/v1/customer/auth/token`,
      authorization_response_iss_parameter_supported: true,
    });
    const oidc = await (await fetch(`${base}/.well-known/openid-configuration`)).json();
    expect(oidc).toEqual(as);
  });

  it('oauth4webapi registers, signs up, exchanges the code and gets an RFC 9068 token for that MCP server only', async () => {
    const client = await register();
    const { response, verifier } = await signIn(client);
    expect(response.status).toBe(200);
    const { redirectUrl } = (await response.json()) as { redirectUrl: string };
    expect(new URL(redirectUrl).searchParams.get('iss')).toBe(base);
    const tokens = await exchange(client, redirectUrl, verifier);
    expect(tokens).toMatchObject({ token_type: 'bearer', expires_in: 3600, scope: 'mcp' });
    expect(tokens.refresh_token).toEqual(expect.any(String));

    // An independent RFC 9068 check: typ at+jwt, issuer, audience = the server's resource URL.
    const claims = await oauth.validateJwtAccessToken(
      as,
      new Request(resource, { headers: { authorization: `Bearer ${tokens.access_token}` } }),
      resource,
      insecure,
    );
    expect(claims).toMatchObject({
      iss: base,
      aud: resource,
      client_id: client.client_id,
      scope: 'mcp',
      prv: providerId,
    });
    const customer = await api('GET', `/v1/sdk/customers/${claims.sub}`);
    expect(customer.status).toBe(200);
    // A token for another server's resource does not validate as this one's.
    await expect(
      oauth.validateJwtAccessToken(
        as,
        new Request(resource, { headers: { authorization: `Bearer ${tokens.access_token}` } }),
        `${resource}-other`,
        insecure,
      ),
    ).rejects.toThrow();
  });

  it('creates the customer for the server provider once the mailed code comes back, with customer.created naming the product', async () => {
    const client = await register();
    const email = newEmail();
    const mailed = mailbox.countFor(email);
    const started = await startSignup(client, email);
    expect(started.status).toBe(202);
    expect(started.body).toEqual({
      verificationId: expect.stringMatching(/^emv_/),
      email,
      expiresAt: expect.any(String),
    });
    // Nothing exists until the code comes back.
    expect((await api('GET', `/v1/sdk/customers?email=${encodeURIComponent(email)}`)).body.data).toHaveLength(
      0,
    );
    const code = await mailbox.codeFor(email, mailed);
    const mail = mailbox.mails.filter((m) => m.to.includes(email)).at(-1);
    expect(mail?.raw).toMatch(/^Subject: \d{6} is your Sign-in Co code/m);
    expect(mail?.raw).toContain('weather');

    const done = await verify(started.body.verificationId, code);
    expect(done.status).toBe(200);
    expect(new URL((await jsonOf(done)).redirectUrl).searchParams.get('code')).toEqual(expect.any(String));
    const found = await api('GET', `/v1/sdk/customers?email=${encodeURIComponent(email)}`);
    expect(found.body.data).toHaveLength(1);
    const { rows } = await harness.pool.query<{ payload: { data: { object: Record<string, unknown> } } }>(
      `SELECT payload FROM outbox_events WHERE type = 'customer.created' AND payload->'data'->'object'->>'id' = $1`,
      [found.body.data[0].id],
    );
    expect(rows[0]?.payload.data.object.product).toEqual({ reference: productId });
    // A code works once.
    expect(await jsonOf(await verify(started.body.verificationId, code))).toMatchObject({
      code: 'verification_expired',
    });
    expect((await signIn(client, { email, intent: 'logins' })).response.status).toBe(200);
  });

  it('tells nobody which emails are known: a sign-up for a taken email answers the same, and only the inbox finishes it', async () => {
    const client = await register();
    const known = newEmail();
    expect((await signIn(client, { email: known, password: 'first password' })).response.status).toBe(200);
    const apiEmail = newEmail();
    const apiCustomer = await api('POST', '/v1/sdk/customers', { email: apiEmail, name: 'Made by the API' });
    expect(apiCustomer.status).toBe(201);

    const fresh = await startSignup(client, newEmail());
    const taken = await startSignup(client, known.toUpperCase(), 'second password');
    const ofApi = await startSignup(client, apiEmail);
    for (const answer of [fresh, taken, ofApi]) {
      expect(answer.status).toBe(202);
      expect(Object.keys(answer.body).sort()).toEqual(['email', 'expiresAt', 'verificationId']);
    }
    // Without the code, the known account keeps its password and the API customer gets none.
    expect(
      (await signIn(client, { email: known, intent: 'logins', password: 'second password' })).response.status,
    ).toBe(401);
    expect((await signIn(client, { email: apiEmail, intent: 'logins' })).response.status).toBe(401);

    // Wrong codes are counted: five, then even the right one is refused.
    const code = await mailbox.codeFor(apiEmail);
    const wrong = code === '000000' ? '000001' : '000000';
    const first = await verify(ofApi.body.verificationId, wrong);
    expect(first.status).toBe(400);
    expect(await jsonOf(first)).toMatchObject({ code: 'invalid_verification_code' });
    for (let i = 0; i < 4; i++) await verify(ofApi.body.verificationId, wrong);
    expect(await jsonOf(await verify(ofApi.body.verificationId, code))).toMatchObject({
      code: 'verification_expired',
    });
    expect((await verify('emv_unknown', '123456')).status).toBe(404);

    // The inbox's owner links the API customer: same customer, no second one, no customer.created.
    const linked = await signIn(client, { email: apiEmail });
    expect(linked.response.status).toBe(200);
    const customers = await api('GET', `/v1/sdk/customers?email=${encodeURIComponent(apiEmail)}`);
    expect(customers.body.data.map((c: { id: string }) => c.id)).toEqual([apiCustomer.body.id]);
    const tokens = await exchange(client, (await jsonOf(linked.response)).redirectUrl, linked.verifier);
    expect(
      JSON.parse(Buffer.from(tokens.access_token.split('.')[1] as string, 'base64url').toString()).sub,
    ).toBe(apiCustomer.body.id);
    const events = await harness.pool.query(
      `SELECT 1 FROM outbox_events WHERE type = 'customer.created' AND payload->'data'->'object'->>'id' = $1`,
      [apiCustomer.body.id],
    );
    expect(events.rows).toHaveLength(1);

    // And on a known account the code sets the new password: the same flow is the password reset.
    const reset = await signIn(client, { email: known, password: 'second password' });
    expect(reset.response.status).toBe(200);
    expect(
      (await signIn(client, { email: known, intent: 'logins', password: 'second password' })).response.status,
    ).toBe(200);
    expect(
      (await signIn(client, { email: known, intent: 'logins', password: 'first password' })).response.status,
    ).toBe(401);
  });

  it('moves the sign-in to an address the customer proves in the portal, and to no one else’s', async () => {
    const client = await register();
    const old = newEmail();
    expect((await signIn(client, { email: old, password: 'my password' })).response.status).toBe(200);
    const taken = newEmail();
    expect((await signIn(client, { email: taken, password: 'other password' })).response.status).toBe(200);
    const customer = (await api('GET', `/v1/sdk/customers?email=${encodeURIComponent(old)}`)).body.data[0];
    const form = (url: string, fields: Record<string, string>, cookie: string) =>
      harness.controlPlane.app.inject({
        method: 'POST',
        url,
        payload: new URLSearchParams(fields).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      });
    const link = (await api('POST', '/v1/sdk/portal-sessions', { customerRef: customer.id })).body
      .url as string;
    const opened = await harness.controlPlane.app.inject({ method: 'GET', url: new URL(link).pathname });
    const cookie = String(opened.headers['set-cookie']).split(';')[0] ?? '';
    const portal = await harness.controlPlane.app.inject({
      method: 'GET',
      url: '/portal',
      headers: { cookie },
    });
    const csrf = /name="csrf" value="([^"]*)"/.exec(portal.body)?.[1] ?? '';
    const change = async (email: string) => {
      const mailed = mailbox.countFor(email);
      const asked = await form('/portal/email', { csrf, email }, cookie);
      const codeId = decodeURIComponent(String(asked.headers.location).split('code=')[1] ?? '');
      const code = await mailbox.codeFor(email, mailed);
      return form('/portal/email/confirm', { csrf, codeId, code }, cookie);
    };
    // Another account signs in with this address: the change is refused, and nothing moves.
    const refused = await change(taken);
    expect([refused.statusCode, refused.body.includes('is the sign-in of another account')]).toEqual([
      400,
      true,
    ]);
    expect((await api('GET', `/v1/sdk/customers/${customer.id}`)).body.email).toBe(old);
    expect(
      (await signIn(client, { email: old, intent: 'logins', password: 'my password' })).response.status,
    ).toBe(200);
    // A new address of their own: they sign in with it, and no longer with the old one.
    const fresh = newEmail();
    expect((await change(fresh)).headers.location).toBe('/portal?done=email');
    expect(
      (await signIn(client, { email: fresh, intent: 'logins', password: 'my password' })).response.status,
    ).toBe(200);
    expect(
      (await signIn(client, { email: old, intent: 'logins', password: 'my password' })).response.status,
    ).toBe(401);
    expect(
      (await signIn(client, { email: taken, intent: 'logins', password: 'other password' })).response.status,
    ).toBe(200);
  });

  it('finishes one sign-up once however many times its code is sent at once, and makes one customer of racing sign-ups', async () => {
    const client = await register();
    const email = newEmail();
    const a = await startSignup(client, email);
    const b = await startSignup(client, email);
    const codeA = await mailbox.codeFor(email, 0);
    const codeB = await mailbox.codeFor(email, 1);
    const answers = await Promise.all([
      ...Array.from({ length: 8 }, () => verify(a.body.verificationId, codeA)),
      ...Array.from({ length: 8 }, () => verify(b.body.verificationId, codeB)),
    ]);
    expect(answers.map((r) => r.status).sort()).toEqual([...Array(2).fill(200), ...Array(14).fill(400)]);
    expect((await api('GET', `/v1/sdk/customers?email=${encodeURIComponent(email)}`)).body.data).toHaveLength(
      1,
    );
  });

  it('mails at most five codes to one address in 15 minutes, then answers 429 with Retry-After', async () => {
    const client = await register();
    const email = newEmail();
    for (let i = 0; i < 5; i++) expect((await startSignup(client, email)).status).toBe(202);
    const blocked = await startSignup(client, email);
    expect(blocked.status).toBe(429);
    expect(blocked.body.code).toBe('too_many_attempts');
    expect(mailbox.countFor(email)).toBe(5);
    clock.advance(16 * 60_000);
    expect((await startSignup(client, email)).status).toBe(202);
  });

  it('rotates refresh tokens; a used one presented again revokes the sign-in and every token it issued', async () => {
    const client = await register();
    const { response, verifier } = await signIn(client);
    const first = await exchange(
      client,
      ((await response.json()) as { redirectUrl: string }).redirectUrl,
      verifier,
    );
    const refresh = (token: string) =>
      oauth
        .refreshTokenGrantRequest(as, client, oauth.None(), token, insecure)
        .then((r) => oauth.processRefreshTokenResponse(as, client, r));
    const second = await refresh(first.refresh_token as string);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    const third = await refresh(second.refresh_token as string);
    // The first refresh token again: a reuse. It fails, and so does the newest one.
    await expect(refresh(first.refresh_token as string)).rejects.toMatchObject({ error: 'invalid_grant' });
    await expect(refresh(third.refresh_token as string)).rejects.toMatchObject({ error: 'invalid_grant' });
    // The proxies learn it: every access token of the grant issued until now is refused.
    const claims = JSON.parse(
      Buffer.from((third.access_token as string).split('.')[1] as string, 'base64url').toString(),
    );
    const revoked = JSON.parse(
      (await harness.snapshots.get(`mcpmeter:snapshot:revoked-grant:${claims.sid}`)) ?? '{}',
    );
    expect(revoked.before).toBeGreaterThanOrEqual(claims.iat);
  });

  it('revokes a sign-in by its refresh token (RFC 7009), for the client it was issued to only', async () => {
    const client = await register();
    const other = await register();
    const { response, verifier } = await signIn(client);
    const tokens = await exchange(
      client,
      ((await response.json()) as { redirectUrl: string }).redirectUrl,
      verifier,
    );
    const revoke = (by: oauth.Client) =>
      oauth
        .revocationRequest(as, by, oauth.None(), tokens.refresh_token as string, insecure)
        .then((r) => oauth.processRevocationResponse(r));
    await revoke(other);
    const still = await oauth
      .refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token as string, insecure)
      .then((r) => oauth.processRefreshTokenResponse(as, client, r));
    await revoke(client);
    await expect(
      oauth
        .refreshTokenGrantRequest(as, client, oauth.None(), still.refresh_token as string, insecure)
        .then((r) => oauth.processRefreshTokenResponse(as, client, r)),
    ).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('gets no token with a wrong verifier, a plain challenge or none at all', async () => {
    const client = await register();
    const { response } = await signIn(client);
    const { redirectUrl } = (await response.json()) as { redirectUrl: string };
    await expect(exchange(client, redirectUrl, oauth.generateRandomCodeVerifier())).rejects.toMatchObject({
      error: 'invalid_grant',
    });
    const plain = await signIn(client, { challenge: oauth.generateRandomCodeVerifier().slice(0, 43) });
    // A 43-character verifier used as its own challenge (plain) never matches its S256 digest.
    expect(plain.response.status).toBe(200);
    const authorize = await fetch(
      `${base}/v1/customer/auth/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: client.client_id,
        redirect_uri: REDIRECT,
        code_challenge: 'x'.repeat(43),
        code_challenge_method: 'plain',
        resource,
        state: 's',
      })}`,
      { redirect: 'manual' },
    );
    expect(authorize.status).toBe(303);
    const back = new URL(authorize.headers.get('location') as string);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('error')).toBe('invalid_request');
    expect(back.searchParams.get('state')).toBe('s');
    const missing = await tokenForm({
      grant_type: 'authorization_code',
      client_id: client.client_id,
      code: new URL(redirectUrl).searchParams.get('code') as string,
      redirect_uri: REDIRECT,
    });
    expect(missing.status).toBe(400);
    expect((await jsonOf(missing)).error).toBe('invalid_request');
  });

  it('spends a code once: a replay revokes what it issued, and twelve exchanges at once issue at most one token', async () => {
    const client = await register();
    const exchange = (code: string, verifier: string) =>
      tokenForm({
        grant_type: 'authorization_code',
        client_id: client.client_id,
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
      });
    const codeOf = async (response: Response) =>
      new URL(((await response.json()) as { redirectUrl: string }).redirectUrl).searchParams.get(
        'code',
      ) as string;
    const refreshWith = (refreshToken: string) =>
      tokenForm({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: refreshToken });

    // One after the other: the first exchange gets a token, the replay is refused and revokes it.
    const first = await signIn(client);
    const code = await codeOf(first.response);
    const issued = await exchange(code, first.verifier);
    expect(issued.status).toBe(200);
    const { refresh_token } = (await issued.json()) as { refresh_token: string };
    const replay = await exchange(code, first.verifier);
    expect([replay.status, (await jsonOf(replay)).error]).toEqual([400, 'invalid_grant']);
    const revoked = await refreshWith(refresh_token);
    expect([revoked.status, (await jsonOf(revoked)).error]).toEqual([400, 'invalid_grant']);

    // Twelve at once: the code is spent once. A concurrent replay may revoke the sign-in before the
    // winner issues (RFC 6749 §4.1.2 then wants nothing issued), so at most one token comes back,
    // every other answer is invalid_grant, and whatever was issued is revoked.
    const second = await signIn(client);
    const racedCode = await codeOf(second.response);
    const answers = await Promise.all(Array.from({ length: 12 }, () => exchange(racedCode, second.verifier)));
    const won = answers.filter((a) => a.status === 200);
    expect(won.length).toBeLessThanOrEqual(1);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused).toHaveLength(12 - won.length);
    for (const answer of refused) expect((await jsonOf(answer)).error).toBe('invalid_grant');
    for (const answer of won) {
      const raced = (await answer.json()) as { refresh_token: string };
      expect((await refreshWith(raced.refresh_token)).status).toBe(400);
    }
  });

  it('never redirects to a URI the client did not register, and refuses unsafe ones at registration', async () => {
    const client = await register();
    const ask = (redirect: string, clientId = client.client_id) =>
      fetch(
        `${base}/v1/customer/auth/authorize?${new URLSearchParams({
          response_type: 'code',
          client_id: clientId,
          redirect_uri: redirect,
          code_challenge: 'x'.repeat(43),
          code_challenge_method: 'S256',
          resource,
        })}`,
        { redirect: 'manual' },
      );
    for (const attempt of [
      'https://evil.example/callback',
      'http://127.0.0.1:7777/callback/../../evil',
      'http://127.0.0.1.evil.example:7777/callback',
      `${REDIRECT}#frag`,
    ]) {
      const answer = await ask(attempt);
      expect(answer.status, attempt).toBe(400);
      expect(answer.headers.get('location'), attempt).toBeNull();
      expect(answer.headers.get('content-type')).toContain('text/html');
    }
    const unknown = await ask(REDIRECT, 'cli_nobody');
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get('location')).toBeNull();
    // Loopback redirect URIs may use any port (RFC 8252 §7.3).
    const page = await ask('http://127.0.0.1:45678/callback');
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Sign-in Co');

    for (const uri of [
      'http://evil.example/cb',
      'javascript:alert(1)',
      'myapp:/cb',
      'https://x.example/cb#f',
    ]) {
      const refused = await fetch(`${base}/v1/customer/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: [uri] }),
      });
      expect(refused.status, uri).toBe(400);
      expect((await jsonOf(refused)).error).toBe('invalid_redirect_uri');
    }
    expect((await register({ redirect_uris: ['com.example.app:/oauth'] })).client_id).toMatch(/^cli_/);
  });

  it('authenticates confidential clients by the method they registered', async () => {
    const basic = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    const post = await register({ token_endpoint_auth_method: 'client_secret_post' });
    const secret = (c: oauth.Client) => c.client_secret as string;
    const run = async (client: oauth.Client, auth: oauth.ClientAuth) => {
      const { response, verifier } = await signIn(client);
      const params = oauth.validateAuthResponse(
        as,
        client,
        new URL(((await response.json()) as { redirectUrl: string }).redirectUrl),
        'st-1',
      );
      return oauth
        .authorizationCodeGrantRequest(as, client, auth, params, REDIRECT, verifier, insecure)
        .then((r) => oauth.processAuthorizationCodeResponse(as, client, r));
    };
    await expect(run(basic, oauth.ClientSecretBasic(secret(basic)))).resolves.toMatchObject({ scope: 'mcp' });
    await expect(run(post, oauth.ClientSecretPost(secret(post)))).resolves.toMatchObject({ scope: 'mcp' });
    await expect(run(basic, oauth.ClientSecretPost(secret(basic)))).rejects.toMatchObject({
      error: 'invalid_client',
    });
    await expect(run(post, oauth.ClientSecretPost('cs_wrong'))).rejects.toMatchObject({
      error: 'invalid_client',
    });
    await expect(run(basic, oauth.None())).rejects.toMatchObject({ error: 'invalid_client' });
  });

  it('answers the token endpoint in JSON too, with RFC 6749 errors for what it cannot take', async () => {
    const json = (body: unknown) =>
      fetch(`${base}/v1/customer/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await jsonOf(await json({ grant_type: 'password', client_id: 'cli_x' }))).error).toBe(
      'invalid_client',
    );
    const client = await register();
    expect((await jsonOf(await json({ grant_type: 'password', client_id: client.client_id }))).error).toBe(
      'unsupported_grant_type',
    );
    expect((await jsonOf(await json({ grant_type: 5, client_id: client.client_id }))).error).toBe(
      'invalid_request',
    );
    const twice = await fetch(`${base}/v1/customer/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=refresh_token&client_id=${client.client_id}&refresh_token=a&refresh_token=b`,
    });
    expect(twice.status).toBe(400);
    expect((await jsonOf(twice)).error).toBe('invalid_request');
    for (const body of ['grant_type=a%00b', 'a%00b=1', '%00=%00']) {
      const nul = await fetch(`${base}/v1/customer/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
      expect(nul.status, body).toBe(400);
    }
    const { response, verifier } = await signIn(client);
    const code = new URL(((await response.json()) as { redirectUrl: string }).redirectUrl).searchParams.get(
      'code',
    );
    const ok = await json({
      grant_type: 'authorization_code',
      client_id: client.client_id,
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    expect(await jsonOf(ok)).toMatchObject({ token_type: 'Bearer', scope: 'mcp' });
  });

  it('throttles sign-in per account with 429 and Retry-After, before the password is even checked', async () => {
    const client = await register();
    const email = newEmail();
    expect((await signIn(client, { email, password: 'the real password' })).response.status).toBe(200);
    for (let i = 0; i < 5; i++)
      expect(
        (await signIn(client, { email, intent: 'logins', password: `guess ${i}` })).response.status,
      ).toBe(401);
    const blocked = await signIn(client, { email, intent: 'logins', password: 'the real password' });
    expect(blocked.response.status).toBe(429);
    expect(Number(blocked.response.headers.get('retry-after'))).toBeGreaterThan(0);
    // The window passes: the right password works again.
    clock.advance(16 * 60_000);
    expect(
      (await signIn(client, { email, intent: 'logins', password: 'the real password' })).response.status,
    ).toBe(200);
  });

  it('gets no token for a code older than 60 seconds', async () => {
    const client = await register();
    const { response, verifier } = await signIn(client);
    const { redirectUrl } = (await response.json()) as { redirectUrl: string };
    clock.advance(61_000);
    await expect(exchange(client, redirectUrl, verifier)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('refuses a resource that names no MCP server here', async () => {
    const client = await register();
    const answer = await fetch(`${base}/v1/customer/auth/logins`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_id: client.client_id,
        redirect_uri: REDIRECT,
        email: newEmail(),
        password: 'x',
        code_challenge: 'x'.repeat(43),
        code_challenge_method: 'S256',
        resource: `http://127.0.0.1:9/mcp/${subdomain}-missing`,
      }),
    });
    expect(answer.status).toBe(400);
    expect(await jsonOf(answer)).toMatchObject({
      code: 'invalid_authorization_request',
      error: 'invalid_target',
    });
  });
});

describe('customer sign-in: Client ID Metadata Documents', () => {
  /** Publishes a document at `path` and answers its URL, the client_id. */
  const publish = (
    path: string,
    document: (clientId: string) => Record<string, unknown>,
    headers?: Record<string, string>,
  ) => {
    const clientId = `${documentBase}${path}`;
    documents.set(path, {
      body: JSON.stringify(document(clientId)),
      ...(headers === undefined ? {} : { headers }),
    });
    return clientId;
  };
  const authorizePage = (clientId: string, redirectUri = REDIRECT) =>
    fetch(
      `${base}/v1/customer/auth/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirectUri,
        code_challenge: 'x'.repeat(43),
        code_challenge_method: 'S256',
        resource,
        state: 's',
      })}`,
      { redirect: 'manual' },
    );

  it('is advertised, and an https client_id works with no registration: page, code, token, refresh', async () => {
    expect(as.client_id_metadata_document_supported).toBe(true);
    const clientId = publish(
      '/apps/assistant.json',
      (id) => ({
        client_id: id,
        client_name: 'Metadata Assistant',
        redirect_uris: [REDIRECT],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      }),
      { 'cache-control': 'max-age=600' },
    );
    const page = await authorizePage(clientId);
    expect(page.status).toBe(200);
    // The page names the application and the host that published its metadata.
    expect(await page.text()).toContain(`Metadata Assistant (127.0.0.1:${new URL(documentBase).port})`);

    const client: oauth.Client = { client_id: clientId, token_endpoint_auth_method: 'none' };
    const { response, verifier } = await signIn(client);
    expect(response.status).toBe(200);
    const tokens = await exchange(client, (await jsonOf(response)).redirectUrl, verifier);
    expect(
      JSON.parse(Buffer.from(tokens.access_token.split('.')[1] as string, 'base64url').toString()),
    ).toMatchObject({
      client_id: clientId,
      aud: resource,
    });
    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(
        as,
        client,
        oauth.None(),
        tokens.refresh_token as string,
        insecure,
      ),
    );
    expect(refreshed.access_token).toEqual(expect.any(String));
    // Cached for the answer's max-age: two more authorizations, no new fetch; past it, one.
    const before = fetches.get('/apps/assistant.json');
    await authorizePage(clientId);
    await authorizePage(clientId);
    expect(fetches.get('/apps/assistant.json')).toBe(before);
    clock.advance(11 * 60_000);
    expect((await authorizePage(clientId)).status).toBe(200);
    expect(fetches.get('/apps/assistant.json')).toBe((before ?? 0) + 1);
  });

  it('refuses documents that do not describe the URL they are at, carry secrets, or redirect elsewhere, on the page', async () => {
    const cases: Array<[string, (id: string) => Record<string, unknown>, string]> = [
      [
        '/bad/other-id.json',
        () => ({ client_id: 'https://elsewhere.example/app.json', redirect_uris: [REDIRECT] }),
        'names another client_id',
      ],
      [
        '/bad/secret.json',
        (id) => ({ client_id: id, redirect_uris: [REDIRECT], client_secret: 'x' }),
        'must not carry a client secret',
      ],
      [
        '/bad/basic.json',
        (id) => ({
          client_id: id,
          redirect_uris: [REDIRECT],
          token_endpoint_auth_method: 'client_secret_basic',
        }),
        'token_endpoint_auth_method none',
      ],
      [
        '/bad/evil-redirect.json',
        (id) => ({ client_id: id, redirect_uris: ['http://evil.example/cb'] }),
        'redirect URI that is not allowed',
      ],
    ];
    for (const [path, document, words] of cases) {
      const answer = await authorizePage(publish(path, document));
      expect(answer.status, path).toBe(400);
      expect(answer.headers.get('location'), path).toBeNull();
      expect(await answer.text(), path).toContain(words);
    }
    const big = publish('/bad/big.json', (id) => ({
      client_id: id,
      redirect_uris: [REDIRECT],
      client_name: 'x'.repeat(20_000),
    }));
    expect(await (await authorizePage(big)).text()).toContain('larger than 16 KiB');
    // A redirect URI the document does not list is never redirected to.
    const listed = publish('/ok/listed.json', (id) => ({ client_id: id, redirect_uris: [REDIRECT] }));
    const elsewhere = await authorizePage(listed, 'http://127.0.0.1:7777/other');
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.headers.get('location')).toBeNull();
    // Missing documents and URLs that cannot be client ids.
    expect(await (await authorizePage(`${documentBase}/missing.json`)).text()).toContain('HTTP 404');
    expect(await (await authorizePage(`${documentBase}/`)).text()).toContain('must have a path');
    expect(await (await authorizePage(`${documentBase}/a/../b.json`)).text()).toContain(
      'must not have . or .. segments',
    );
  });

  it('fetches documents through the SSRF guard: internal addresses and odd ports are refused before any dial', async () => {
    for (const clientId of [
      'https://10.0.0.1/app.json',
      'https://[::ffff:7f00:1]/app.json',
      'https://169.254.169.254/latest/meta-data.json',
      'https://example.com:22/app.json',
    ]) {
      const answer = await authorizePage(clientId);
      expect(answer.status, clientId).toBe(400);
      expect(await answer.text(), clientId).toContain('cannot be fetched');
    }
  });
});

describe('customer sign-in: what the service logged', () => {
  it('logged no error for any request above: every refusal was an answer, not a thrown handler', () => {
    expect(errorsLogged).toEqual([]);
  });
});
