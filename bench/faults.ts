/**
 * The fault matrix (issue 32, shared/design/reliability.md) as a program: each fault is caused
 * under load on loopback, and what clients got, what the origin executed and what was recorded
 * and admitted are reconciled exactly. Results go to bench/results/faults.{md,json}.
 *
 *   npm run faults                 # every fault below, about 4 minutes
 *   npm run faults -- --only proxy-kill,pg-stop
 *   npm run faults -- --only proxy-kill --results-dir /tmp/x    # CI's subset
 *
 * Exits 1 when any fault lost a served call, passed a limit, stranded allowance (counted calls
 * beyond the billable ones) or answered a 5xx.
 *
 * Faults:
 *   aio-kill    the all-in-one service SIGKILLed under load, started again on its data directory
 *   proxy-kill  a proxy of the distributed stack SIGKILLed under load, started again
 *   pg-stop     PostgreSQL stopped for OUTAGE_SECONDS under API load
 *   redis-stop  Redis stopped for OUTAGE_SECONDS under proxy load
 *   cp-kill     control plane + ingest SIGKILLed and started again at once
 *   redis-flush a customer at its limit, then Redis FLUSHALL and a restart of every process
 *   kafka-kill  the Kafka broker SIGKILLed under proxy load, started again OUTAGE_SECONDS later
 *   webhook-kill control plane SIGKILLed while webhook deliveries are in flight, started again
 *
 * Starts PostgreSQL, Redis and Kafka on free loopback ports (deploy/infra.sh), sends traffic only
 * to 127.0.0.1, bounded in calls and time, and stops everything it started.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  createWriteStream,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, processAlive } from '@mcp-meter/contracts/kit';
import { KafkaUsageSettlement } from '@mcp-meter/ingest';
import { Kafka, logLevel } from 'kafkajs';
import { NODE_FLAGS } from '../deploy/node-flags';
import { type McpOrigin, startMcpOrigin } from '../test/helpers/mcp-origin';

const root = resolve(import.meta.dirname, '..');
const { values: args } = parseArgs({
  options: {
    only: { type: 'string', default: '' },
    'outage-seconds': { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    'results-dir': { type: 'string', default: join(resolve(import.meta.dirname, '..'), 'bench', 'results') },
  },
});
const OUTAGE_SECONDS = Number(args['outage-seconds']);
const CLIENTS = Number(args.clients);
const log = (line: string) => process.stderr.write(`[faults] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const work = mkdtempSync(join(tmpdir(), 'mcpmeter-faults-'));
chmodSync(work, 0o755);
// The services as `npm start` runs them: from their build (deploy/build.mjs, made before the first start).
const SERVE = [...NODE_FLAGS, 'deploy/start.mjs'];
/** Issue 32: the API answers within this long of a restart, under load. */
const API_BACK_SECONDS = 5;

// ------------------------------------------------------------------ processes

interface Proc {
  child: ChildProcess;
  name: string;
  exited: Promise<number | null>;
}
const procs = new Set<Proc>();
/** The infra.sh stacks this run started (their servers outlive it unless stopped). */
const startedInfra = new Set<NodeJS.ProcessEnv>();

function startProc(name: string, env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, SERVE, {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const file = createWriteStream(join(work, `${name}.log`), { flags: 'a' });
  child.stdout?.pipe(file);
  child.stderr?.pipe(file);
  const proc: Proc = {
    child,
    name,
    exited: new Promise((done) => child.once('exit', (code) => done(code))),
  };
  procs.add(proc);
  void proc.exited.then(() => procs.delete(proc));
  return proc;
}

async function stopProc(proc: Proc, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.pid === undefined) return;
  // The node process only (not its group): a SIGKILL leaves what it started, as a real crash does.
  proc.child.kill(signal);
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 30_000);
  await proc.exited;
  clearTimeout(timer);
}

async function healthy(url: string, proc: Proc, seconds = 120): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited: see ${work}/${proc.name}.log`);
    try {
      if ((await fetch(`${url}/healthz`)).status === 200) return (Date.now() - started) / 1000;
    } catch {}
    if (Date.now() - started > seconds * 1000) throw new Error(`${url} not healthy in ${seconds} s`);
    await sleep(100);
  }
}

/**
 * deploy/infra.sh, without blocking this process: the origin and the client loops live here, and
 * a synchronous wait of seconds would stall calls in flight (a fault of the harness, not the system).
 */
async function infra(env: NodeJS.ProcessEnv, component: string, verb: 'start' | 'stop'): Promise<void> {
  // stdio ignored: the servers it starts keep no pipe of ours open.
  const child = spawn('bash', [join(root, 'deploy', 'infra.sh'), component, verb], {
    env,
    stdio: 'ignore',
    timeout: 180_000,
  });
  const code = await new Promise<number | null>((done) => child.once('exit', done));
  if (code !== 0) throw new Error(`infra.sh ${component} ${verb} exited with ${code}`);
}

async function api<T>(base: string, key: string, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

function admin(env: NodeJS.ProcessEnv): { sandboxKey: string } {
  return JSON.parse(
    execFileSync('npm', ['run', '-s', 'admin', '--', 'provider', 'create', '--name', 'Faults'], {
      cwd: root,
      env,
      encoding: 'utf8',
    }),
  ) as { sandboxKey: string };
}

interface Seller {
  key: string;
  customer: string;
  product: string;
  mcpUrl: string;
  token: string;
}

/** A product with a free plan of `limit` calls, its MCP server on `origin`, an activated customer and a token. */
async function seller(
  base: string,
  env: NodeJS.ProcessEnv,
  origin: McpOrigin,
  limit: number,
): Promise<Seller> {
  const { sandboxKey: key } = admin(env);
  const product = await api<{ id: string }>(base, key, 'POST', '/v1/ui/products', { name: 'Faults' });
  const plan = await api<{ id: string }>(base, key, 'POST', `/v1/ui/products/${product.id}/plans`, {
    name: 'Free',
    type: 'recurring',
    billingCycle: 'monthly',
    price: 0,
    currency: 'usd',
    limit,
  });
  const server = await api<{ mcpProxyUrl: string }>(base, key, 'POST', '/v1/ui/mcp-servers', {
    name: `faults-${Date.now()}`,
    url: origin.url,
    productId: product.id,
    defaultPlanId: plan.id,
  });
  const customer = await api<{ reference: string }>(base, key, 'POST', '/v1/sdk/customers', {});
  await api(base, key, 'POST', '/v1/sdk/activate', { customerRef: customer.reference, planRef: plan.id });
  const { accessToken } = await api<{ accessToken: string }>(
    base,
    key,
    'POST',
    `/v1/sdk/customers/${customer.reference}/tokens`,
    { expiresInSeconds: 3600 },
  );
  return {
    key,
    customer: customer.reference,
    product: product.id,
    mcpUrl: server.mcpProxyUrl,
    token: accessToken,
  };
}

/**
 * Calls admitted against the limit so far (stored records plus open leases), records stored
 * (refusals included) and the billable total of the requests meter (refusals never count).
 */
async function accounting(
  base: string,
  s: Seller,
): Promise<{ used: number; records: number; billable: number }> {
  const { used } = await api<{ used: number }>(base, s.key, 'POST', '/v1/sdk/limits', {
    customerRef: s.customer,
    productRef: s.product,
    consume: false,
  });
  const { records, total } = await api<{ records: number; total: number }>(
    base,
    s.key,
    'GET',
    `/ui/meters/requests/usage?customerRef=${s.customer}`,
  );
  return { used, records, billable: total };
}

/**
 * A row's reconciled columns: what was stored and counted against the calls clients were served.
 * `limit` 0: no limit applies, so nothing can overshoot.
 */
function reconciled(served: number, books: Awaited<ReturnType<typeof accounting>>, limit: number) {
  return {
    recorded: books.records,
    billable: books.billable,
    admitted: books.used,
    limit,
    lost: Math.max(0, served - books.billable),
    overshoot: limit > 0 ? Math.max(0, served - limit) : 0,
    stranded: Math.max(0, books.used - books.billable),
  };
}

/** A series' value on a Prometheus text page (`name{labels}` as the page writes it). */
function metricValue(page: string, series: string): number | undefined {
  const escaped = series.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const value = new RegExp(`^${escaped} (\\d+)$`, 'm').exec(page)?.[1];
  return value === undefined ? undefined : Number(value);
}

/**
 * Everything the proxy served is stored: its emitter has handed every record to the bus (none
 * queued, none in a publish), and the ingest consumer group has committed past the bus's end
 * offsets, i.e. written what was there to ClickHouse. Reading the books before that compares
 * served calls with a pipeline still in motion (ingest flushes every second: two equal reads
 * 1 s apart are no proof it is done).
 */
async function drained(proxyUrl: string, brokers: string | undefined): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const page = await fetch(`${proxyUrl}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    const metric = (name: string) => metricValue(page, name) ?? Number.NaN;
    const emitted = metric('mcpmeter_usage_emitted_total');
    const handed =
      metric('mcpmeter_usage_published_total') +
      metric('mcpmeter_usage_spilled_total') +
      metric('mcpmeter_usage_dropped_total');
    if (metric('mcpmeter_usage_emitter_queue_depth') === 0 && emitted === handed) break;
    if (Date.now() > deadline)
      throw new Error(`the proxy's usage emitter did not drain: ${emitted} emitted, ${handed} handed on`);
    await sleep(100);
  }
  // The all-in-one's bus is in its process: its ingest batches are what `settled` waits out.
  if (brokers === undefined) return;
  const kafka = new Kafka({
    clientId: 'faults',
    brokers: [brokers],
    logLevel: logLevel.NOTHING,
  });
  const settlement = new KafkaUsageSettlement(kafka, 'faults', 'faults-ingest');
  try {
    if (!(await settlement.settled(Math.max(1_000, deadline - Date.now()))))
      throw new Error('ingest did not catch up with the usage bus');
  } finally {
    await settlement.close();
  }
}

/**
 * Reads `read` until it gives the same answer three times, 1 s apart: longer than an ingest
 * flush (1 s) plus a bus fetch, so a batch on its way to ClickHouse shows as a change.
 */
async function settled<T>(read: () => Promise<T>, seconds = 60): Promise<T> {
  let last = JSON.stringify(await read());
  let same = 0;
  for (let i = 0; i < seconds; i++) {
    await sleep(1_000);
    const now = await read();
    same = JSON.stringify(now) === last ? same + 1 : 0;
    if (same === 2) return now;
    last = JSON.stringify(now);
  }
  return read();
}

// ------------------------------------------------------------------ load

type Outcome = 'served' | 'refused' | 'failed' | 'server_error';

interface Load {
  counts: Record<Outcome, number>;
  /** Every loop has ended (stopped, or `maxCalls` made). */
  finished(): boolean;
  /** Longest run of failed calls, in seconds: what clients saw of the outage. */
  outageSeconds(): number;
  stop(): Promise<void>;
}

/** `CLIENTS` loops of one call each after the other until stopped (or `maxCalls`). */
function load(call: () => Promise<Outcome>, maxCalls = 50_000): Load {
  const counts: Record<Outcome, number> = { served: 0, refused: 0, failed: 0, server_error: 0 };
  let stopped = false;
  let calls = 0;
  let failingSince: number | undefined;
  let longest = 0;
  let ended = 0;
  const loops = Array.from({ length: CLIENTS }, async () => {
    while (!stopped && calls < maxCalls) {
      calls++;
      const outcome = await call();
      counts[outcome]++;
      const now = Date.now();
      if (outcome === 'failed' || outcome === 'server_error') failingSince ??= now;
      else if (failingSince !== undefined) {
        longest = Math.max(longest, now - failingSince);
        failingSince = undefined;
      }
      // A failing call waits a little, so an outage does not spend the calls in a busy loop.
      if (outcome !== 'served') await sleep(outcome === 'refused' ? 20 : 100);
    }
    ended++;
  });
  return {
    counts,
    finished: () => ended === CLIENTS,
    outageSeconds: () => Math.max(longest, failingSince === undefined ? 0 : Date.now() - failingSince) / 1000,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

let rpcId = 0;
/** The last answer that was not a served call, for the log. */
let lastFailure = '';
/** Every answer that was not a served call, for the log at the end. */
const failures: string[] = [];
function toolCall(s: Seller): () => Promise<Outcome> {
  return async () => {
    try {
      const response = await fetch(s.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${s.token}`,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: ++rpcId,
          method: 'tools/call',
          params: { name: 'add', arguments: { a: 1, b: 2 } },
        }),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await response.text();
      if (text.includes('"text":"3"')) return 'served';
      lastFailure = `${response.status} ${text.slice(0, 200)}`;
      failures.push(lastFailure);
      if (response.status >= 500) return response.status === 503 ? 'failed' : 'server_error';
      return text.includes('dev.mcp-meter/paywall') || text.includes('"error"') ? 'refused' : 'failed';
    } catch (error) {
      lastFailure = String(error);
      failures.push(`${lastFailure} (${(error as Error).cause ?? ''})`);
      return 'failed';
    }
  };
}

// ------------------------------------------------------------------ the distributed stack

interface Stack {
  env: NodeJS.ProcessEnv;
  infraEnv: NodeJS.ProcessEnv;
  base: string;
  proxyUrl: string;
  proxyEnv: NodeJS.ProcessEnv;
  cp: Proc;
  proxy: Proc;
  origin: McpOrigin;
}

async function startStack(): Promise<Stack> {
  const infraEnv: NodeJS.ProcessEnv = {
    ...process.env,
    STACK_DIR: join(work, 'stack'),
    REDIS_PORT: String(await freePort()),
    KAFKA_PORT: String(await freePort()),
    KAFKA_CONTROLLER_PORT: String(await freePort()),
    PG_PORT: String(await freePort()),
  };
  startedInfra.add(infraEnv);
  await infra(infraEnv, 'all', 'start');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const proxyPort = await freePort();
  const proxyUrl = `http://127.0.0.1:${proxyPort}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOG_LEVEL: 'warn',
    DATABASE_URL: `postgres://mcpmeter:mcpmeter-local@127.0.0.1:${infraEnv.PG_PORT}/mcpmeter`,
    REDIS_URL: `redis://127.0.0.1:${infraEnv.REDIS_PORT}`,
    KAFKA_BROKERS: `127.0.0.1:${infraEnv.KAFKA_PORT}`,
    SECRET_KEY: 'ab'.repeat(32),
    DATA_DIR: join(work, 'data'),
    PORT: String(port),
    CONTROL_PLANE_URL: base,
    // The MCP server URLs the API hands out point at this stack's proxy.
    PROXY_PUBLIC_URL: proxyUrl,
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    BUS_NAMESPACE: 'faults',
    // Webhook deliveries: looked for every half second, an attempt leased for 3 × 3 s.
    WEBHOOK_INTERVAL_MS: '500',
    WEBHOOK_TIMEOUT_MS: '3000',
  };
  const cp = startProc('control-plane', { ...env, SERVICES: 'control-plane,ingest' });
  await healthy(base, cp);
  const proxyEnv = {
    ...env,
    SERVICES: 'proxy',
    PROXY_PORT: String(proxyPort),
    PROXY_SPILL_DIR: join(work, 'spill'),
  };
  const proxy = startProc('proxy', proxyEnv);
  await healthy(proxyUrl, proxy);
  const origin = await startMcpOrigin({ stateless: true });
  return { env, infraEnv, base, proxyUrl, proxyEnv, cp, proxy, origin };
}

// ------------------------------------------------------------------ faults

interface Row {
  fault: string;
  clients: Record<Outcome, number>;
  /** Calls the origin ran. */
  executed: number;
  /** Records stored for the customer, the billable ones, and calls counted against the limit. */
  recorded: number;
  billable: number;
  admitted: number;
  limit: number;
  /** Served calls with no record. */
  lost: number;
  overshoot: number;
  /** Allowance counted as spent with no billable call behind it (a lease nobody settled). */
  stranded: number;
  clientOutageSeconds: number;
  apiBackSeconds?: number;
  notes: string;
}

const executedOf = (origin: McpOrigin) => origin.calls.get('add') ?? 0;

/** A process SIGKILLed under load and started again; then calls until the limit, and the books. */
async function killUnderLoad(
  fault: string,
  stack: { base: string; origin: McpOrigin; proxyUrl: string; brokers?: string | undefined },
  s: Seller,
  limit: number,
  kill: () => Promise<void>,
  restart: () => Promise<void>,
  notes: string,
): Promise<Row> {
  const before = executedOf(stack.origin);
  const running = load(toolCall(s), limit * 3);
  const deadline = Date.now() + 180_000;
  while (running.counts.served < limit / 4 && !running.finished() && Date.now() < deadline) await sleep(10);
  if (running.counts.served === 0) log(`no call served before the fault: ${lastFailure}`);
  await kill();
  await sleep(1_000);
  await restart();
  // Until the paywall: what the restart left of the allowance is spent.
  while (running.counts.refused === 0 && !running.finished() && Date.now() < deadline) await sleep(20);
  await running.stop();
  // Everything stored, leases settled (or expired: a dead proxy's lease counts as spent).
  await drained(stack.proxyUrl, stack.brokers);
  const books = await settled(() => accounting(stack.base, s));
  const executed = executedOf(stack.origin) - before;
  return {
    fault,
    clients: { ...running.counts },
    executed,
    ...reconciled(running.counts.served, books, limit),
    clientOutageSeconds: running.outageSeconds(),
    notes,
  };
}

async function proxyKill(stack: Stack): Promise<Row> {
  const limit = 2_000;
  const s = await seller(stack.base, stack.env, stack.origin, limit);
  return killUnderLoad(
    'proxy SIGKILL under load, restarted',
    { ...stack, brokers: stack.env.KAFKA_BROKERS },
    s,
    limit,
    async () => {
      await stopProc(stack.proxy, 'SIGKILL');
    },
    async () => {
      stack.proxy = startProc('proxy', stack.proxyEnv);
      await healthy(stack.proxyUrl, stack.proxy);
    },
    "the restarted proxy settled the dead one's open lease at what its spool recorded: its unspent units returned",
  );
}

async function pgStop(stack: Stack): Promise<Row> {
  const s = await seller(stack.base, stack.env, stack.origin, 1_000_000);
  // API load: reads and writes that need PostgreSQL, and usage reads (which resolve their
  // customer and meter there too: issue 58 found them answering 503 through the outage).
  const paths: Array<[string, string, unknown?]> = [
    ['GET', '/v1/ui/products'],
    ['POST', '/v1/sdk/customers', {}],
    ['GET', `/ui/meters/requests/usage?customerRef=${s.customer}`],
  ];
  let n = 0;
  let missingRetryAfter = 0;
  /** Usage reads answered and refused with 503, measured (not assumed). */
  const usageReads = { answered: 0, refused: 0 };
  const running = load(async () => {
    const [method, path, body] = paths[n++ % paths.length] as [string, string, unknown?];
    const isUsageRead = path.startsWith('/ui/meters/');
    try {
      const response = await fetch(`${stack.base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${s.key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(15_000),
      });
      await response.text();
      if (isUsageRead) usageReads[response.status === 503 ? 'refused' : 'answered']++;
      if (response.status === 503) {
        if (response.headers.get('retry-after') === null) missingRetryAfter++;
        return 'failed';
      }
      return response.status >= 500 ? 'server_error' : 'served';
    } catch {
      return 'failed';
    }
  });
  await sleep(2_000);
  await infra(stack.infraEnv, 'postgres', 'stop');
  await sleep(OUTAGE_SECONDS * 1000);
  await infra(stack.infraEnv, 'postgres', 'start');
  await sleep(3_000);
  await running.stop();
  return {
    fault: `PostgreSQL stopped ${OUTAGE_SECONDS} s under API load`,
    clients: { ...running.counts },
    executed: 0,
    recorded: 0,
    billable: 0,
    admitted: 0,
    limit: 0,
    lost: 0,
    overshoot: 0,
    stranded: 0,
    clientOutageSeconds: running.outageSeconds(),
    notes: `"failed" are 503 dependency_unavailable (${missingRetryAfter} without Retry-After); usage reads over the run: ${usageReads.answered} answered, ${usageReads.refused} 503 (a read resolves its customer and meter in PostgreSQL)`,
  };
}

async function redisStop(stack: Stack): Promise<Row> {
  const limit = 1_000_000;
  const s = await seller(stack.base, stack.env, stack.origin, limit);
  const before = executedOf(stack.origin);
  const running = load(toolCall(s), 100_000);
  await sleep(2_000);
  const during = { ...running.counts };
  await infra(stack.infraEnv, 'redis', 'stop');
  await sleep(OUTAGE_SECONDS * 1000);
  const servedInOutage = running.counts.served - during.served;
  await infra(stack.infraEnv, 'redis', 'start');
  await sleep(3_000);
  await running.stop();
  await drained(stack.proxyUrl, stack.env.KAFKA_BROKERS);
  const books = await settled(() => accounting(stack.base, s));
  const metrics = await (await fetch(`${stack.proxyUrl}/metrics`)).text();
  const grace = metricValue(metrics, 'mcpmeter_proxy_limit_decisions_total{decision="grace"}') ?? 0;
  return {
    fault: `Redis stopped ${OUTAGE_SECONDS} s under proxy load`,
    clients: { ...running.counts },
    executed: executedOf(stack.origin) - before,
    ...reconciled(running.counts.served, books, limit),
    clientOutageSeconds: running.outageSeconds(),
    notes: `${servedInOutage} calls served during the outage: the held lease, then ${grace} in grace (1% of the limit, at most 100), all counted once Redis was back; then retry-later refusals, recorded with outcome \`unavailable\` and not billable`,
  };
}

async function cpKill(stack: Stack): Promise<Row> {
  const s = await seller(stack.base, stack.env, stack.origin, 1_000_000);
  const running = load(toolCall(s), 100_000);
  await sleep(2_000);
  await stopProc(stack.cp, 'SIGKILL');
  const killedAt = Date.now();
  stack.cp = startProc('control-plane', { ...stack.env, SERVICES: 'control-plane,ingest' });
  await healthy(stack.base, stack.cp);
  const apiBack = (Date.now() - killedAt) / 1000;
  await sleep(3_000);
  await running.stop();
  // The consumer rejoins behind the API (the dead member's session runs out first): the books
  // are read once it runs and has caught up.
  let ingestBack = 0;
  for (let i = 0; i < 900; i++) {
    const health = (await (await fetch(`${stack.base}/healthz`)).json()) as { ingest?: string };
    if (health.ingest === 'running') {
      ingestBack = (Date.now() - killedAt) / 1000;
      break;
    }
    await sleep(100);
  }
  await drained(stack.proxyUrl, stack.env.KAFKA_BROKERS);
  const books = await settled(() => accounting(stack.base, s));
  return {
    fault: 'control plane + ingest SIGKILLed, restarted at once',
    clients: { ...running.counts },
    executed: 0,
    ...reconciled(running.counts.served, books, 0),
    clientOutageSeconds: running.outageSeconds(),
    apiBackSeconds: apiBack,
    notes: `the proxy keeps serving from its caches; the API answers before the usage consumer rejoins its group (running ${ingestBack.toFixed(1)} s after the kill)`,
  };
}

/**
 * A customer spends its whole allowance; Redis then loses every counter (FLUSHALL) and every
 * process is restarted. The counter is started again from stored usage, which must first have
 * caught up with the bus: the customer must still be at its limit, nothing more admitted.
 */
async function redisFlush(stack: Stack): Promise<Row> {
  const limit = 500;
  const s = await seller(stack.base, stack.env, stack.origin, limit);
  const before = executedOf(stack.origin);
  const spend = load(toolCall(s), limit * 3);
  const deadline = Date.now() + 120_000;
  while (spend.counts.refused === 0 && !spend.finished() && Date.now() < deadline) await sleep(10);
  await spend.stop();
  // At once, with the last records possibly still on their way to ClickHouse.
  execFileSync('redis-cli', ['-p', String(stack.infraEnv.REDIS_PORT), 'FLUSHALL'], { stdio: 'ignore' });
  await stopProc(stack.proxy);
  await stopProc(stack.cp);
  stack.cp = startProc('control-plane', { ...stack.env, SERVICES: 'control-plane,ingest' });
  await healthy(stack.base, stack.cp);
  stack.proxy = startProc('proxy', stack.proxyEnv);
  await healthy(stack.proxyUrl, stack.proxy);
  const after = load(toolCall(s), 400);
  const until = Date.now() + 20_000;
  while (!after.finished() && Date.now() < until) await sleep(50);
  await after.stop();
  await drained(stack.proxyUrl, stack.env.KAFKA_BROKERS);
  const books = await settled(() => accounting(stack.base, s));
  const served = spend.counts.served + after.counts.served;
  return {
    fault: 'customer at its limit, Redis FLUSHALL, every process restarted',
    clients: {
      served,
      refused: spend.counts.refused + after.counts.refused,
      failed: spend.counts.failed + after.counts.failed,
      server_error: spend.counts.server_error + after.counts.server_error,
    },
    executed: executedOf(stack.origin) - before,
    ...reconciled(served, books, limit),
    clientOutageSeconds: after.outageSeconds(),
    notes: `${after.counts.served} calls served after the flush and restart (${after.counts.refused} refused): the counter was started again from stored usage once ingest had caught up with the bus`,
  };
}

/** Reads `read` until `done` holds (or `seconds` pass), then until it stops changing. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, seconds = 120): Promise<T> {
  for (let i = 0; i < seconds * 4; i++) {
    if (done(await read())) break;
    await sleep(250);
  }
  return settled(read);
}

/** The broker SIGKILLed while the proxy serves: calls go on, records wait and all arrive after. */
async function kafkaKill(stack: Stack): Promise<Row> {
  const limit = 1_000_000;
  const s = await seller(stack.base, stack.env, stack.origin, limit);
  const before = executedOf(stack.origin);
  const running = load(toolCall(s), 100_000);
  await sleep(2_000);
  const pid = Number(readFileSync(join(String(stack.infraEnv.STACK_DIR), 'kafka.pid'), 'utf8'));
  process.kill(pid, 'SIGKILL');
  const during = { ...running.counts };
  await sleep(OUTAGE_SECONDS * 1000);
  const servedInOutage = running.counts.served - during.served;
  await infra(stack.infraEnv, 'kafka', 'start');
  await sleep(3_000);
  await running.stop();
  const served = running.counts.served;
  await drained(stack.proxyUrl, stack.env.KAFKA_BROKERS);
  const books = await until(
    () => accounting(stack.base, s),
    (b) => b.billable >= served,
  );
  return {
    fault: `Kafka broker SIGKILLed under proxy load, started ${OUTAGE_SECONDS} s later`,
    clients: { ...running.counts },
    executed: executedOf(stack.origin) - before,
    ...reconciled(served, books, limit),
    clientOutageSeconds: running.outageSeconds(),
    notes: `${servedInOutage} calls served while the broker was down; their records waited in the proxy (memory, spill file) and all arrived after`,
  };
}

/**
 * The control plane SIGKILLed while webhook deliveries are in flight (a receiver that takes a
 * second to answer each), started again: every event arrives; an attempt cut short by the kill is
 * sent again once its lease runs out, with the same event id (at least once, deduplicated by id).
 */
async function webhookKill(stack: Stack): Promise<Row> {
  const events = 40;
  const received: string[] = [];
  let killedAt = 0;
  let lastAt = 0;
  const receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    request.on('end', () => {
      setTimeout(() => {
        try {
          received.push(String((JSON.parse(body) as { id?: unknown }).id));
          lastAt = Date.now();
        } catch {}
        response.writeHead(200).end();
      }, 1_000);
    });
  });
  await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
  const address = receiver.address();
  const port = address !== null && typeof address === 'object' ? address.port : 0;
  try {
    const { sandboxKey: key } = admin(stack.env);
    await api(stack.base, key, 'POST', '/v1/webhook_endpoints', {
      url: `http://127.0.0.1:${port}/hook`,
      enabledEvents: ['customer.created'],
    });
    for (let i = 0; i < events; i++) await api(stack.base, key, 'POST', '/v1/sdk/customers', {});
    const deadline = Date.now() + 60_000;
    while (received.length < 4 && Date.now() < deadline) await sleep(20);
    await stopProc(stack.cp, 'SIGKILL');
    killedAt = Date.now();
    const deliveredBefore = new Set(received).size;
    stack.cp = startProc('control-plane', { ...stack.env, SERVICES: 'control-plane,ingest' });
    await healthy(stack.base, stack.cp);
    const apiBack = (Date.now() - killedAt) / 1000;
    const all = Date.now() + 120_000;
    while (new Set(received).size < events && Date.now() < all) await sleep(100);
    await sleep(2_000);
    const distinct = new Set(received).size;
    return {
      fault: 'control plane SIGKILLed during webhook deliveries, restarted',
      clients: { served: 0, refused: 0, failed: 0, server_error: 0 },
      executed: events,
      recorded: distinct,
      billable: 0,
      admitted: 0,
      limit: 0,
      lost: events - distinct,
      overshoot: 0,
      stranded: 0,
      clientOutageSeconds: 0,
      apiBackSeconds: apiBack,
      notes: `${events} events, ${distinct} delivered (${deliveredBefore} before the kill), ${received.length - distinct} sent twice with the same event id (attempts cut short by the kill, resent once their 9 s lease ran out); the last ${((lastAt - killedAt) / 1000).toFixed(1)} s after the kill`,
    };
  } finally {
    receiver.closeAllConnections();
    receiver.close();
  }
}

async function aioKill(): Promise<Row> {
  const dataDir = join(work, 'aio');
  const port = await freePort();
  const proxyPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const proxyUrl = `http://127.0.0.1:${proxyPort}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOG_LEVEL: 'warn',
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    DATA_DIR: dataDir,
    PORT: String(port),
    PROXY_PORT: String(proxyPort),
  };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS', 'CLICKHOUSE_URL', 'SERVICES'])
    delete env[name];
  let aio = startProc('all-in-one', env);
  await healthy(base, aio);
  await healthy(proxyUrl, aio);
  const origin = await startMcpOrigin({ stateless: true });
  const limit = 1_000;
  const s = await seller(base, env, origin, limit);
  const postmaster = () => {
    const file = join(dataDir, 'postgres', 'postmaster.pid');
    return existsSync(file) ? Number(readFileSync(file, 'utf8').split('\n')[0]) : undefined;
  };
  const orphan = postmaster();
  let apiBack: number | undefined;
  try {
    const row = await killUnderLoad(
      'all-in-one SIGKILL under load, restarted',
      { base, origin, proxyUrl },
      s,
      limit,
      async () => {
        await stopProc(aio, 'SIGKILL');
      },
      async () => {
        const restartedAt = Date.now();
        aio = startProc('all-in-one', env);
        await healthy(base, aio);
        apiBack = (Date.now() - restartedAt) / 1000;
        await healthy(proxyUrl, aio);
      },
      '',
    );
    // From the restart (the kill was a second before it): its embedded PostgreSQL starts again too.
    row.apiBackSeconds = apiBack;
    const orphanAlive = orphan !== undefined && processAlive(orphan);
    await stopProc(aio, 'SIGTERM');
    const left = postmaster();
    row.notes = `the dead process's PostgreSQL ${orphanAlive ? 'still ran after the restart' : 'was stopped by the restart'}; after a clean stop ${left === undefined ? 'none runs' : `pid ${left} remains`}`;
    return row;
  } finally {
    await stopProc(aio, 'SIGTERM');
    await origin.close();
  }
}

// ------------------------------------------------------------------ report

/** Calls billed beyond what the origin ran: a record stored twice would show here. */
const doubled = (r: Row) => (r.executed > 0 && r.billable > 0 ? Math.max(0, r.billable - r.executed) : 0);

function report(rows: Row[]): void {
  const lines = [
    '# Fault matrix',
    '',
    `\`npm run faults\` on ${new Date().toISOString().slice(0, 10)}: ${CLIENTS} client loops on loopback, outages of ${OUTAGE_SECONDS} s.`,
    'Clients: calls served (an answer with a result), refused (a paywall or a retry-later error),',
    'failed (no answer, or 503) and server errors (any other 5xx). Executed: what the origin ran.',
    'Recorded: usage records stored for the customer. Admitted: what the limit counts (stored',
    "admitted calls plus leases still open). Billable: the requests meter's total (refusals are",
    'records, never billable). Lost: served calls without a billable record. Doubled: calls billed',
    'beyond what the origin ran. Overshoot: served calls past the limit. Stranded: allowance counted',
    'with no billable call behind it. API back: seconds until the restarted control plane answers',
    '`/healthz` (from the kill when it is restarted at once, else from the restart); more than',
    `${API_BACK_SECONDS} s fails the run.`,
    '',
    '| fault | served | refused | failed | 5xx | executed | recorded | billable | admitted | limit | lost | doubled | overshoot | stranded | client outage (s) | API back (s) | notes |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...rows.map(
      (r) =>
        `| ${r.fault} | ${r.clients.served} | ${r.clients.refused} | ${r.clients.failed} | ${r.clients.server_error} | ${r.executed || '–'} | ${r.recorded || '–'} | ${r.billable || '–'} | ${r.admitted || '–'} | ${r.limit || '–'} | ${r.lost} | ${doubled(r)} | ${r.overshoot} | ${r.stranded} | ${r.clientOutageSeconds.toFixed(1)} | ${r.apiBackSeconds?.toFixed(1) ?? '–'} | ${r.notes} |`,
    ),
    '',
  ];
  writeFileSync(join(args['results-dir'], 'faults.md'), lines.join('\n'));
  writeFileSync(join(args['results-dir'], 'faults.json'), `${JSON.stringify(rows, null, 2)}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
  const kinds = new Map<string, number>();
  for (const f of failures) {
    const kind = f.replace(/"id":\d+/, '"id":…').slice(0, 160);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  for (const [kind, n] of kinds) log(`${n} × ${kind}`);
  const broken = rows.filter(
    (r) => r.lost > 0 || doubled(r) > 0 || r.overshoot > 0 || r.stranded > 0 || r.clients.server_error > 0,
  );
  if (broken.length > 0) {
    log(
      `lost or doubled calls, overshoot, stranded allowance or 5xx in: ${broken.map((r) => r.fault).join('; ')}`,
    );
    process.exitCode = 1;
  }
  const slow = rows.filter((r) => r.apiBackSeconds !== undefined && r.apiBackSeconds > API_BACK_SECONDS);
  if (slow.length > 0) {
    log(`API back later than ${API_BACK_SECONDS} s after: ${slow.map((r) => r.fault).join('; ')}`);
    process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  // The build is made (or found up to date) once here, not by the first start a fault times.
  execFileSync(process.execPath, [join(root, 'deploy', 'build.mjs')], { stdio: 'ignore' });
  const only = new Set(args.only === '' ? [] : args.only.split(','));
  const wanted = (name: string) => only.size === 0 || only.has(name);
  const rows: Row[] = [];
  if (wanted('aio-kill')) {
    log('all-in-one SIGKILL');
    rows.push(await aioKill());
  }
  // The faults of the distributed stack, in the order they run on one stack.
  const stackFaults: Array<[string, string, (stack: Stack) => Promise<Row>]> = [
    ['proxy-kill', 'proxy SIGKILL', proxyKill],
    ['redis-stop', 'Redis stop', redisStop],
    ['pg-stop', 'PostgreSQL stop', pgStop],
    ['cp-kill', 'control plane SIGKILL', cpKill],
    ['redis-flush', 'Redis FLUSHALL and a full restart', redisFlush],
    ['kafka-kill', 'Kafka SIGKILL', kafkaKill],
    ['webhook-kill', 'control plane SIGKILL during webhook deliveries', webhookKill],
  ];
  const chosen = stackFaults.filter(([name]) => wanted(name));
  if (chosen.length > 0) {
    log('starting the distributed stack');
    const stack = await startStack();
    try {
      for (const [, label, run] of chosen) {
        log(label);
        rows.push(await run(stack));
      }
    } finally {
      await stopProc(stack.proxy);
      await stopProc(stack.cp);
      await stack.origin.close();
      await infra(stack.infraEnv, 'all', 'stop');
      startedInfra.delete(stack.infraEnv);
    }
  }
  report(rows);
}

// Stopped by a signal (Ctrl-C, a CI timeout): the servers infra.sh started run as daemons and
// would outlive this process, so they are stopped here before it exits.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    log(`${signal}: stopping what this run started; logs kept in ${work}`);
    for (const proc of procs) proc.child.kill('SIGKILL');
    for (const env of startedInfra)
      try {
        execFileSync('bash', [join(root, 'deploy', 'infra.sh'), 'all', 'stop'], { env, stdio: 'ignore' });
      } catch {}
    process.exit(130);
  });

try {
  await main();
  rmSync(work, { recursive: true, force: true });
} catch (error) {
  log(`failed; logs kept in ${work}`);
  throw error;
} finally {
  for (const proc of [...procs]) await stopProc(proc, 'SIGKILL');
}
