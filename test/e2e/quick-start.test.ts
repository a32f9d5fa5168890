import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '@mcp-meter/contracts/kit';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectorCli } from '../helpers/inspector';
import { pollUntil } from '../helpers/poll';
import { root, type Service, spawnService, waitHealthy } from '../helpers/processes';
import { codeBlockOf, type Filling, fill, type Step, stepsOf } from '../helpers/runbook';
import { type StripeMock, startStripeMock } from '../helpers/stripe-mock';

/** How a step's HTTP status is told apart from its body: curl writes it last. */
const STATUS = '__status__';

/**
 * The README's quick start and the shell blocks of docs/ that talk to the service, run as
 * written against `npm start` on a fresh data directory (with the one setting the README asks
 * for a local origin, OUTBOUND_ALLOWED_HOSTS=127.0.0.1, and Stripe served by stripe-mock). Each
 * placeholder is filled as a reader would (test/helpers/runbook.ts); every call must answer 2xx
 * and every admin command succeed, so a document that stops working fails here.
 */
describe('the documents, run as written', () => {
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let service: Service;
  let stripe: StripeMock;
  let receiver: Server;
  let filling: Filling;

  beforeAll(async () => {
    stripe = await startStripeMock({ payments: 'succeed' });
    receiver = createServer((_request, response) => response.writeHead(200).end());
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const address = receiver.address();
    const example = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    dataDir = mkdtempSync(join(tmpdir(), 'mcpmeter-quickstart-'));
    chmodSync(dataDir, 0o755); // embedded PostgreSQL runs as user postgres and must reach DATA_DIR
    const port = await freePort();
    env = { ...process.env, LOG_LEVEL: 'warn' };
    for (const name of ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'CLICKHOUSE_URL', 'SERVICES'])
      delete env[name];
    Object.assign(env, {
      DATA_DIR: join(dataDir, 'data'),
      PORT: String(port),
      PROXY_PORT: String(await freePort()),
      OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
      STRIPE_API_URL: stripe.url,
    });
    service = spawnService('npm', ['start'], { env, logDir: dataDir, name: 'npm-start' });
    await waitHealthy(`http://127.0.0.1:${port}`, service, 240_000);
    filling = {
      host: `127.0.0.1:${port}`,
      stripeKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc',
      example,
      answers: [],
    };
  });
  afterAll(async () => {
    await service?.stop();
    receiver?.close();
    await stripe?.close();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  /** Runs one step in bash from the repository, as a reader's shell would; its answer. */
  const run = (step: Step) =>
    new Promise<{ code: number; out: string; err: string; command: string }>((resolve) => {
      const command = fill(step, filling);
      // curl gives its status after the body, so a 4xx is not mistaken for success.
      const script = `curl() { command curl -sS -w '\\n${STATUS} %{http_code}' "$@"; }\n${command}`;
      execFile('bash', ['-c', script], { cwd: root, env, timeout: 120_000 }, (error, out, err) =>
        resolve({
          code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1,
          out,
          err,
          command,
        }),
      );
    });

  const runAll = async (steps: Step[]) => {
    expect(steps.length).toBeGreaterThan(0);
    for (const step of steps) {
      const { code, out, err, command } = await run(step);
      const what = `${step.where}\n${command}\n${out}\n${err}`;
      expect(code, what).toBe(0);
      const status = out.match(new RegExp(`${STATUS} (\\d{3})\\s*$`))?.[1];
      if (command.startsWith('curl')) expect(Number(status), what).toBeGreaterThanOrEqual(200);
      if (command.startsWith('curl')) expect(Number(status), what).toBeLessThan(300);
      filling.answers.unshift(out);
      filling.sandboxKey = out.match(/"sandboxKey":\s*"(sk_test_[^"]+)"/)?.[1] ?? filling.sandboxKey;
      filling.liveKey = out.match(/"liveKey":\s*"(sk_live_[^"]+)"/)?.[1] ?? filling.liveKey;
    }
  };

  it("runs the README's quick start", async () => {
    const steps = stepsOf('README.md', { after: 'create a provider and use its keys' });
    // The provider, the catalog, usage, a purchase and its invoices, money, an MCP server,
    // Stripe, webhooks and a customer token: all of it.
    expect(steps.length).toBeGreaterThanOrEqual(19);
    await runAll(steps);
  });

  it('answers npm run admin -- --help with the usage, and an unknown command with it and exit 2', async () => {
    const admin = (args: string[]) =>
      new Promise<{ code: number; out: string; err: string }>((resolve) =>
        execFile('npm', ['run', '-s', 'admin', '--', ...args], { cwd: root, env }, (error, out, err) =>
          resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, out, err }),
        ),
      );
    for (const args of [['--help'], ['-h'], ['help'], []]) {
      const { code, out } = await admin(args);
      expect(code, args.join(' ')).toBe(0);
      expect(out).toMatch(/^usage: npm run admin -- <command>\n {2}provider create/);
    }
    // The same CLI from the services' build, as the container image runs it (no TypeScript loader).
    const built = await new Promise<{ code: number; out: string }>((resolve) =>
      execFile(process.execPath, ['deploy/admin.mjs', '--help'], { cwd: root, env }, (error, out) =>
        resolve({ code: error === null ? 0 : 1, out }),
      ),
    );
    expect(built.code).toBe(0);
    expect(built.out).toMatch(/^usage: npm run admin -- <command>\n {2}provider create/);
    // What the Helm chart's migration Job runs: the service migrated at its start, so nothing is left.
    const migrated = await admin(['db', 'migrate']);
    expect(migrated.code, migrated.err).toBe(0);
    expect(JSON.parse(migrated.out)).toEqual({ applied: [] });
    // The console's first owner, as the admin CLI makes one, signs in with the password it printed.
    const provider = JSON.parse((await admin(['provider', 'create', '--name', 'Console Co'])).out) as {
      id: string;
    };
    const added = await admin([
      'member',
      'add',
      '--provider',
      provider.id,
      '--email',
      'Owner@Example.com',
      '--role',
      'owner',
    ]);
    expect(added.code, added.err).toBe(0);
    const owner = JSON.parse(added.out) as { email: string; role: string; password: string };
    expect(owner).toMatchObject({ email: 'owner@example.com', role: 'owner', password: expect.any(String) });
    const signedIn = await fetch(`http://${filling.host}/v1/console/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: owner.email, password: owner.password }),
    });
    expect(signedIn.status).toBe(201);
    expect(await signedIn.json()).toMatchObject({ role: 'owner', provider: { id: provider.id } });
    expect(
      (
        await admin([
          'member',
          'add',
          '--provider',
          provider.id,
          '--email',
          'x@example.com',
          '--role',
          'boss',
        ])
      ).code,
    ).toBe(2);
    const unknown = await admin(['provider', 'destroy']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/^unknown command "provider destroy"\nusage:/);
  });

  it("runs docs/payments.md's commands", async () => {
    await runAll(stepsOf('docs/payments.md'));
  });

  it('npm run demo sells an example MCP server that the MCP SDK calls until the paywall', async () => {
    const demo = spawnService('npm', ['run', '-s', 'demo', '--', '--json'], {
      env,
      logDir: dataDir,
      name: 'demo',
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        demo.child.stdout?.on('data', (chunk: Buffer) => {
          out += chunk.toString('utf8');
          if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
        });
        demo.child.once('exit', (code) => reject(new Error(`demo exited with ${code}`)));
      });
      const summary = JSON.parse(line) as {
        mcpProxyUrl: string;
        accessToken: string;
        inspectorCommand: string;
      };
      // The Inspector command it prints, run as printed (with this machine's Inspector for npx).
      const inspector = await inspectorCli();
      const printed = summary.inspectorCommand.replace(
        'npx @modelcontextprotocol/inspector',
        inspector.command,
      );
      const { stdout } = await promisify(execFile)('bash', ['-c', printed], { timeout: 60_000 });
      expect(JSON.parse(stdout)).toMatchObject({
        content: [{ type: 'text', text: expect.stringMatching(/^Paris: /) }],
      });
      const client = new Client({ name: 'quick-start', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(summary.mcpProxyUrl), {
          requestInit: { headers: { authorization: `Bearer ${summary.accessToken}` } },
        }),
      );
      const tools = await client.listTools();
      expect(tools.tools.map((tool) => tool.name).sort()).toEqual(['add', 'forecast']);
      const texts: string[] = [];
      for (let i = 0; i < 3; i++) {
        const result = (await client.callTool({ name: 'forecast', arguments: { city: 'Paris' } })) as {
          isError?: boolean;
          content: Array<{ text?: string }>;
        };
        texts.push(`${result.isError === true ? 'refused' : 'ran'}: ${result.content[0]?.text ?? ''}`);
      }
      await client.close();
      expect(texts[1]).toBe(texts[0]);
      expect(texts[0]).toMatch(/^ran: Paris: \w+, \d+ °C$/);
      // The free plan's three calls are used (Inspector's and two): the next offers the checkout.
      expect(texts[2]).toMatch(/^refused: .*\/checkout\//s);
    } finally {
      // npm itself answers a signal with exit code 1; the demo's own failures start with "demo:".
      await demo.stop('SIGTERM');
      expect(readFileSync(demo.logFile, 'utf8')).not.toContain('demo:');
    }
  });

  it("runs docs/webhooks.md's receivers as written, and they verify what the service delivers", async () => {
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`http://${filling.host}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${filling.sandboxKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).then(async (answer) => ({
        status: answer.status,
        body: (await answer.json()) as Record<string, unknown>,
      }));
    const dir = join(root, 'test', '.docs-blocks');
    mkdirSync(dir, { recursive: true });
    for (const [name, after, secrets] of [
      ['fastify-receiver', 'A whole receiver with Fastify', (secret: string) => ({ WEBHOOK_SECRET: secret })],
      [
        'express-receiver',
        'The same with Express',
        (secret: string) => ({ WEBHOOK_SECRETS: `${secret},whsec_theOldOneStillSigning` }),
      ],
    ] as const) {
      const port = await freePort();
      const endpoint = await api('POST', '/v1/webhook_endpoints', {
        url: `http://127.0.0.1:${port}/webhooks`,
      });
      expect(endpoint.status, name).toBe(201);
      const file = join(dir, `${name}.ts`);
      writeFileSync(file, codeBlockOf('docs/webhooks.md', after).text);
      const receiver = spawnService(process.execPath, ['--import', './deploy/loader.mjs', file], {
        env: { ...env, PORT: String(port), ...secrets(endpoint.body.secret as string) },
        logDir: dataDir,
        name,
      });
      try {
        // The log file appears once the stream opens it.
        const log = () => (existsSync(receiver.logFile) ? readFileSync(receiver.logFile, 'utf8') : '');
        for (let i = 0; i < 200 && !log().includes('listening'); i++) {
          expect(receiver.child.exitCode, log()).toBeNull();
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const sent = await api('POST', `/v1/ui/webhooks/${endpoint.body.id}/test`);
        expect(sent.body, `${name}: ${log()}`).toMatchObject({ succeeded: true, statusCode: 200 });
        // The receiver's line reaches its log file a moment after its answer reached the service.
        await pollUntil(
          async () => log(),
          (text) => /received payment\.succeeded evt_/.test(text),
          {
            what: `${name} logged the delivery`,
            timeoutMs: 10_000,
          },
        );
        // A request the service did not sign is refused.
        const forged = await fetch(`http://127.0.0.1:${port}/webhooks`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'sv-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`,
          },
          body: JSON.stringify({ id: 'evt_forged', type: 'payment.succeeded' }),
        });
        expect(forged.status, name).toBe(401);
      } finally {
        await receiver.stop();
        rmSync(file, { force: true });
      }
    }
  });

  it("runs docs/sdk.md's first program with the SDK, as written", async () => {
    const block = codeBlockOf('docs/sdk.md', '## Calls');
    // In the repository (ignored by git), where @mcp-meter/sdk resolves as in a provider's project.
    const dir = join(root, 'test', '.docs-blocks');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'sdk-calls.ts');
    writeFileSync(file, fill(block, filling));
    const answer = await new Promise<{ code: number; out: string; err: string }>((resolve) =>
      execFile(
        process.execPath,
        ['--import', './deploy/loader.mjs', file],
        { cwd: root, env: { ...env, MCP_METER_KEY: filling.sandboxKey }, timeout: 60_000 },
        (error, out, err) => resolve({ code: error === null ? 0 : 1, out, err }),
      ),
    );
    rmSync(file, { force: true });
    expect(answer.code, `${block.where}\n${answer.out}\n${answer.err}`).toBe(0);
    // The refused email is caught and printed as the block says, and the customers listed.
    expect(answer.out).toContain('400 validation_failed');
    expect(answer.out).toMatch(/cus_[0-9a-z]{26}/);
  });

  it("runs docs/sdk.md's paywalled Express API as written: a customer with a plan is let through", async () => {
    const block = codeBlockOf('docs/sdk.md', 'A whole API with Express');
    const dir = join(root, 'test', '.docs-blocks');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'sdk-paywall.ts');
    writeFileSync(file, fill(block, filling));
    const port = await freePort();
    const api = spawnService(process.execPath, ['--import', './deploy/loader.mjs', file], {
      env: {
        ...env,
        PORT: String(port),
        MCP_METER_KEY: filling.sandboxKey,
        MCP_METER_URL: `http://${filling.host}`,
      },
      logDir: dataDir,
      name: 'sdk-paywall',
    });
    try {
      const log = () => (existsSync(api.logFile) ? readFileSync(api.logFile, 'utf8') : '');
      for (let i = 0; i < 200 && !log().includes('listening'); i++) {
        expect(api.child.exitCode, log()).toBeNull();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const forecast = (customer?: string) =>
        fetch(`http://127.0.0.1:${port}/forecast`, {
          headers: customer === undefined ? {} : { 'x-customer': customer },
        });
      // user-1 took a plan of the product in the README's quick start.
      const admitted = await forecast('user-1');
      expect(admitted.status, log()).toBe(200);
      expect(await admitted.json()).toEqual({ city: 'Lisbon', high: 24 });
      expect((await forecast('somebody-else')).status).toBe(403);
      expect((await forecast()).status).toBe(401);
    } finally {
      await api.stop();
      rmSync(file, { force: true });
    }
  });
});
