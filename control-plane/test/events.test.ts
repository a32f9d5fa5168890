import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { injectClient, startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';

/** GET /v1/events: the outbox read back, newest first, by customer and by type, on real PostgreSQL. */
let harness: TestControlPlane;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
});
afterAll(() => harness?.close());

// biome-ignore lint/suspicious/noExplicitAny: bodies are asserted field by field
type Json = Record<string, any>;

async function seller(name: string) {
  const { sandboxKey, liveKey } = await harness.controlPlane.providers.create({ displayName: name });
  return {
    call: injectClient(harness.controlPlane, sandboxKey),
    live: injectClient(harness.controlPlane, liveKey),
  };
}

describe('events', () => {
  it('lists a customer’s events newest first, by type, a page at a time', async () => {
    const { call, live } = await seller('Eventful');
    const ada = (await call('POST', '/v1/sdk/customers', { externalRef: 'ada', email: 'ada@example.com' }))
      .body;
    const bob = (await call('POST', '/v1/sdk/customers', { externalRef: 'bob' })).body;
    await call('PATCH', `/v1/sdk/customers/${ada.id}`, { name: 'Ada Lovelace' });
    await call('POST', '/v1/sdk/customers/ada/credits', { kind: 'grant', amount: 500 });
    await call('POST', '/v1/sdk/customers/bob/credits', { kind: 'grant', amount: 5 });
    await call('POST', '/v1/ui/products', { name: 'Not about anyone' });

    const all = await call('GET', '/v1/events?limit=100');
    expect(all.status).toBe(200);
    const types = all.body.data.map((e: Json) => e.type);
    expect(types).toContain('product.created');
    // Newest first.
    const created = all.body.data.map((e: Json) => e.created);
    expect([...created].sort((a, b) => b - a)).toEqual(created);

    const adas = await call('GET', '/v1/events?customerRef=ada&limit=100');
    expect(adas.body.data.map((e: Json) => e.type)).toEqual([
      'customer.credit.granted',
      'customer.updated',
      'customer.created',
    ]);
    for (const event of adas.body.data) expect(JSON.stringify(event)).toContain(ada.id);
    expect(JSON.stringify(adas.body)).not.toContain(bob.id);
    // By id as well as externalRef, and one event by its id, in the envelope webhooks carry.
    expect((await call('GET', `/v1/events?customerRef=${ada.id}&limit=100`)).body).toEqual(adas.body);
    const one = await call('GET', `/v1/events/${adas.body.data[0].id}`);
    expect(one.body).toMatchObject({
      type: 'customer.credit.granted',
      livemode: false,
      api_version: '2025-10-01',
    });

    // Types, comma-separated; pages that resume where the last one ended.
    const granted = await call('GET', '/v1/events?type=customer.credit.granted,customer.created&limit=1');
    expect(granted.body.data).toHaveLength(1);
    const seen = [granted.body.data[0].id];
    let cursor = granted.body.nextCursor;
    while (cursor !== null) {
      const next = await call(
        'GET',
        `/v1/events?type=customer.credit.granted,customer.created&limit=1&cursor=${cursor}`,
      );
      seen.push(...next.body.data.map((e: Json) => e.id));
      cursor = next.body.nextCursor;
    }
    expect(seen).toHaveLength(4);
    expect(new Set(seen).size).toBe(4);

    // Live sees none of the sandbox's.
    expect((await live('GET', '/v1/events')).body.data).toEqual([]);
    expect((await live('GET', `/v1/events/${one.body.id}`)).status).toBe(404);
  });

  it('refuses what it cannot read by name, and shows nothing of another provider', async () => {
    const { call } = await seller('Strict');
    const other = await seller('Other');
    const theirs = (await other.call('POST', '/v1/sdk/customers', { externalRef: 'theirs' })).body;
    const event = (await other.call('GET', '/v1/events')).body.data[0];
    expect((await call('GET', `/v1/events/${event.id}`)).body.code).toBe('event_not_found');
    expect((await call('GET', `/v1/events?customerRef=${theirs.id}`)).body.code).toBe('customer_not_found');
    const unknown = await call('GET', '/v1/events?type=customer.created,nope.never');
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0]).toMatchObject({
      path: '/type',
      message: 'names no event type: nope.never',
    });
    for (const cursor of ['garbage', Buffer.from('not-a-date|x').toString('base64url'), '%00'])
      expect((await call('GET', `/v1/events?cursor=${cursor}`)).status).toBe(400);
    expect((await call('GET', '/v1/events?limit=0')).status).toBe(400);
    expect((await call('GET', '/v1/events?limit=101')).status).toBe(400);
  });
});
