import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { type McpOrigin, startMcpOrigin } from '../../test/helpers/mcp-origin';
import { accounting, drained, reconciled, type Seller, settled } from './books';
import { lastFailureSeen, load, type Outcome, toolCall } from './load';
import { healthy, infra, log, type Proc, sleep, startedInfra, startProc, work } from './run';

/** The distributed stack the faults run on, a row of the matrix, and the kill-under-load they share. */

export interface Stack {
  env: NodeJS.ProcessEnv;
  infraEnv: NodeJS.ProcessEnv;
  base: string;
  proxyUrl: string;
  proxyEnv: NodeJS.ProcessEnv;
  cp: Proc;
  proxy: Proc;
  origin: McpOrigin;
}

export async function startStack(): Promise<Stack> {
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
    // One proxy process: the faults kill and stop it as one.
    PROXY_WORKERS: '1',
    PROXY_PORT: String(proxyPort),
    PROXY_SPILL_DIR: join(work, 'spill'),
    // A memory bound the broker's outage goes past (its 10 s at this load are some thousands of
    // calls), so the row exercises the spill file and its replay, not memory alone.
    EMITTER_MAX_QUEUED: String(EMITTER_MAX_QUEUED),
  };
  const proxy = startProc('proxy', proxyEnv);
  await healthy(proxyUrl, proxy);
  const origin = await startMcpOrigin({ stateless: true });
  return { env, infraEnv, base, proxyUrl, proxyEnv, cp, proxy, origin };
}

/** The proxy's usage emitter's memory bound in these rows (`EMITTER_MAX_QUEUED`). */
export const EMITTER_MAX_QUEUED = 1_000;

export interface Row {
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

export const executedOf = (origin: McpOrigin) => origin.calls.get('add') ?? 0;

/** A process SIGKILLed under load and started again; then calls until the limit, and the books. */
export async function killUnderLoad(
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
  if (running.counts.served === 0) log(`no call served before the fault: ${lastFailureSeen()}`);
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
