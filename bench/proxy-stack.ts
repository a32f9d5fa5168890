import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { NODE_FLAGS } from '../deploy/node-flags';
import { headersOf, installTools, type OriginKind, scenario, type Target, type Tools } from './harness/load';
import { api, type BenchProcesses, firstLine, waitFor } from './harness/processes';
import { RELAY_GROUP, TARGETS, type TargetName } from './targets';

/** Every target of the proxy bench, up and answering, and what the run reads besides. */
export interface BenchStack {
  tools: Tools;
  targets: Record<TargetName, Target>;
  /**
   * F: the relay (bench/load/relay.c), a TCP hop that passes bytes and nothing else, before the
   * origin. Only the latency trials call it (a hop with no HTTP work, in their arrangement).
   */
  relay: Target;
  /** The infrastructure's URLs (REDIS_URL, ...). */
  urls: Record<string, string>;
  /** The split stack's control plane, its provider's key, and the customer and product of B2/B3. */
  base: string;
  key: string;
  split: { customer: string; product: string };
  originPort: number;
  /** B3's MCP server (its usage is grouped by it). */
  b3Server: { id: string; subdomain: string };
  /** The metered proxy's process (profiled with --profile), and where its profile goes. */
  b3Process: ChildProcess;
  profileDir: string;
  /** The split stack's environment (its proxies' too): another proxy of it starts with this. */
  env: NodeJS.ProcessEnv;
  /**
   * Stops the origin and starts `kind` on its port: every hop keeps dialling that port, and its
   * pooled connections to the one stopped are closed with it. The Node origin counts calls
   * afresh once started again.
   */
  useOrigin(kind: OriginKind): Promise<void>;
}

/**
 * Builds the services, starts the infrastructure, the split stack (control plane with ingest,
 * proxies B2 and B3), the all-in-one service, the origin, the bare hops and nginx, sells each
 * proxy's customer a free plan, and checks that every target answers a tool result.
 */
export async function startBenchStack(
  procs: BenchProcesses,
  options: { profile: boolean },
): Promise<BenchStack> {
  const root = procs.root;
  const CALL = scenario(root, 'tool-call.json');
  const MODERN_CALL = scenario(root, 'tool-call-2026-07-28.json');
  // The services' build is made (or found up to date) before anything is timed.
  execFileSync(process.execPath, [join(root, 'deploy', 'build.mjs')], { stdio: 'inherit' });
  const tools = installTools(root);
  const urls = await procs.startInfra();

  const cpPort = await freePort();
  const base = `http://127.0.0.1:${cpPort}`;
  const env = {
    ...process.env,
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: join(procs.work, 'data'),
    DATABASE_URL: urls.DATABASE_URL,
    REDIS_URL: urls.REDIS_URL,
    KAFKA_BROKERS: urls.KAFKA_BROKERS,
    SECRET_KEY: 'ef'.repeat(32),
    PORT: String(cpPort),
    CONTROL_PLANE_URL: base,
    // Each proxy target is one process, pinned to its core (the figures are per process).
    PROXY_WORKERS: '1',
  };
  // The services as `npm start` runs them: from their build (made at the start of the run).
  const serve = [...NODE_FLAGS, 'deploy/start.mjs'];
  procs.spawnLogged('control-plane', process.execPath, serve, { ...env, SERVICES: 'control-plane,ingest' });
  const nodeOrigin = ['--import', './deploy/loader.mjs', 'bench/load/servers.ts'];
  let origin = procs.spawnLogged('origin', process.execPath, nodeOrigin, env);
  const { originPort } = JSON.parse(await firstLine(origin)) as { originPort: number };
  const useOrigin = async (kind: OriginKind) => {
    await procs.stopLogged(origin);
    origin =
      kind === 'c'
        ? procs.spawnLogged('origin', tools.ORIGIN, [String(originPort)], env)
        : procs.spawnLogged('origin', process.execPath, nodeOrigin, {
            ...env,
            ORIGIN_PORT: String(originPort),
          });
    // Both print their port once listening.
    await firstLine(origin);
  };
  const passthrough = procs.spawnLogged(
    'passthrough',
    process.execPath,
    ['--import', './deploy/loader.mjs', 'bench/load/passthrough.ts'],
    { ...env, ORIGIN_URL: `http://127.0.0.1:${originPort}/bp` },
  );
  const passthroughPort = (JSON.parse(await firstLine(passthrough)) as { port: number }).port;
  // BPn: the same hop with a lean HTTP/1.1 client over net instead of undici (a bench prototype).
  const passthroughNet = procs.spawnLogged(
    'passthrough-net',
    process.execPath,
    ['--import', './deploy/loader.mjs', 'bench/load/passthrough.ts'],
    { ...env, ORIGIN_URL: `http://127.0.0.1:${originPort}/bpn`, PASSTHROUGH_CLIENT: 'net' },
  );
  const passthroughNetPort = (JSON.parse(await firstLine(passthroughNet)) as { port: number }).port;

  // N: nginx as a keep-alive reverse proxy, one worker (as one Node process is one core).
  const nginxPort = await freePort();
  const nginxDir = join(procs.work, 'nginx');
  execFileSync('mkdir', ['-p', join(nginxDir, 'logs')]);
  writeFileSync(
    join(nginxDir, 'nginx.conf'),
    `daemon off;
master_process off;
worker_processes 1;
error_log ${join(nginxDir, 'logs', 'error.log')} warn;
pid ${join(nginxDir, 'nginx.pid')};
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${nginxDir};
  proxy_temp_path ${nginxDir};
  upstream origin { server 127.0.0.1:${originPort}; keepalive 256; }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      proxy_pass http://origin/n;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const relay = procs.spawnLogged(RELAY_GROUP, tools.RELAY, [String(originPort)], env);
  const relayPort = (JSON.parse(await firstLine(relay)) as { port: number }).port;
  procs.spawnLogged('nginx', tools.NGINX, ['-p', nginxDir, '-c', join(nginxDir, 'nginx.conf')], env);
  await waitFor(`${base}/healthz`);

  /** A product with a free plan of a real limit, MCP servers for `paths`, a customer and a token. */
  const seller = async (apiBase: string, key: string, paths: string[]) => {
    const product = await api<{ id: string }>(apiBase, key, 'POST', '/v1/ui/products', { name: 'Bench' });
    const plan = await api<{ id: string }>(apiBase, key, 'POST', `/v1/ui/products/${product.id}/plans`, {
      name: 'Free',
      type: 'recurring',
      billingCycle: 'monthly',
      price: 0,
      currency: 'usd',
      limit: 1_000_000_000,
    });
    const servers: Array<{ id: string; subdomain: string }> = [];
    for (const path of paths)
      servers.push(
        await api(apiBase, key, 'POST', '/v1/ui/mcp-servers', {
          name: `bench${path.replaceAll('/', '-')}`,
          url: `http://127.0.0.1:${originPort}${path}`,
          productId: product.id,
          defaultPlanId: plan.id,
        }),
      );
    const customer = await api<{ reference: string }>(apiBase, key, 'POST', '/v1/sdk/customers', {});
    // A purchase of the free plan: what the limit check (and the proxy's gate) count against.
    const activated = await api<{ status: string }>(apiBase, key, 'POST', '/v1/sdk/activate', {
      customerRef: customer.reference,
      planRef: plan.id,
    });
    if (activated.status !== 'activated')
      throw new Error(`the bench customer was not activated: ${activated.status}`);
    const { accessToken } = await api<{ accessToken: string }>(
      apiBase,
      key,
      'POST',
      `/v1/sdk/customers/${customer.reference}/tokens`,
      { expiresInSeconds: 86_400 },
    );
    return { servers, customer: customer.reference, product: product.id, token: accessToken };
  };
  const key = (await procs.admin(env)).sandboxKey;
  const split = await seller(base, key, ['/b2', '/b3']);
  const [b2Server, b3Server] = split.servers as [
    { id: string; subdomain: string },
    { id: string; subdomain: string },
  ];

  const proxyPorts = [await freePort(), await freePort()];
  procs.spawnLogged('proxy-b2', process.execPath, serve, {
    ...env,
    SERVICES: 'proxy',
    PROXY_PORT: String(proxyPorts[0]),
    PROXY_METERING_ENABLED: 'false',
    PROXY_SPILL_DIR: join(procs.work, 'spill-b2'),
  });
  const profileDir = join(procs.work, 'profile');
  const b3Process = procs.spawnLogged(
    'proxy-b3',
    process.execPath,
    [...(options.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...serve],
    {
      ...env,
      SERVICES: 'proxy',
      PROXY_PORT: String(proxyPorts[1]),
      PROXY_SPILL_DIR: join(procs.work, 'spill-b3'),
    },
  );
  for (const port of proxyPorts) await waitFor(`http://127.0.0.1:${port}/healthz`);

  // A: `npm start` as it runs on embedded defaults, a data directory of its own.
  const aPort = await freePort();
  const aProxyPort = await freePort();
  const aEnv = {
    ...process.env,
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    LOG_LEVEL: 'warn',
    DATA_DIR: join(procs.work, 'all-in-one'),
    PORT: String(aPort),
    PROXY_PORT: String(aProxyPort),
    // Its proxy in its own process, as the service's whole CPU per call is measured from it
    // (the workers, which `npm start` runs on more cores, are measured as W2).
    PROXY_WORKERS: '1',
  };
  procs.spawnLogged('all-in-one', process.execPath, serve, aEnv);
  await waitFor(`http://127.0.0.1:${aPort}/healthz`, 240);
  await waitFor(`http://127.0.0.1:${aProxyPort}/healthz`);
  const aKey = (await procs.admin(aEnv)).sandboxKey;
  const allInOne = await seller(`http://127.0.0.1:${aPort}`, aKey, ['/a']);

  const targets: Record<TargetName, Target> = {
    B1: { url: `http://127.0.0.1:${originPort}/b1`, token: '', call: CALL },
    N: { url: `http://127.0.0.1:${nginxPort}/`, token: '', call: CALL },
    BP: { url: `http://127.0.0.1:${passthroughPort}/`, token: '', call: CALL },
    BPn: { url: `http://127.0.0.1:${passthroughNetPort}/`, token: '', call: CALL },
    B2: {
      url: `http://127.0.0.1:${proxyPorts[0]}/mcp/${b2Server.subdomain}`,
      token: split.token,
      call: CALL,
    },
    B3: {
      url: `http://127.0.0.1:${proxyPorts[1]}/mcp/${b3Server.subdomain}`,
      token: split.token,
      call: CALL,
    },
    B3m: {
      url: `http://127.0.0.1:${proxyPorts[1]}/mcp/${b3Server.subdomain}`,
      token: split.token,
      call: MODERN_CALL,
    },
    A: {
      url: `http://127.0.0.1:${aProxyPort}/mcp/${allInOne.servers[0]?.subdomain}`,
      token: allInOne.token,
      call: CALL,
    },
  };
  const relayTarget: Target = { url: `http://127.0.0.1:${relayPort}/f`, token: '', call: CALL };
  // Every target answers a tool result before anything is measured.
  for (const [name, t] of [...TARGETS.map((n) => [n, targets[n]] as const), ['F', relayTarget] as const]) {
    const answer = await fetch(t.url, {
      method: 'POST',
      headers: headersOf(t),
      body: JSON.stringify(t.call.body),
    });
    const text = await answer.text();
    if (answer.status !== 200 || !text.includes('"result"') || text.includes('payment_required'))
      throw new Error(`${name} did not answer a tool result: ${answer.status} ${text.slice(0, 300)}`);
  }

  return {
    tools,
    targets,
    relay: relayTarget,
    urls,
    base,
    key,
    split: { customer: split.customer, product: split.product },
    originPort,
    b3Server,
    b3Process,
    profileDir,
    env,
    useOrigin,
  };
}
