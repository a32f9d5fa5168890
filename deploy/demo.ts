/**
 * `npm run demo`: a provider selling an example MCP server in under a minute, on the service
 * `npm start` runs. It makes a provider (the admin CLI), a product with a free plan of 3 calls
 * and a paid plan, starts the bundled example origin (deploy/demo-origin.ts) and puts it behind
 * the proxy, makes a customer and an access token, and prints the MCP URL with commands to call
 * it. The origin runs until the command is stopped (Ctrl-C). `--json` prints one JSON object.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { readServiceUrls } from '@mcp-meter/contracts/kit';
import { createMeter, MeterApiError, orThrow } from '@mcp-meter/sdk';
import { startDemoOrigin } from './demo-origin';

const root = resolve(import.meta.dirname, '..');
const { values } = parseArgs({ options: { json: { type: 'boolean', default: false } } });
const say = (line: string) => {
  if (!values.json) process.stdout.write(`${line}\n`);
};

/** Where the running service is: what it recorded in its data directory, else PORT / PROXY_PORT. */
function serviceUrls() {
  const dataDir = resolve(process.env.DATA_DIR ?? join(root, 'data'));
  const recorded = process.env.PORT === undefined ? readServiceUrls(dataDir) : undefined;
  return {
    api: recorded?.controlPlaneUrl ?? `http://127.0.0.1:${process.env.PORT ?? '8080'}`,
    proxy: recorded?.proxyUrl ?? `http://127.0.0.1:${process.env.PROXY_PORT ?? '8081'}`,
  };
}

const admin = (args: string[]) =>
  new Promise<Record<string, string>>((done, fail) =>
    execFile(
      'npm',
      ['run', '-s', 'admin', '--', ...args],
      { cwd: root, env: process.env },
      (error, out, err) =>
        error === null
          ? done(JSON.parse(out) as Record<string, string>)
          : fail(new Error(err || error.message)),
    ),
  );

async function main(): Promise<void> {
  const urls = serviceUrls();
  const healthy = await fetch(`${urls.api}/healthz`).then(
    (answer) => answer.ok,
    () => false,
  );
  if (!healthy)
    throw new Error(
      `no service answers at ${urls.api}: start it first (OUTBOUND_ALLOWED_HOSTS=127.0.0.1 npm start lets it call the demo origin on this machine)`,
    );
  const provider = await admin(['provider', 'create', '--name', 'Demo Weather Co']);
  const sandboxKey = provider.sandboxKey as string;
  const meter = createMeter({ apiKey: sandboxKey, baseUrl: urls.api });
  const product = await orThrow(meter.POST('/v1/ui/products', { body: { name: 'Demo Weather' } }));
  const plan = (body: { name: string; price: number; limit: number; default?: boolean }) =>
    orThrow(
      meter.POST('/v1/ui/products/{id}/plans', {
        params: { path: { id: product.id } },
        body: { type: 'recurring', billingCycle: 'monthly', currency: 'usd', ...body },
      }),
    );
  const free = await plan({ name: 'Free', price: 0, limit: 3, default: true });
  const pro = await plan({ name: 'Pro', price: 900, limit: 1000 });
  const origin = await startDemoOrigin();
  let server: { mcpProxyUrl: string; subdomain: string };
  try {
    server = await orThrow(
      meter.POST('/v1/ui/mcp-servers', {
        // Subdomains are unique across providers: each run takes a new one.
        body: {
          name: `weather-${randomBytes(3).toString('hex')}`,
          url: origin.url,
          productId: product.id,
          defaultPlanId: free.id,
        },
      }),
    );
  } catch (error) {
    await origin.close();
    if (error instanceof MeterApiError && error.status === 400)
      throw new Error(
        `the service refused the demo origin ${origin.url} (${error.problem.detail}): start it with OUTBOUND_ALLOWED_HOSTS=127.0.0.1 npm start`,
      );
    throw error;
  }
  await orThrow(
    meter.POST('/v1/sdk/customers', { body: { externalRef: 'demo-user', email: 'demo@example.com' } }),
  );
  const token = await orThrow(
    meter.POST('/v1/sdk/customers/{ref}/tokens', { params: { path: { ref: 'demo-user' } }, body: {} }),
  );
  const inspector = `npx @modelcontextprotocol/inspector --cli ${server.mcpProxyUrl} --transport http --header "Authorization: Bearer ${token.accessToken}" --method tools/call --tool-name forecast --tool-arg city=Paris`;
  const summary = {
    providerId: provider.id,
    sandboxKey,
    productId: product.id,
    plans: { free: free.id, pro: pro.id },
    origin: origin.url,
    mcpProxyUrl: server.mcpProxyUrl,
    customerRef: 'demo-user',
    accessToken: token.accessToken,
    inspectorCommand: inspector,
  };
  if (values.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  say(`Provider ${provider.id}, sandbox key ${sandboxKey} (shown once: keep it)`);
  say(`Product "Demo Weather": plan Free (3 calls a month, the default) and Pro ($9.00 a month)`);
  say(`Example MCP server (tools forecast, add) at ${origin.url}, behind the proxy at:\n`);
  say(`  ${server.mcpProxyUrl}\n`);
  say(`Customer demo-user's access token:\n\n  ${token.accessToken}\n`);
  say('Call it with MCP Inspector (Node 22 or later): three calls run, the fourth answers with the paywall');
  say(`  ${inspector}\n`);
  say(
    `Usage so far: curl -s "${urls.api}/ui/meters/requests/usage?customerRef=demo-user" -H "authorization: Bearer ${sandboxKey}"`,
  );
  say('\nThe example origin runs until you stop this command (Ctrl-C).');
  await new Promise<void>((done) => {
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  await origin.close();
}

main().then(
  // The client connections the SDK kept open do not hold the process once the origin is closed.
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`demo: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
