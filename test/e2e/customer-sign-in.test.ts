import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { launchChromium } from '../helpers/browser';
import { conformanceRunner, failures, readResults } from '../helpers/conformance';
import { suffix } from '../helpers/flows';
import { startMailbox } from '../helpers/mailbox';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { pythonWith } from '../helpers/python';
import { type Seller, type SplitStack, startSeller, startSplitStack } from '../helpers/seller';

const PASSWORD = 'a long enough password';

/**
 * An OAuth client provider as an MCP host application keeps one: registration, tokens and the
 * PKCE verifier in memory; "opening the browser" only notes the URL, which the test opens in
 * Chromium.
 */
class HostApplication implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  constructor(readonly redirectUrl: string) {}
  get clientMetadata(): OAuthClientMetadata {
    return {
      redirect_uris: [this.redirectUrl],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'E2E Assistant',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
}

const claimsOf = (token: string) =>
  JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as Record<string, string>;

/**
 * A customer goes from "add this MCP URL" to a metered, gated tool call with no provider
 * involvement: the official MCP SDK client discovers the authorization server through the proxy,
 * registers, the customer signs up on the hosted page in Chromium, and the SDK exchanges the code.
 * Control plane + ingest and a proxy as processes, on real PostgreSQL, Redis, Kafka and ClickHouse.
 */
describe('customer sign-in through the proxy, with the MCP SDK client and a browser', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let baseUrl: string;
  let proxyPort: number;
  let origin: McpOrigin;
  let api: Seller['api'];
  let serverA: { subdomain: string; mcpProxyUrl: string };
  let serverB: { subdomain: string; mcpProxyUrl: string };
  let liveServer: { subdomain: string; mcpProxyUrl: string };
  let browser: Browser;
  let receiver: Server;
  let callbackUrl: string;
  let mailbox: Awaited<ReturnType<typeof startMailbox>>;
  let python: string;

  beforeAll(async () => {
    // The Python MCP SDK, the second client nobody here wrote (installed once per machine).
    python = await pythonWith('python-mcp-2.3.0', ['mcp==2.3.0']);
    mailbox = await startMailbox();
    stack = await startSplitStack({
      name: 'signin',
      infra,
      secretKey: 'cd'.repeat(32),
      extra: ({ proxyUrl }) => ({
        PROXY_PUBLIC_URL: proxyUrl,
        SMTP_URL: mailbox.url,
        MAIL_FROM: 'Sign-in Tools <no-reply@example.com>',
      }),
    });
    ({ baseUrl, proxyPort } = stack);
    await stack.ready;

    origin = await startMcpOrigin();
    // Two sandbox products and a live one of one provider, each free by default with a paid plan.
    const plans = [
      { name: 'Free', price: 0, limit: 2, default: true },
      { name: 'Pro', price: 900, limit: 1000 },
    ];
    const calculator = await startSeller(stack, { provider: 'Sign-in Tools', product: 'Calculator', plans });
    api = calculator.api;
    const { provider } = calculator;
    const other = await startSeller(stack, { provider, product: 'Other', plans });
    const live = await startSeller(stack, { provider, product: 'Live calculator', plans, mode: 'live' });
    serverA = await calculator.register(origin.url, { defaultPlan: 'Free' });
    serverB = await other.register(origin.url, { defaultPlan: 'Free' });
    liveServer = await live.register(origin.url, { defaultPlan: 'Free' });
    expect(serverA.mcpProxyUrl).toBe(`http://127.0.0.1:${proxyPort}/mcp/${serverA.subdomain}`);

    // Where the authorization response lands: the host application's loopback listener.
    receiver = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>Signed in</title><p>You can close this window.</p>');
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    callbackUrl = `http://127.0.0.1:${address !== null && typeof address === 'object' ? address.port : 0}/callback`;
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    receiver?.close();
    await stack?.stop();
    await origin?.close();
    await mailbox?.close();
  });

  /**
   * Connects the SDK client to `url` with only the host application: the first connect is
   * refused (401 with the metadata URL), the SDK discovers, registers and asks for the browser;
   * the customer fills a form there; the SDK exchanges the code; the second connect works.
   */
  const connectWithSignIn = async (
    url: string,
    app: HostApplication,
    fill: (page: import('playwright-core').Page) => Promise<void>,
  ) => {
    const first = new Client({ name: 'e2e-host', version: '1.0.0' });
    await expect(
      first.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: app })),
    ).rejects.toThrow(UnauthorizedError);
    expect(app.authorizationUrl?.origin).toBe(baseUrl);
    const page = await browser.newPage();
    try {
      await page.goto(app.authorizationUrl?.toString() as string);
      await fill(page);
      await page.waitForURL((u) => u.toString().startsWith(callbackUrl), { timeout: 30_000 });
      const landed = new URL(page.url());
      expect(landed.searchParams.get('iss')).toBe(baseUrl);
      const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: app });
      await transport.finishAuth(landed.searchParams.get('code') as string);
    } finally {
      await page.close();
    }
    const client = new Client({ name: 'e2e-host', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: app }));
    return client;
  };
  /** The hosted page's sign-up: the form, then the code from the mail the SMTP server received. */
  const signUpOnPage = async (page: import('playwright-core').Page, email: string) => {
    const mailed = mailbox.countFor(email);
    await page.getByLabel('Email', { exact: true }).nth(1).fill(email);
    await page.getByLabel('Password (at least 8 characters)', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    expect(await page.locator('main').innerText()).toContain(email);
    await page.getByLabel('Code').fill(await mailbox.codeFor(email, mailed));
    await page.getByRole('button', { name: 'Continue' }).click();
  };
  const usageOf = (customerRef: string) =>
    api<{ records: number; groups?: Array<{ value: string; records: number }> }>(
      'GET',
      `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=outcome`,
    );
  const call = (url: string, token: string) =>
    fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'raw', version: '1' },
        },
      }),
    });

  it('the SDK client signs up in the browser, then its tool calls are metered to that customer and gated by the plan', async () => {
    // Discovery as clients see it: the proxy's challenge points at the server's metadata.
    const challenge = await call(serverA.mcpProxyUrl, '');
    expect(challenge.status).toBe(401);
    const header = challenge.headers.get('www-authenticate') ?? '';
    expect(header).toContain(
      `resource_metadata="http://127.0.0.1:${proxyPort}/.well-known/oauth-protected-resource/mcp/${serverA.subdomain}"`,
    );
    expect(header).toContain('scope="mcp"');
    const metadata = await (
      await fetch(
        `http://127.0.0.1:${proxyPort}/.well-known/oauth-protected-resource/mcp/${serverA.subdomain}`,
      )
    ).json();
    expect(metadata).toMatchObject({ resource: serverA.mcpProxyUrl, authorization_servers: [baseUrl] });

    const app = new HostApplication(callbackUrl);
    const email = `signup-${suffix()}@example.com`;
    const client = await connectWithSignIn(serverA.mcpProxyUrl, app, async (page) => {
      expect(await page.locator('h1').innerText()).toBe('Sign-in Tools');
      expect(await page.locator('main').innerText()).toContain('E2E Assistant wants to use');
      await signUpOnPage(page, email);
    });
    expect(mailbox.mails.at(-1)?.from).toBe('no-reply@example.com');
    const customerRef = claimsOf(app.saved?.access_token as string).sub as string;
    expect(customerRef).toMatch(/^cus_/);
    const result = (await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })) as {
      content: Array<{ text: string }>;
      isError?: boolean;
    };
    expect(result.content[0]?.text).toBe('5');
    await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } });
    // The free plan allows 2 calls: the third gets the paywall, not the origin.
    const before = origin.calls.get('add') ?? 0;
    const refused = (await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })) as {
      content: Array<{ text: string }>;
      isError?: boolean;
    };
    expect(refused.isError).toBe(true);
    expect(refused.content[0]?.text).toContain('/checkout/');
    expect(origin.calls.get('add') ?? 0).toBe(before);
    await client.close();

    const usage = await pollUntil(
      () => usageOf(customerRef),
      (u) => (u.body.groups ?? []).reduce((n, g) => n + g.records, 0) >= 3,
      { timeoutMs: 60_000 },
    );
    expect(usage.body.groups?.sort((a, b) => a.value.localeCompare(b.value))).toEqual([
      { value: 'paywall', records: 1 },
      { value: 'success', records: 2 },
    ]);
    const customer = await api<{ email: string }>('GET', `/v1/sdk/customers/${customerRef}`);
    expect(customer.body.email).toBe(email);
  });

  it('signs in again with the account, and each token opens only its own server, environment and customer', async () => {
    const email = `again-${suffix()}@example.com`;
    const signUp = new HostApplication(callbackUrl);
    const first = await connectWithSignIn(serverB.mcpProxyUrl, signUp, (page) => signUpOnPage(page, email));
    await first.close();
    // Another host application, the same customer: the sign-in form this time.
    const app = new HostApplication(callbackUrl);
    const client = await connectWithSignIn(serverA.mcpProxyUrl, app, async (page) => {
      await page.getByLabel('Email', { exact: true }).first().fill(email);
      await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
    });
    await client.close();
    const token = app.saved?.access_token as string;
    expect(claimsOf(token).sub).toBe(claimsOf(signUp.saved?.access_token as string).sub);

    expect((await call(serverA.mcpProxyUrl, token)).status).toBe(200);
    // A token for server A is refused by server B of the same provider (RFC 8707 audience).
    const other = await call(serverB.mcpProxyUrl, token);
    expect(other.status).toBe(401);
    expect(other.headers.get('www-authenticate')).toContain('error="invalid_token"');
    // A sandbox token on a live server: as if the server did not exist.
    expect((await call(liveServer.mcpProxyUrl, token)).status).toBe(404);

    // Revoking the sign-in (RFC 7009) reaches the proxy: the access token stops working.
    const revoked = await fetch(`${baseUrl}/v1/customer/auth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        token: app.saved?.refresh_token as string,
        client_id: app.info?.client_id as string,
      }),
    });
    expect(revoked.status).toBe(200);
    await pollUntil(
      () => call(serverA.mcpProxyUrl, token),
      (answer) => answer.status === 401,
      { timeoutMs: 30_000 },
    );
    // Deleting the customer ends its other sign-ins too.
    const otherToken = signUp.saved?.access_token as string;
    expect((await call(serverB.mcpProxyUrl, otherToken)).status).toBe(200);
    expect((await api('DELETE', `/v1/sdk/customers/${claimsOf(otherToken).sub}`)).status).toBe(200);
    await pollUntil(
      () => call(serverB.mcpProxyUrl, otherToken),
      (answer) => answer.status === 401,
      { timeoutMs: 30_000 },
    );
    const refresh = await fetch(`${baseUrl}/v1/customer/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: signUp.saved?.refresh_token as string,
        client_id: signUp.info?.client_id as string,
      }),
    });
    expect(refresh.status).toBe(400);
  });

  it('a customer the provider created through the API signs up by the mailed code, and a forgotten password is reset the same way', async () => {
    const email = `known-${suffix()}@example.com`;
    const created = await api<{ id: string }>('POST', '/v1/sdk/customers', { email, name: 'Known' });
    expect(created.status).toBe(201);
    const app = new HostApplication(callbackUrl);
    const first = await connectWithSignIn(serverA.mcpProxyUrl, app, (page) => signUpOnPage(page, email));
    await first.close();
    // The account is the provider's customer, not a new one.
    expect(claimsOf(app.saved?.access_token as string).sub).toBe(created.body.id);

    const again = new HostApplication(callbackUrl);
    const client = await connectWithSignIn(serverA.mcpProxyUrl, again, async (page) => {
      const mailed = mailbox.countFor(email);
      await page.getByText('Forgot your password?').click();
      await page.getByLabel('Email', { exact: true }).nth(2).fill(email);
      await page.getByLabel('New password (at least 8 characters)').fill('a brand new password');
      await page.getByRole('button', { name: 'Email me a code' }).click();
      await page
        .getByLabel('Code')
        .fill('000000' === (await mailbox.codeFor(email, mailed)) ? '111111' : '000000');
      await page.getByRole('button', { name: 'Continue' }).click();
      expect(await page.getByRole('alert').innerText()).toContain('That code is not right; 4 tries left');
      await page.getByLabel('Code').fill(await mailbox.codeFor(email, mailed));
      await page.getByRole('button', { name: 'Continue' }).click();
    });
    await client.close();
    expect(claimsOf(again.saved?.access_token as string).sub).toBe(created.body.id);
    const login = (password: string) =>
      fetch(`${baseUrl}/v1/customer/auth/logins`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          client_id: again.info?.client_id,
          redirect_uri: callbackUrl,
          email,
          password,
          code_challenge: 'x'.repeat(43),
          code_challenge_method: 'S256',
          resource: serverA.mcpProxyUrl,
        }),
      });
    expect((await login('a brand new password')).status).toBe(200);
    expect((await login(PASSWORD)).status).toBe(401);
  });

  it('the Python MCP SDK signs in by itself (discovery, registration, browser, code) and its tool call is metered', async () => {
    const email = `python-${suffix()}@example.com`;
    const child = spawn(
      python,
      [join(import.meta.dirname, 'python', 'oauth_client.py'), serverA.mcpProxyUrl, callbackUrl],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const lines: string[] = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      lines.push(...parts);
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const line = (prefix: string) =>
        pollUntil(
          async () => lines.find((l) => l.startsWith(prefix)),
          (found) => found !== undefined || child.exitCode !== null,
          { timeoutMs: 60_000 },
        ).then((found) => {
          if (found === undefined) throw new Error(`python exited without ${prefix}: ${stderr}`);
          return found.slice(prefix.length + 1);
        });
      const authorizationUrl = new URL(await line('AUTHORIZE'));
      expect(authorizationUrl.origin).toBe(baseUrl);
      expect(authorizationUrl.searchParams.get('resource')).toBe(serverA.mcpProxyUrl);
      expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
      const page = await browser.newPage();
      try {
        await page.goto(authorizationUrl.toString());
        expect(await page.locator('main').innerText()).toContain('Python MCP SDK wants to use');
        await signUpOnPage(page, email);
        await page.waitForURL((u) => u.toString().startsWith(callbackUrl), { timeout: 30_000 });
        child.stdin.write(`${page.url()}\n`);
      } finally {
        await page.close();
      }
      const result = JSON.parse(await line('RESULT')) as Record<string, unknown>;
      expect(await exited).toBe(0);
      expect(result).toMatchObject({
        text: '42',
        aud: serverA.mcpProxyUrl,
        clientId: expect.stringMatching(/^cli_/),
      });
      expect(result.isError).toBeFalsy();
      const customerRef = result.sub as string;
      const customer = await api<{ email: string }>('GET', `/v1/sdk/customers/${customerRef}`);
      expect(customer.body.email).toBe(email);
      const usage = await pollUntil(
        () => usageOf(customerRef),
        (u) => (u.body.groups ?? []).reduce((n, g) => n + g.records, 0) >= 1,
        { timeoutMs: 60_000 },
      );
      expect(usage.body.groups).toEqual([{ value: 'success', records: 1 }]);
    } finally {
      child.kill();
    }
  });

  it("passes the official conformance suite's authorization server scenarios, Chromium signing in", async () => {
    const { node, cli } = await conformanceRunner();
    const port = await freePort();
    const redirectUri = `http://127.0.0.1:${port}/callback`;
    // The suite needs a client registered for its callback: a public one (PKCE, no secret).
    const registered = await fetch(`${baseUrl}/v1/customer/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'MCP conformance suite',
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      }),
    });
    expect(registered.status).toBe(201);
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    const output = mkdtempSync(join(tmpdir(), 'mcpmeter-conformance-auth-'));
    const args = [
      'authorization',
      '--url',
      baseUrl,
      '--client-id',
      clientId,
      '--resource',
      serverA.mcpProxyUrl,
    ];
    const child = spawn(node, [cli, ...args, '--port', String(port), '--output-dir', output], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      // The runner prints the authorization request and waits for the browser to come back.
      const authorizationUrl = await pollUntil(
        async () => stdout.split('\n').find((line) => line.startsWith(`${baseUrl}/`)),
        (found) => found !== undefined || child.exitCode !== null,
        { timeoutMs: 60_000, what: 'the authorization URL the suite prints' },
      );
      expect(authorizationUrl, stdout).toBeDefined();
      const page = await browser.newPage();
      try {
        await page.goto(authorizationUrl as string);
        expect(await page.locator('main').innerText()).toContain('MCP conformance suite wants to use');
        await signUpOnPage(page, `conformance-${suffix()}@example.com`);
        await page.waitForURL((u) => u.toString().startsWith(redirectUri), { timeout: 30_000 });
      } finally {
        await page.close();
      }
      expect(await exited, stdout).toBe(0);
      const results = readResults(output);
      expect([...results.keys()].sort()).toEqual([
        'authorization-code-grant',
        'authorization-server-metadata-endpoint',
      ]);
      expect(failures(results)).toEqual([]);
      const grant = results.get('authorization-code-grant') ?? [];
      expect(grant.map((check) => check.status)).toEqual(['SUCCESS']);
    } finally {
      child.kill();
      rmSync(output, { recursive: true, force: true });
    }
  });
});
