import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { NODE_FLAGS } from '../../deploy/node-flags';
import { customerWithToken } from '../helpers/flows';
import { type McpOrigin, startMcpOrigin } from '../helpers/mcp-origin';
import { pollUntil } from '../helpers/poll';
import { spawnService } from '../helpers/processes';
import { pythonWith } from '../helpers/python';
import { type Seller, type SplitStack, startSeller, startSplitStack } from '../helpers/seller';
import {
  alive,
  callAtOnce,
  fresh,
  killWorkerUnderLoad,
  workersClient,
  perWorker as workersPerWorker,
} from '../helpers/workers';

const LIMIT = 60;
/** More workers than the machine's cores: four event loops leasing from one customer's counter. */
const WORKERS = 4;
const ALL = Array.from({ length: WORKERS }, (_, i) => i);

/**
 * Parses the page on stdin with prometheus_client and prints each family's name, type and the
 * `worker` labels of its samples (sorted, once each).
 */
const PARSE_PAGE = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    workers = sorted({s.labels.get('worker') for s in family.samples if 'worker' in s.labels})
    out.append({'name': family.name, 'type': family.type, 'workers': workers})
print(json.dumps(out))
`;

/** Runs `file` with `args`, `input` on its stdin; resolves with its output, rejects on failure. */
function runWith(file: string, args: string[], input: string): Promise<{ stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout) =>
      error === null ? resolve({ stdout }) : reject(error),
    );
    child.stdin?.end(input);
  });
}
const CALLS = 150;

/**
 * Proxy workers (issue 65): a split stack whose proxy runs PROXY_WORKERS=4 processes on one port
 * under a supervisor, with real Redis, Kafka and ClickHouse. Every worker serves; one customer
 * hammered through all four over many connections is admitted exactly its plan's limit (0
 * overshoot, and none refused while budget remains in another worker's lease); a worker
 * SIGKILLed under load is started again, its spool replayed and its leases settled, so nothing
 * it served is lost and the limit is still exact; SIGTERM drains them all.
 */
describe('proxy workers on one port', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let origin: McpOrigin;
  let seller: Seller;
  let server: { subdomain: string };

  const perWorker = () => workersPerWorker(stack.proxyUrl, WORKERS);
  const client = (token: string) => workersClient(`${stack.proxyUrl}/mcp/${server.subdomain}`, token);

  beforeAll(async () => {
    stack = await startSplitStack({
      name: 'workers',
      infra,
      secretKey: 'c3'.repeat(32),
      proxy: { PROXY_WORKERS: String(WORKERS) },
    });
    await stack.ready;
    origin = await startMcpOrigin({ json: true });
    seller = await startSeller(stack, {
      provider: 'Workers Co',
      product: 'Adder',
      plans: [{ name: 'Metered', price: 0, limit: LIMIT, default: true }],
    });
    server = await seller.register(origin.url, { defaultPlan: 'Metered' });
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
    await origin?.close();
  });

  it('serves from every worker, and admits one customer exactly its limit through them', async () => {
    const workers = await perWorker();
    expect([...workers.keys()].sort()).toEqual(ALL);
    expect(new Set([...workers.values()].map((w) => w.pid)).size).toBe(WORKERS);
    // Whichever worker a scrape reaches, its page has every worker's series, each family once.
    for (let i = 0; i < 8; i++) {
      const page = (await fresh(`${stack.proxyUrl}/metrics`)).body;
      for (const worker of ALL)
        expect(page).toMatch(
          new RegExp(`^mcpmeter_proxy_http_requests_total\\{worker="${worker}",code="200"\\} \\d+$`, 'm'),
        );
      expect(page.match(/^# TYPE mcpmeter_proxy_http_requests_total counter$/gm)).toHaveLength(1);
    }

    const customer = await customerWithToken(seller.api);
    // Thirty-two clients, each its own connections, spread by the kernel over the four workers.
    expect(await callAtOnce(() => client(customer.token), 32, CALLS, 1)).toBe(LIMIT);
    expect(origin.calls.get('add')).toBe(LIMIT);
    // Every worker judged some of them; together they served exactly the limit. (A worker whose
    // every call came after the budget was leased out waits for leases to come back, and may
    // then refuse them all: exactness is the sum's, not a share each.)
    const after = await perWorker();
    const judged = [...after.values()];
    expect(
      judged.every((w) => w.calls > 0),
      JSON.stringify([...after.entries()]),
    ).toBe(true);
    expect(judged.reduce((sum, w) => sum + w.calls, 0)).toBe(CALLS);
    expect(judged.reduce((sum, w) => sum + w.success, 0)).toBe(LIMIT);
  });

  it("reads as one page to Prometheus's own parser: each family once, every worker's series", async () => {
    // The Prometheus Python client's text parser (PyPI), not this repository's reading of it.
    const python = await pythonWith('prometheus-client-0.26.0', ['prometheus_client==0.26.0']);
    for (let i = 0; i < 4; i++) {
      const page = (await fresh(`${stack.proxyUrl}/metrics`)).body;
      const { stdout } = await runWith(python, ['-c', PARSE_PAGE], page);
      const families = JSON.parse(stdout) as { name: string; type: string; workers: string[] }[];
      const names = families.map((f) => f.name);
      expect(new Set(names).size, 'no family twice').toBe(names.length);
      const family = (name: string) => families.find((f) => f.name === name);
      const labels = ALL.map(String);
      expect(family('mcpmeter_proxy_http_requests')).toMatchObject({ type: 'counter', workers: labels });
      expect(family('mcpmeter_proxy_added_seconds')).toMatchObject({ type: 'histogram', workers: labels });
      // Every family the workers export carries the worker of each of its series.
      for (const f of families) expect(f.workers.length, f.name).toBeGreaterThan(0);
    }
  }, 300_000);

  it('starts a killed worker again: what it served is recorded, and the limit stays exact', async () => {
    const before = origin.calls.get('add') ?? 0;
    const customer = await customerWithToken(seller.api);
    // Worker 1 killed under eight clients' calls; the supervisor starts it again, as a new process.
    const answered = await killWorkerUnderLoad(stack.proxyUrl, () => client(customer.token), WORKERS);
    const executed = (origin.calls.get('add') ?? 0) - before;
    const usage = async () =>
      (await seller.api<{ total: number }>('GET', `/ui/meters/requests/usage?customerRef=${customer.ref}`))
        .body.total;
    // Every call a client got an answer to is recorded (the killed worker's spool replayed by its
    // successor), and nothing the origin did not run.
    const recorded = await pollUntil(usage, (n) => n >= answered, {
      what: 'the answered calls recorded',
      timeoutMs: 60_000,
    });
    expect(recorded).toBeLessThanOrEqual(executed);
    // The rest of the allowance, through every worker again: exactly up to the limit, never past it.
    const admitted = await callAtOnce(() => client(customer.token), 8, LIMIT * 2, 2);
    // Exactly the limit: the killed worker's leases were settled at what it recorded, so no unit
    // it had leased and not spent is lost to the customer, and none is given twice.
    expect(recorded + admitted).toBe(LIMIT);
    const final = await pollUntil(usage, (n) => n >= recorded + admitted, {
      what: 'every admitted call recorded',
      timeoutMs: 60_000,
    });
    expect(final).toBe(recorded + admitted);
  });

  it('drains every worker on SIGTERM: the supervisor exits 0, and no worker holds the port', async () => {
    const pids = [...(await perWorker()).values()].map((w) => w.pid);
    // The split stack's second service is the proxy's supervisor: SIGTERM to it alone, which it
    // passes on to each worker.
    const supervisor = stack.services[1]?.child;
    const exited = new Promise((resolve) => supervisor?.once('exit', (code) => resolve(code)));
    process.kill(supervisor?.pid as number, 'SIGTERM');
    expect(await exited).toBe(0);
    for (const pid of pids) expect(alive(pid), `worker ${pid}`).toBe(false);
    await expect(fresh(`${stack.proxyUrl}/healthz`)).rejects.toThrow();
  });

  it('stops the workers by themselves when their supervisor is killed, and frees the port', async () => {
    const port = await freePort();
    const supervisor = spawnService(process.execPath, [...NODE_FLAGS, 'deploy/start.mjs'], {
      env: {
        ...stack.env,
        SERVICES: 'proxy',
        PROXY_WORKERS: '2',
        PROXY_PORT: String(port),
        PROXY_SPILL_DIR: join(stack.dir, 'spill-orphans'),
      },
      logDir: stack.dir,
      name: 'proxy-orphans',
    });
    const url = `http://127.0.0.1:${port}`;
    const workers = new Map<number, number>();
    await pollUntil(
      async () => {
        const health = JSON.parse((await fresh(`${url}/healthz`).catch(() => ({ body: '{}' }))).body) as {
          worker?: number;
          pid?: number;
        };
        if (health.worker !== undefined && health.pid !== undefined) workers.set(health.worker, health.pid);
        return workers.size;
      },
      (n) => n === 2,
      { what: 'both workers answering', timeoutMs: 90_000 },
    );
    // SIGKILL to the supervisor alone: it cannot pass anything on; its workers see the channel close.
    process.kill(supervisor.child.pid as number, 'SIGKILL');
    try {
      await pollUntil(
        async () => [...workers.values()].filter(alive).length,
        (n) => n === 0,
        { what: 'the orphaned workers stopped', timeoutMs: 60_000 },
      );
      await expect(fresh(`${url}/healthz`)).rejects.toThrow();
    } finally {
      // A failure must not leave workers running past the test.
      for (const pid of workers.values()) if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
