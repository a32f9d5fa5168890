import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { customerWithToken } from '../helpers/flows';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { type EmbeddedService, embeddedService, type Service } from '../helpers/processes';
import { type Seller, startSeller } from '../helpers/seller';
import { alive, callAtOnce, killWorkerUnderLoad, perWorker, workersClient } from '../helpers/workers';

const LIMIT = 60;
const CALLS = 150;
/** More workers than the machine's cores, all leasing from the counters over their IPC channels. */
const WORKERS = 4;

/**
 * `npm start` on embedded defaults with PROXY_WORKERS=4 (issue 65): no Redis, no Kafka; the proxy
 * workers run apart from the process that holds the control plane, ingest, chdb and the limit
 * counters, snapshots and usage bus in its memory, and reach those over their IPC channels. One
 * customer through every worker is admitted exactly its limit and every call is recorded; a worker
 * killed under load is started again with nothing lost and the limit still exact; the whole
 * service killed under load comes back with every answered call recorded and no allowance handed
 * back, its workers having stopped by themselves; SIGTERM stops it all.
 */
describe('npm start on embedded defaults with four proxy workers', () => {
  let embedded: EmbeddedService;
  let env: NodeJS.ProcessEnv;
  let baseUrl: string;
  let proxyUrl: string;
  let service: Service;
  let origin: McpOrigin;
  let seller: Seller;
  let server: { subdomain: string };

  const start = async () => {
    service = await embedded.start(120_000);
    // Every worker answering: the kernel hands fresh connections to any of them.
    await pollUntil(
      async () => (await perWorker(proxyUrl, WORKERS).catch(() => new Map())).size,
      (n) => n === WORKERS,
      { what: 'every proxy worker answering', timeoutMs: 90_000 },
    );
  };
  const client = (token: string) => workersClient(`${proxyUrl}/mcp/${server.subdomain}`, token);
  /** The customer's stored usage, as the usage API counts it (the calls admitted). */
  const usage = async (customerRef: string) =>
    (await seller.api<{ total: number }>('GET', `/ui/meters/requests/usage?customerRef=${customerRef}`)).body
      .total;

  beforeAll(async () => {
    embedded = await embeddedService('aio-workers', {
      extra: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', PROXY_WORKERS: String(WORKERS) },
    });
    ({ env, baseUrl, proxyUrl } = embedded);
    origin = await startMcpOrigin({ json: true });
    await start();
    seller = await startSeller(
      { env, baseUrl },
      {
        provider: 'Embedded Workers Co',
        product: 'Adder',
        plans: [{ name: 'Metered', price: 0, limit: LIMIT, default: true }],
      },
    );
    server = await seller.register(origin.url, { defaultPlan: 'Metered' });
  }, 240_000);

  afterAll(async () => {
    await service?.stop();
    await origin?.close();
    embedded?.remove();
  });

  it('admits one customer exactly its limit through every worker, and records every call', async () => {
    const workers = await perWorker(proxyUrl, WORKERS);
    expect([...workers.keys()].sort()).toEqual(Array.from({ length: WORKERS }, (_, i) => i));
    const customer = await customerWithToken(seller.api);
    expect(await callAtOnce(() => client(customer.token), 32, CALLS, 1)).toBe(LIMIT);
    expect(origin.calls.get('add')).toBe(LIMIT);
    // Every worker judged some of the calls; together they served exactly the limit (a worker
    // whose calls came after the budget was leased out may refuse them all).
    const judged = [...(await perWorker(proxyUrl, WORKERS)).values()];
    expect(
      judged.every((w) => w.calls > 0),
      JSON.stringify(judged),
    ).toBe(true);
    expect(judged.reduce((sum, w) => sum + w.calls, 0)).toBe(CALLS);
    expect(judged.reduce((sum, w) => sum + w.success, 0)).toBe(LIMIT);
    // Every admitted call is recorded once, through the one in-process bus, and no more.
    const recorded = await pollUntil(
      () => usage(customer.ref),
      (n) => n >= LIMIT,
      { what: 'every admitted call recorded', timeoutMs: 60_000 },
    );
    expect(recorded).toBe(LIMIT);
  }, 120_000);

  it('starts a killed worker again, with what it served recorded and the limit exact', async () => {
    const before = origin.calls.get('add') ?? 0;
    const customer = await customerWithToken(seller.api);
    const answered = await killWorkerUnderLoad(proxyUrl, () => client(customer.token), WORKERS);
    const executed = (origin.calls.get('add') ?? 0) - before;
    const recorded = await pollUntil(
      () => usage(customer.ref),
      (n) => n >= answered,
      { what: 'the answered calls recorded', timeoutMs: 60_000 },
    );
    expect(recorded).toBeLessThanOrEqual(executed);
    // The killed worker's leases were settled at what its spool recorded: exactly the limit.
    expect(recorded + (await callAtOnce(() => client(customer.token), 4, LIMIT * 2, 2))).toBe(LIMIT);
  }, 120_000);

  it('comes back from a kill of the whole service with every answered call recorded', async () => {
    const customer = await customerWithToken(seller.api);
    const pids = [...(await perWorker(proxyUrl, WORKERS)).values()].map((w) => w.pid);
    const before = origin.calls.get('add') ?? 0;
    const clients = await Promise.all(Array.from({ length: 8 }, () => client(customer.token)));
    let answered = 0;
    let killed = false;
    const loops = clients.map(async (c, k) => {
      for (let i = 0; !killed; i++) {
        const result = await c.callTool({ name: 'add', arguments: { a: k, b: i } }).catch(() => undefined);
        if (result !== undefined && result.isError !== true) answered++;
      }
    });
    while (answered < 20) await new Promise((r) => setTimeout(r, 2));
    const exited = new Promise((resolve) => service.child.once('exit', resolve));
    // The process holding the stores, alone: its workers see their channel close and stop.
    process.kill(service.child.pid as number, 'SIGKILL');
    killed = true;
    await Promise.all(loops);
    await exited;
    for (const c of clients) await c.close().catch(() => undefined);
    await pollUntil(
      async () => pids.filter(alive).length,
      (n) => n === 0,
      { what: 'the workers of the killed service stopped', timeoutMs: 60_000 },
    );
    const executed = (origin.calls.get('add') ?? 0) - before;

    await start();
    // What the dead workers served was sent before any new worker took a call: the counter,
    // started from stored usage, holds every answered call, and nothing the origin did not run.
    const recorded = await usage(customer.ref);
    expect(recorded).toBeGreaterThanOrEqual(answered);
    expect(recorded).toBeLessThanOrEqual(executed);
    expect(recorded + (await callAtOnce(() => client(customer.token), 4, LIMIT * 2, 3))).toBe(LIMIT);
  }, 240_000);

  it('stops on SIGTERM: the service exits 0 and no worker is left', async () => {
    const pids = [...(await perWorker(proxyUrl, WORKERS)).values()].map((w) => w.pid);
    expect(pids).toHaveLength(WORKERS);
    expect(await service.stop('SIGTERM')).toBe(0);
    for (const pid of pids) expect(alive(pid), `worker ${pid}`).toBe(false);
  }, 60_000);
});
