import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { isInternalAddress, OutboundGuard } from '@mcp-meter/contracts/kit';
import { verifyWebhook, WebhookVerificationError } from '@mcp-meter/control-plane/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { MovableClock } from '../src/clock';
import { DUE_COUNT_CAP, deliveriesDue } from '../src/modules/webhooks/repository';
import { WebhookSender } from '../src/modules/webhooks/sender';
import { RETRY_DELAYS_MS, WebhookWorker } from '../src/modules/webhooks/worker';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are asserted field by field
type Json = Record<string, any>;
interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const MINUTE = 60_000;
const clock = new MovableClock(new Date('2026-03-01T00:00:00.000Z'));
let harness: TestControlPlane;
let receiver: Server;
let base = '';
const received: Received[] = [];
const hanging: Array<() => void> = [];

/** A real HTTP receiver on 127.0.0.1 whose path picks its behaviour. */
async function startReceiver() {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (path.startsWith('/ok')) res.writeHead(200).end('thanks');
      else if (path.startsWith('/500')) res.writeHead(500).end('boom');
      else if (path.startsWith('/429')) res.writeHead(429, { 'retry-after': '120' }).end('slow down');
      else if (path.startsWith('/redirect')) res.writeHead(302, { location: '/ok' }).end();
      else if (path.startsWith('/reset')) req.socket.destroy();
      else if (path.startsWith('/hang')) hanging.push(() => res.writeHead(200).end());
      else res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const address = receiver.address();
  base = `http://127.0.0.1:${address !== null && typeof address === 'object' ? address.port : 0}`;
}

beforeAll(async () => {
  await startReceiver();
  harness = await startTestControlPlane({
    bodyLimitBytes: 1024 * 1024,
    clock,
    webhooks: { allowedHosts: ['127.0.0.1'], timeoutMs: 800, enabled: false },
  });
});
afterAll(async () => {
  for (const finish of hanging) finish();
  await harness?.close();
  receiver?.closeAllConnections();
  await new Promise((resolve) => receiver?.close(resolve));
});

async function provider() {
  const { sandboxKey } = await harness.controlPlane.providers.create({ displayName: 'Hooks' });
  return async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
    const response = await harness.controlPlane.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${sandboxKey}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: response.statusCode, body: (response.body === '' ? {} : response.json()) as Json };
  };
}
const worker = () => harness.controlPlane.webhookWorker;

/** A sample of the control plane's metrics page (GET /metrics), by its name and labels. */
async function metric(series: string): Promise<number> {
  const page = (await harness.controlPlane.app.inject({ method: 'GET', url: '/metrics' })).body;
  const line = page.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1));
}

/** The deliveries the metrics page says are due now, and the oldest one's wait in seconds. */
const backlogCounted = async () => ({
  due: await metric('mcpmeter_webhook_deliveries_due'),
  oldest: await metric('mcpmeter_webhook_oldest_due_seconds'),
});

/** The webhook attempts the control plane's metrics page (GET /metrics) has counted, by result. */
async function attemptsCounted(): Promise<{ delivered: number; failed: number }> {
  const page = (await harness.controlPlane.app.inject({ method: 'GET', url: '/metrics' })).body;
  const count = (result: string) =>
    Number(
      new RegExp(`^mcpmeter_webhook_attempts_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(page)?.[1],
    );
  return { delivered: count('delivered'), failed: count('failed') };
}
const to = (path: string) => received.filter((r) => r.path === path);

/** The check a provider would write from spec 6.3 alone, without the project's helper. */
function independentlyValid(body: string, header: string, secret: string, now: number): boolean {
  const parts = header.split(',');
  const t = Number(parts.find((p) => p.startsWith('t='))?.slice(2));
  if (Math.abs(now - t) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return parts.filter((p) => p.startsWith('v1=')).some((p) => p.slice(3) === expected);
}

describe('webhook endpoints', () => {
  it('lists the 50 event types (46 of spec 6.4, 3 of the customer portal, an expiring card) with their groups', async () => {
    const api = await provider();
    const types = (await api('GET', '/v1/sdk/webhooks/event-types')).body.data as Json[];
    expect(types).toHaveLength(53);
    expect(new Set(types.map((t) => t.group))).toEqual(
      new Set([
        'customer',
        'purchase',
        'payment',
        'payout',
        'checkout_session',
        'credit',
        'usage',
        'catalog',
      ]),
    );
    expect(types.find((t) => t.type === 'purchase.past_due')?.group).toBe('purchase');
  });

  it('answers the whsec_ secret once, validates event types, and refuses internal URLs', async () => {
    const api = await provider();
    const created = await api('POST', '/v1/webhook_endpoints', { url: `${base}/ok/a`, description: 'main' });
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    expect(created.body).toMatchObject({ enabledEvents: [], status: 'enabled', description: 'main' });
    const fetched = await api('GET', `/v1/webhook_endpoints/${created.body.id}`);
    expect(fetched.body.secret).toBeUndefined();
    const unknown = await api('POST', '/v1/webhook_endpoints', {
      url: `${base}/ok`,
      enabledEvents: ['nope.event'],
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('validation_failed');
    for (const url of [
      'http://10.1.2.3/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]:8080/',
      'http://[::ffff:127.0.0.1]/',
      'http://localhost:9/hook', // resolves to loopback, and only 127.0.0.1 is allow-listed
      'http://192.168.1.10/',
      'ftp://example.com/',
      'http://user:pw@127.0.0.1/',
      // IPv6 forms of internal IPv4 addresses and deprecated internal ranges.
      'http://[::7f00:1]/',
      'http://[64:ff9b::7f00:1]/',
      'http://[64:ff9b::a9fe:a9fe]/',
      'http://[2002:7f00:1::]/',
      'http://[2001::1]/',
      'http://[fec0::1]/',
      'http://[::ffff:0:7f00:1]/',
      // A public address on a privileged port that is not the web's.
      'http://93.184.216.34:22/',
      'http://93.184.216.34:25/',
    ]) {
      const refused = await api('POST', '/v1/webhook_endpoints', { url });
      expect(refused.status, url).toBe(400);
    }
    expect((await api('GET', '/v1/webhook_endpoints')).body.data).toHaveLength(1);
  });

  it('guards every connection, not only registration', async () => {
    expect(isInternalAddress('127.0.0.1')).toBe(true);
    expect(isInternalAddress('100.64.0.1')).toBe(true);
    expect(isInternalAddress('fd00::1')).toBe(true);
    expect(isInternalAddress('64:ff9b::a9fe:a9fe')).toBe(true);
    expect(isInternalAddress('93.184.216.34')).toBe(false);
    expect(isInternalAddress('2606:4700::1')).toBe(false);
    expect(isInternalAddress('::ffff:93.184.216.34')).toBe(false);
    for (const internal of [
      '::7f00:1',
      '2002:7f00:1::',
      '2001::1',
      'fec0::1',
      '::ffff:0:7f00:1',
      '0.0.0.0',
      '::',
    ])
      expect(isInternalAddress(internal), internal).toBe(true);
    const strict = new WebhookSender(new OutboundGuard([]), 1000);
    const literal = await strict.send(`${base}/ok/strict`, '{}', {});
    expect(literal).toMatchObject({ ok: false, statusCode: null });
    expect(literal.error).toContain('internal address');
    const named = await strict.send(`${base.replace('127.0.0.1', 'localhost')}/ok/strict`, '{}', {});
    expect(named.ok).toBe(false);
    expect(named.error).toContain('internal address');
    expect(to('/ok/strict')).toHaveLength(0);
    await strict.close();
  });
});

describe('webhook delivery', () => {
  it('delivers subscribed events signed over the exact bytes, and nothing else', async () => {
    const api = await provider();
    const endpoint = (
      await api('POST', '/v1/webhook_endpoints', {
        url: `${base}/ok/signed`,
        enabledEvents: ['customer.created'],
      })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', { name: 'Ada' })).body;
    await api('POST', '/v1/ui/products', { name: 'Not subscribed' });
    await worker().drain();
    const got = to('/ok/signed');
    expect(got).toHaveLength(1);
    const [hit] = got as [Received];
    const envelope = JSON.parse(hit.body);
    expect(envelope).toMatchObject({
      type: 'customer.created',
      livemode: false,
      data: { object: { id: customer.id } },
    });
    expect(hit.headers['sv-event-id']).toBe(envelope.id);
    expect(hit.headers['sv-delivery']).toMatch(/^dlv_/);
    expect(hit.headers['user-agent']).toMatch(/^mcp-meter-webhooks\//);
    expect(hit.headers['content-type']).toBe('application/json');
    const header = String(hit.headers['sv-signature']);
    const now = Math.floor(clock.now().getTime() / 1000);
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(independentlyValid(hit.body, header, endpoint.secret, now)).toBe(true);
    // The project's receiver helper agrees, and refuses every tampering.
    expect(verifyWebhook<Json>(hit.body, header, endpoint.secret, { now }).id).toBe(envelope.id);
    const flipped = hit.body.replace('"customer.created"', '"customer.createe"');
    const refusals: Array<[string, () => unknown]> = [
      ['changed byte', () => verifyWebhook(flipped, header, endpoint.secret, { now })],
      ['wrong secret', () => verifyWebhook(hit.body, header, 'whsec_wrong', { now })],
      ['6 minutes old', () => verifyWebhook(hit.body, header, endpoint.secret, { now: now + 360 })],
      ['6 minutes ahead', () => verifyWebhook(hit.body, header, endpoint.secret, { now: now - 360 })],
      ['no header', () => verifyWebhook(hit.body, undefined, endpoint.secret, { now })],
    ];
    for (const [what, attempt] of refusals) {
      expect(attempt, what).toThrow(WebhookVerificationError);
    }
    expect(independentlyValid(flipped, header, endpoint.secret, now)).toBe(false);
    expect(independentlyValid(hit.body, header, endpoint.secret, now + 360)).toBe(false);
    // The attempt log has it.
    const log = await api('GET', `/v1/webhook_attempts?eventId=${envelope.id}`);
    expect(log.body.data).toMatchObject([
      { succeeded: true, statusCode: 200, attempt: 1, responseExcerpt: 'thanks' },
    ]);
  });

  it('retries on the schedule, never in parallel, and disables the endpoint after 12 failures', async () => {
    const api = await provider();
    const endpoint = (await api('POST', '/v1/webhook_endpoints', { url: `${base}/500/schedule` })).body;
    const before = await attemptsCounted();
    await api('POST', '/v1/sdk/customers', {});
    const gaps: number[] = [];
    // Due at once: the metrics page counts it, until the first attempt puts it off.
    expect(await backlogCounted()).toEqual({ due: 1, oldest: 0 });
    for (let attempt = 1; attempt <= 12; attempt++) {
      await worker().drain();
      if (attempt === 1) expect(await backlogCounted()).toEqual({ due: 0, oldest: 0 });
      expect(to('/500/schedule')).toHaveLength(attempt);
      // Nothing more before the next retry is due.
      await worker().drain();
      expect(to('/500/schedule')).toHaveLength(attempt);
      const [last] = (await api('GET', `/v1/webhook_attempts?endpointId=${endpoint.id}&limit=1`)).body
        .data as Json[];
      if (attempt < 12) {
        const gap = Date.parse(last?.nextAttemptAt) - clock.now().getTime();
        gaps.push(gap);
        clock.advance(gap);
        if (attempt === 1) {
          // A minute past its retry time, it has waited a minute.
          clock.advance(60_000);
          expect(await backlogCounted()).toEqual({ due: 1, oldest: 60 });
          clock.advance(-60_000);
        }
      }
    }
    expect(gaps).toEqual([...RETRY_DELAYS_MS, ...Array(4).fill(RETRY_DELAYS_MS[6])]);
    const disabled = (await api('GET', `/v1/webhook_endpoints/${endpoint.id}`)).body;
    expect(disabled).toMatchObject({ status: 'disabled', consecutiveFailures: 12 });
    clock.advance(100 * 3600_000);
    await worker().drain();
    expect(to('/500/schedule')).toHaveLength(12);

    // Re-enabled, pointing somewhere healthy: the pending delivery goes out.
    await api('PATCH', `/v1/webhook_endpoints/${endpoint.id}`, { url: `${base}/ok/recovered` });
    expect((await api('POST', `/v1/webhook_endpoints/${endpoint.id}/enable`)).body).toMatchObject({
      status: 'enabled',
      consecutiveFailures: 0,
    });
    await worker().drain();
    expect(to('/ok/recovered')).toHaveLength(1);
    // The metrics page counts the thirteen attempts by result, and nothing is left due.
    expect(await backlogCounted()).toEqual({ due: 0, oldest: 0 });
    const after = await attemptsCounted();
    expect({ failed: after.failed - before.failed, delivered: after.delivered - before.delivered }).toEqual({
      failed: 12,
      delivered: 1,
    });
  });

  it('honours Retry-After on 429, and treats redirects, resets and timeouts as failures', async () => {
    const api = await provider();
    const endpoints: Record<string, Json> = {};
    for (const path of ['/429/a', '/redirect/a', '/reset/a', '/hang/timeout'])
      endpoints[path] = (await api('POST', '/v1/webhook_endpoints', { url: `${base}${path}` })).body;
    const event = (await api('POST', '/v1/sdk/customers', {})).body;
    await worker().drain();
    const attempt = async (path: string) =>
      (
        (await api('GET', `/v1/webhook_attempts?endpointId=${endpoints[path]?.id}`)).body.data as Json[]
      )[0] as Json;
    const limited = await attempt('/429/a');
    expect(limited).toMatchObject({ succeeded: false, statusCode: 429 });
    expect(Date.parse(limited.nextAttemptAt) - Date.parse(limited.createdAt)).toBe(120_000);
    expect(await attempt('/redirect/a')).toMatchObject({
      succeeded: false,
      statusCode: 302,
      error: 'redirect (302) not followed',
    });
    expect(to('/ok')).toHaveLength(0);
    expect((await attempt('/reset/a')).error).toMatch(/socket|closed|ECONNRESET/i);
    const timedOut = await attempt('/hang/timeout');
    expect(timedOut).toMatchObject({ succeeded: false, statusCode: null, error: 'timed out after 800 ms' });
    expect(timedOut.latencyMs).toBeGreaterThanOrEqual(700);
    expect(event.id).toMatch(/^cus_/);
  });

  it('keeps a healthy endpoint fast while another hangs, with one attempt in flight per delivery', async () => {
    const slow = new WebhookWorker(
      harness.pool,
      clock,
      harness.controlPlane.webhooks,
      new WebhookSender(new OutboundGuard(['127.0.0.1']), 60_000),
      {
        intervalMs: 10,
        batchSize: 20,
        maxInFlight: 64,
        perEndpoint: 8,
        disableAfter: 12,
        leaseMs: 5_000,
        logger: silent,
      },
    );
    const api = await provider();
    await api('POST', '/v1/webhook_endpoints', { url: `${base}/hang/stuck` });
    await api('POST', '/v1/webhook_endpoints', { url: `${base}/ok/healthy` });
    await api('POST', '/v1/sdk/customers', {});
    const started = performance.now();
    await slow.look();
    // Delivered while the other hangs: waiting behind it would take the sender's 60 s timeout,
    // far past this wait (no time is asserted: a busy machine may take a while).
    while (to('/ok/healthy').length === 0 && performance.now() - started < 20_000) await sleep(5);
    expect(to('/ok/healthy')).toHaveLength(1);
    expect(slow.inFlightCount).toBeGreaterThanOrEqual(1); // the hanging one (others' retries may be due too)
    // Past its retry time and its lease in clock terms: still not sent again while in flight.
    clock.advance(30 * MINUTE);
    await slow.look();
    await sleep(100);
    expect(to('/hang/stuck')).toHaveLength(1);
    for (const finish of hanging.splice(0)) finish();
    await slow.stop();
  });

  it('two workers on one database send each delivery once', async () => {
    const api = await provider();
    await api('POST', '/v1/webhook_endpoints', {
      url: `${base}/ok/pair`,
      enabledEvents: ['customer.created'],
    });
    for (let i = 0; i < 40; i++) await api('POST', '/v1/sdk/customers', {});
    const other = harness.controlPlane.webhookWorker;
    const twin = new WebhookWorker(
      harness.pool,
      clock,
      harness.controlPlane.webhooks,
      harness.controlPlane.webhookSender,
      {
        intervalMs: 10,
        batchSize: 7,
        maxInFlight: 8,
        perEndpoint: 8,
        disableAfter: 12,
        leaseMs: 30_000,
        logger: silent,
      },
    );
    await Promise.all([other.drain(), twin.drain(), twin.drain()]);
    const ids = to('/ok/pair').map((r) => r.headers['sv-event-id']);
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);
  });

  it('signs with both secrets during a rotation overlap, then with the new one only', async () => {
    const api = await provider();
    const endpoint = (await api('POST', '/v1/webhook_endpoints', { url: `${base}/ok/rotate` })).body;
    const rotated = (
      await api('POST', `/v1/webhook_endpoints/${endpoint.id}/rotate-secret`, { overlapSeconds: 3600 })
    ).body;
    expect(rotated.secret).not.toBe(endpoint.secret);
    await api('POST', '/v1/sdk/customers', {});
    await worker().drain();
    const now = () => Math.floor(clock.now().getTime() / 1000);
    const during = to('/ok/rotate')[0] as Received;
    const header = String(during.headers['sv-signature']);
    expect(header.split(',').filter((p) => p.startsWith('v1='))).toHaveLength(2);
    expect(independentlyValid(during.body, header, endpoint.secret, now())).toBe(true);
    expect(independentlyValid(during.body, header, rotated.secret, now())).toBe(true);
    clock.advance(3601_000);
    await api('POST', '/v1/sdk/customers', {});
    await worker().drain();
    const after = to('/ok/rotate')[1] as Received;
    const later = String(after.headers['sv-signature']);
    expect(later.split(',').filter((p) => p.startsWith('v1='))).toHaveLength(1);
    expect(independentlyValid(after.body, later, rotated.secret, now())).toBe(true);
    expect(independentlyValid(after.body, later, endpoint.secret, now())).toBe(false);
  });

  it('sends a test event at once and answers with the attempt', async () => {
    const api = await provider();
    const endpoint = (await api('POST', '/v1/webhook_endpoints', { url: `${base}/ok/test` })).body;
    const tested = await api('POST', `/v1/ui/webhooks/${endpoint.id}/test`);
    expect(tested.status).toBe(200);
    expect(tested.body).toMatchObject({ succeeded: true, statusCode: 200, eventType: 'payment.succeeded' });
    const hit = to('/ok/test')[0] as Received;
    expect(JSON.parse(hit.body)).toMatchObject({
      type: 'payment.succeeded',
      data: { object: { amount: 2000 } },
    });
    expect(hit.headers['sv-delivery']).toBe(tested.body.id);
    expect(
      verifyWebhook(hit.body, hit.headers['sv-signature'], endpoint.secret, {
        now: Math.floor(clock.now().getTime() / 1000),
      }),
    ).toBeTruthy();
    const failing = (await api('POST', '/v1/webhook_endpoints', { url: `${base}/500/test` })).body;
    expect((await api('POST', `/v1/ui/webhooks/${failing.id}/test`)).body).toMatchObject({
      succeeded: false,
      statusCode: 500,
    });
  });

  it('counts a backlog of due deliveries up to its cap, oldest first, whatever its length', async () => {
    const api = await provider();
    const endpoint = (await api('POST', '/v1/webhook_endpoints', { url: `${base}/ok/backlog` })).body;
    const event = (await api('POST', '/v1/sdk/customers', {})).body;
    expect(event.id).toBeDefined();
    // 10,050 deliveries of one event, due from an hour ago, written and read in one transaction
    // rolled back after: no worker of this file ever sees them.
    const client = await harness.pool.connect();
    try {
      await client.query('BEGIN');
      const now = clock.now();
      await client.query(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, next_attempt_at, created_at, updated_at)
         SELECT 'dlv_backlog_' || n, (SELECT id FROM outbox_events ORDER BY created_at DESC LIMIT 1), $1,
                'pending', $2::timestamptz - interval '1 hour' + n * interval '1 millisecond', $2, $2
           FROM generate_series(1, 10050) AS n`,
        [endpoint.id, now],
      );
      expect(await deliveriesDue(client, now)).toEqual({ due: DUE_COUNT_CAP, oldestDueSeconds: 3599.999 });
      await client.query(`UPDATE webhook_endpoints SET status = 'disabled' WHERE id = $1`, [endpoint.id]);
      // A disabled endpoint's deliveries wait for it to be enabled again: none of them is due.
      expect((await deliveriesDue(client, now)).due).toBeLessThan(DUE_COUNT_CAP);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    await worker().drain();
  });

  it('redelivers one event or a time range; a disabled endpoint misses events until then', async () => {
    const api = await provider();
    const endpoint = (await api('POST', '/v1/webhook_endpoints', { url: `${base}/ok/replay` })).body;
    await api('POST', '/v1/sdk/customers', {});
    await worker().drain();
    expect(to('/ok/replay')).toHaveLength(1);
    const first = JSON.parse((to('/ok/replay')[0] as Received).body).id as string;
    const again = await api('POST', `/v1/webhook_endpoints/${endpoint.id}/redeliver`, { eventId: first });
    expect(again).toMatchObject({ status: 202, body: { queued: 1 } });
    await worker().drain();
    expect(to('/ok/replay').map((r) => r.headers['sv-event-id'])).toEqual([first, first]);

    await api('POST', `/v1/webhook_endpoints/${endpoint.id}/disable`);
    clock.advance(1000);
    const from = clock.now().toISOString();
    await api('POST', '/v1/sdk/customers', {});
    await api('POST', '/v1/sdk/customers', {});
    await worker().drain();
    expect(to('/ok/replay')).toHaveLength(2);
    await api('POST', `/v1/webhook_endpoints/${endpoint.id}/enable`);
    const range = await api('POST', `/v1/webhook_endpoints/${endpoint.id}/redeliver`, { from });
    expect(range.body.queued).toBe(2);
    await worker().drain();
    expect(to('/ok/replay')).toHaveLength(4);
    expect(
      (await api('POST', `/v1/webhook_endpoints/${endpoint.id}/redeliver`, { eventId: 'evt_missing' }))
        .status,
    ).toBe(404);
  });
});

describe('usage events', () => {
  it('announces /v1/sdk/usages once per record id, and usage.reset when a period renews', async () => {
    const api = await provider();
    await api('POST', '/v1/webhook_endpoints', {
      url: `${base}/ok/usage`,
      enabledEvents: ['usage.recorded', 'usage.reset', 'usage.charged'],
    });
    const product = (await api('POST', '/v1/ui/products', { name: 'Search' })).body;
    const plan = (
      await api('POST', `/v1/ui/products/${product.id}/plans`, {
        name: 'Free monthly',
        type: 'recurring',
        billingCycle: 'monthly',
        price: 0,
        currency: 'usd',
      })
    ).body;
    const customer = (await api('POST', '/v1/sdk/customers', {})).body;
    const purchase = (await api('POST', '/v1/sdk/activate', { customerRef: customer.id, planRef: plan.id }))
      .body;
    expect(purchase.status).toBe('activated');
    for (let i = 0; i < 2; i++) {
      const sent = await api('POST', '/v1/sdk/usages', {
        customerRef: customer.id,
        productRef: product.id,
        units: 3,
        id: 'usage-once',
      });
      expect(sent.status).toBe(202);
    }
    await worker().drain();
    const recorded = to('/ok/usage').map((r) => JSON.parse(r.body));
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      type: 'usage.recorded',
      data: {
        object: {
          reference: 'usage-once',
          customer: customer.id,
          product: product.id,
          purchase: purchase.purchaseRef,
          quantity: 3,
          meterName: 'requests',
        },
      },
    });
    // Usage priced in credits is charged: usage.charged with the units and credits.
    await api('POST', `/v1/sdk/customers/${customer.id}/credits`, { kind: 'grant', amount: 100 });
    const debit = await api('POST', `/v1/sdk/customers/${customer.id}/credits`, {
      kind: 'debit',
      units: 3,
      planRef: plan.id,
    });
    expect(debit.status).toBe(201);
    clock.advance(32 * 24 * 3600_000);
    await harness.controlPlane.scheduler.runDue();
    await worker().drain();
    const reset = to('/ok/usage')
      .map((r) => JSON.parse(r.body))
      .filter((e) => e.type === 'usage.reset');
    expect(reset).toHaveLength(1);
    expect(reset[0].data.object).toMatchObject({ purchase: purchase.purchaseRef, customer: customer.id });
    expect(reset[0].data.object.periodStart).toBeGreaterThan(reset[0].data.object.previousPeriodStart);
    const charged = to('/ok/usage')
      .map((r) => JSON.parse(r.body))
      .filter((e) => e.type === 'usage.charged');
    expect(charged.map((e) => e.data.object)).toMatchObject([
      { customer: customer.id, plan: plan.id, product: product.id, quantity: 3, credits: 3, balance: 97 },
    ]);
  });
});

const silent = { level: 'silent', info() {}, warn() {}, error() {}, debug() {} } as never;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
