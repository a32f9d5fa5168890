import { KafkaUsageSettlement } from '@mcp-meter/ingest';
import { Kafka, logLevel } from 'kafkajs';
import type { McpOrigin } from '../../test/helpers/mcp-origin';
import { metricSum } from '../harness/metrics-page';
import { adminProvider, api } from '../harness/processes';
import { root, sleep } from './run';

/**
 * The books of a fault: a seller whose customer the load calls for, what the control plane
 * counts and bills for that customer, and the waits until the pipeline has stored everything.
 */

export interface Seller {
  key: string;
  customer: string;
  product: string;
  mcpUrl: string;
  token: string;
}

/** A product with a free plan of `limit` calls, its MCP server on `origin`, an activated customer and a token. */
export async function seller(
  base: string,
  env: NodeJS.ProcessEnv,
  origin: McpOrigin,
  limit: number,
): Promise<Seller> {
  const { sandboxKey: key } = await adminProvider(root, env, 'Faults');
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
export async function accounting(
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
export function reconciled(served: number, books: Awaited<ReturnType<typeof accounting>>, limit: number) {
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
export function metricValue(page: string, series: string): number | undefined {
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
export async function drained(proxyUrl: string, brokers: string | undefined): Promise<void> {
  const deadline = Date.now() + 120_000;
  // Workers seen on a page: a page that left one out (it did not answer in time) proves nothing.
  let workers = 1;
  for (;;) {
    const page = await fetch(`${proxyUrl}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    const metric = (name: string) => {
      const { sum, series } = metricSum(page, name);
      return series >= workers ? sum : Number.NaN;
    };
    workers = Math.max(workers, metricSum(page, 'mcpmeter_usage_emitted_total').series);
    // Summed over every worker: none hands on more than it emitted, so equal sums mean each is done.
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
export async function settled<T>(read: () => Promise<T>, seconds = 60): Promise<T> {
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
