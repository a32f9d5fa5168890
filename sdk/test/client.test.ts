import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestControlPlane } from '../../test/helpers/control-plane';
import {
  createMeter,
  MeterApiError,
  type MeterClient,
  orThrow,
  paginate,
  verifyWebhook,
  WebhookVerificationError,
} from '../src/index';
import { faultyFront, type Listening, listen, startService } from './service';

/**
 * The SDK against the running control plane (real PostgreSQL, Redis, ClickHouse over HTTP on
 * loopback): typed calls, problems, pagination, retries through a faulty front, and webhooks
 * verified as a provider's receiver would.
 */
describe('the SDK against the service', () => {
  let harness: TestControlPlane;
  let url: string;
  let apiKey: string;
  let meter: MeterClient;

  beforeAll(async () => {
    ({ harness, url } = await startService());
    apiKey = (await harness.controlPlane.providers.create({ displayName: 'SDK Co' })).sandboxKey;
    meter = createMeter({ apiKey, baseUrl: url });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('makes typed calls and answers their data', async () => {
    const product = await orThrow(meter.POST('/v1/ui/products', { body: { name: 'Weather API' } }));
    expect(product.id).toMatch(/^prd_/);
    const plan = await orThrow(
      meter.POST('/v1/ui/products/{id}/plans', {
        params: { path: { id: product.id } },
        body: { name: 'Pro', type: 'recurring', billingCycle: 'monthly', currency: 'usd', price: 900 },
      }),
    );
    expect(plan).toMatchObject({ name: 'Pro', price: 900 });
    const customer = await orThrow(
      meter.POST('/v1/sdk/customers', { body: { externalRef: 'ada', email: 'ada@example.com' } }),
    );
    const read = await orThrow(meter.GET('/v1/sdk/customers/{ref}', { params: { path: { ref: 'ada' } } }));
    expect(read).toMatchObject({ reference: customer.reference, email: 'ada@example.com' });
  });

  it('throws problems as MeterApiError with their code, status and fields', async () => {
    const bad = await orThrow(
      // A plan's price must be a whole number of cents: the service refuses, naming the field.
      meter.POST('/v1/sdk/customers', { body: { email: 'not an email' } }),
    ).catch((error: unknown) => error);
    expect(bad).toBeInstanceOf(MeterApiError);
    expect(bad).toMatchObject({ status: 400, code: 'validation_failed' });
    expect((bad as MeterApiError).problem.errors?.[0]?.path).toMatch(/email/);
    expect((bad as MeterApiError).requestId).toMatch(/^req_/);

    const missing = await orThrow(
      meter.GET('/v1/sdk/customers/{ref}', { params: { path: { ref: 'nobody-here' } } }),
    ).catch((error: unknown) => error);
    expect(missing).toMatchObject({ status: 404, code: 'customer_not_found' });

    const stranger = createMeter({ apiKey: 'sk_test_not-a-key-of-anyone', baseUrl: url });
    await expect(orThrow(stranger.GET('/v1/sdk/merchant'))).rejects.toMatchObject({ status: 401 });
    expect(() => createMeter({ apiKey: 'pk_whatever', baseUrl: url })).toThrow(/secret key/);
  });

  it('reads a list to its end, one page at a time', async () => {
    const own = createMeter({
      apiKey: (await harness.controlPlane.providers.create({ displayName: 'Pages' })).sandboxKey,
      baseUrl: url,
    });
    const refs = Array.from({ length: 7 }, (_, i) => `page-${i}`);
    for (const externalRef of refs) await orThrow(own.POST('/v1/sdk/customers', { body: { externalRef } }));
    let pages = 0;
    const read: string[] = [];
    for await (const customer of paginate((cursor) => {
      pages++;
      return own.GET('/v1/sdk/customers', { params: { query: { limit: 3, ...(cursor ? { cursor } : {}) } } });
    }))
      read.push(customer.externalRef as string);
    expect(read.sort()).toEqual(refs.sort());
    expect(pages).toBe(3);
  });

  describe('through a front that fails', () => {
    let front: Awaited<ReturnType<typeof faultyFront>> | undefined;
    afterAll(async () => {
      await front?.close();
    });

    it('asks again after a 503 with Retry-After, for any method', async () => {
      front = await faultyFront(url, (_request, seen) =>
        seen === 1 ? { status: 503, headers: { 'retry-after': '1' } } : 'pass',
      );
      const flaky = createMeter({ apiKey, baseUrl: front.url });
      const created = await orThrow(flaky.POST('/v1/sdk/customers', { body: { externalRef: 'retried' } }));
      expect(created.externalRef).toBe('retried');
      expect(front.seen.map((s) => s.method)).toEqual(['POST', 'POST']);
      await front.close();

      // With retries off, the 503 is the caller's.
      front = await faultyFront(url, () => ({ status: 503, headers: { 'retry-after': '1' } }));
      const once = createMeter({ apiKey, baseUrl: front.url, retry: { maxRetries: 0 } });
      await expect(orThrow(once.GET('/v1/sdk/merchant'))).rejects.toMatchObject({
        status: 503,
        code: 'dependency_unavailable',
      });
      expect(front.seen).toHaveLength(1);
      await front.close();

      // A wait longer than the caller allows is not waited for.
      front = await faultyFront(url, () => ({ status: 503, headers: { 'retry-after': '3600' } }));
      const impatient = createMeter({ apiKey, baseUrl: front.url, retry: { maxDelayMs: 5_000 } });
      await expect(orThrow(impatient.GET('/v1/sdk/merchant'))).rejects.toMatchObject({ status: 503 });
      expect(front.seen).toHaveLength(1);
    });

    it('repeats a lost GET, but never a lost POST that may have been done', async () => {
      await front?.close();
      front = await faultyFront(url, (_request, seen) => (seen === 1 ? 'reset' : 'pass'));
      const lossy = createMeter({ apiKey, baseUrl: front.url, retry: { baseDelayMs: 10 } });
      expect(
        (await orThrow(lossy.GET('/v1/sdk/customers/{ref}', { params: { path: { ref: 'ada' } } })))
          .externalRef,
      ).toBe('ada');
      expect(front.seen).toHaveLength(2);
      await front.close();

      front = await faultyFront(url, () => 'reset');
      const posting = createMeter({ apiKey, baseUrl: front.url, retry: { baseDelayMs: 10 } });
      await expect(posting.POST('/v1/sdk/customers', { body: { externalRef: 'lost' } })).rejects.toThrow();
      expect(front.seen).toHaveLength(1);
    });
  });

  it('sends its own Idempotency-Key where one is taken, so a top-up whose answer was lost is sent again and applied once', async () => {
    await orThrow(meter.POST('/v1/sdk/customers', { body: { externalRef: 'topped' } }));
    const front = await faultyFront(url, (request, seen) =>
      request.method === 'POST' && seen === 1 ? 'lose' : 'pass',
    );
    const keys: string[] = [];
    const watching = createMeter({
      apiKey,
      baseUrl: front.url,
      retry: { baseDelayMs: 10 },
      fetch: (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
        if (input instanceof Request) keys.push(input.headers.get('idempotency-key') ?? '');
        return fetch(input, init);
      },
    });
    try {
      const movement = await orThrow(
        watching.POST('/v1/sdk/customers/{ref}/credits', {
          params: { path: { ref: 'topped' } },
          body: { kind: 'top_up', amount: 500 },
        }),
      );
      expect(movement).toMatchObject({ kind: 'top_up', amount: 500 });
      // The service did the first attempt; the second carried the same key and was answered
      // with the first one's result instead of topping up again.
      expect(front.seen.map((s) => s.method)).toEqual(['POST', 'POST']);
      expect(new Set(keys).size).toBe(1);
      expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
      const balance = await orThrow(
        meter.GET('/v1/sdk/customers/{ref}/balance', { params: { path: { ref: 'topped' } } }),
      );
      expect(balance).toMatchObject({ credits: 500 });
      // An operation that takes no key gets none, so it is never sent twice after a lost answer.
      keys.length = 0;
      await orThrow(watching.POST('/v1/sdk/customers', { body: { externalRef: 'keyless' } }));
      expect(keys).toEqual(['']);
    } finally {
      await front.close();
    }
  });

  describe('webhooks', () => {
    let receiver: Listening;
    const received: Array<{ body: Buffer; signature: string | undefined }> = [];
    beforeAll(async () => {
      receiver = await listen((request, body, response) => {
        received.push({ body, signature: request.headers['sv-signature'] as string | undefined });
        response.writeHead(200).end();
      });
    });
    afterAll(async () => {
      await receiver?.close();
    });

    it('verifies what the service signs, and refuses it tampered, stale or with another secret', async () => {
      const endpoint = await orThrow(
        meter.POST('/v1/webhook_endpoints', { body: { url: `${receiver.url}/hooks` } }),
      );
      expect(endpoint.secret).toMatch(/^whsec_/);
      const attempt = await orThrow(
        meter.POST('/v1/ui/webhooks/{endpointId}/test', { params: { path: { endpointId: endpoint.id } } }),
      );
      expect(attempt).toMatchObject({ succeeded: true });
      const hit = received.at(-1);
      if (hit === undefined) throw new Error('no delivery arrived');
      const event = verifyWebhook<{ type: string }>(hit.body, hit.signature, endpoint.secret);
      expect(event.type).toBe('payment.succeeded');

      const reason = (run: () => unknown) => {
        try {
          run();
          return 'accepted';
        } catch (error) {
          return error instanceof WebhookVerificationError ? error.reason : String(error);
        }
      };
      const tampered = Buffer.from(
        hit.body.toString('utf8').replace('payment.succeeded', 'payment.refunded'),
      );
      expect(reason(() => verifyWebhook(tampered, hit.signature, endpoint.secret))).toBe(
        'no_matching_signature',
      );
      expect(reason(() => verifyWebhook(hit.body, hit.signature, 'whsec_another'))).toBe(
        'no_matching_signature',
      );
      expect(
        reason(() =>
          verifyWebhook(hit.body, hit.signature, endpoint.secret, { now: Date.now() / 1000 + 301 }),
        ),
      ).toBe('timestamp_out_of_tolerance');
      expect(reason(() => verifyWebhook(hit.body, undefined, endpoint.secret))).toBe('missing_header');
    });
  });
});
