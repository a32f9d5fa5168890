import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { freePort, processAlive } from '@mcp-meter/contracts/kit';
import { startMcpOrigin } from '../../test/helpers/mcp-origin';
import { metricSum } from '../harness/metrics-page';
import { adminProvider, api } from '../harness/processes';
import { accounting, drained, metricValue, reconciled, seller, settled } from './books';
import { load, toolCall } from './load';
import { healthy, infra, OUTAGE_SECONDS, root, sleep, startProc, stopProc, work } from './run';
import { EMITTER_MAX_QUEUED, executedOf, killUnderLoad, type Row, type Stack } from './stack';

/** The faults of the matrix, each caused under load and reconciled into a row. */

export async function proxyKill(stack: Stack): Promise<Row> {
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

export async function pgStop(stack: Stack): Promise<Row> {
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

export async function redisStop(stack: Stack): Promise<Row> {
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

export async function cpKill(stack: Stack): Promise<Row> {
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
export async function redisFlush(stack: Stack): Promise<Row> {
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
export async function kafkaKill(stack: Stack): Promise<Row> {
  const limit = 1_000_000;
  const s = await seller(stack.base, stack.env, stack.origin, limit);
  const before = executedOf(stack.origin);
  const pageBefore = await fetch(`${stack.proxyUrl}/metrics`).then((r) => r.text());
  const spilledBefore = metricSum(pageBefore, 'mcpmeter_usage_spilled_total').sum;
  const replayedBefore = metricSum(pageBefore, 'mcpmeter_usage_replayed_total').sum;
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
  const page = await fetch(`${stack.proxyUrl}/metrics`).then((r) => r.text());
  const spilled = metricSum(page, 'mcpmeter_usage_spilled_total').sum - spilledBefore;
  const replayed = metricSum(page, 'mcpmeter_usage_replayed_total').sum - replayedBefore;
  return {
    fault: `Kafka broker SIGKILLed under proxy load, started ${OUTAGE_SECONDS} s later`,
    clients: { ...running.counts },
    executed: executedOf(stack.origin) - before,
    ...reconciled(served, books, limit),
    clientOutageSeconds: running.outageSeconds(),
    notes: `${servedInOutage} calls served while the broker was down; records waited in the proxy until the restarted broker took them, ${spilled} of them past its memory bound (${EMITTER_MAX_QUEUED.toLocaleString('en-US')} records here) in its spill file, ${replayed} replayed from there; all arrived after`,
  };
}

/**
 * The control plane SIGKILLed while webhook deliveries are in flight (a receiver that takes a
 * second to answer each), started again: every event arrives; an attempt cut short by the kill is
 * sent again once its lease runs out, with the same event id (at least once, deduplicated by id).
 */
export async function webhookKill(stack: Stack): Promise<Row> {
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
    const { sandboxKey: key } = await adminProvider(root, stack.env, 'Faults');
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

export async function aioKill(): Promise<Row> {
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
