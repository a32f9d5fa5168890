import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, type TestControlPlane } from '../../test/helpers/control-plane';
import { rawExchange } from '../../test/helpers/raw-http';
import { nulPath } from '../src/http/app';

/**
 * Input a client may send to any route: a NUL character (which PostgreSQL cannot store) in a path
 * parameter, a query value, a body string, a body key or a JSON metadata value. Every route of
 * the published API answers with a 4xx that names the problem, never a 5xx.
 */
let harness: TestControlPlane;
let key: string;
beforeAll(async () => {
  harness = await startTestControlPlane({ bodyLimitBytes: 1024 * 1024 });
  key = (await harness.controlPlane.providers.create({ displayName: 'Hostile' })).sandboxKey;
});
afterAll(() => harness?.close());

interface OpenApi {
  paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>;
}

describe('hostile input', () => {
  it('finds a NUL in strings and keys, at any depth, as a JSON pointer', () => {
    expect(nulPath({ a: [{ b: 'x\u0000' }] })).toBe('/a/0/b');
    expect(nulPath({ 'k\u0000': 1 })).toBe('/k\\u0000');
    expect(nulPath({ 'a/b': 'ok', c: ['fine', 2, null] })).toBeUndefined();
    expect(nulPath('\u0000')).toBe('/');
  });

  it('answers a NUL anywhere in any route of /openapi.json with a 4xx, never a 5xx', async () => {
    const spec = (
      await harness.controlPlane.app.inject({ method: 'GET', url: '/openapi.json' })
    ).json() as OpenApi;
    const bodies = [
      { name: 'a\u0000b' },
      { customerRef: '\u0000', metadata: { k: 'v\u0000' } },
      { 'key\u0000': 'v' },
    ];
    const failures: string[] = [];
    let requests = 0;
    for (const [template, operations] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        // Path-level keys (the proxy's paths carry `servers` and `parameters`) are not operations.
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        const upper = method.toUpperCase() as 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT';
        const path = template.replace(/\{[^}]+\}/g, 'x%00y');
        const queries = (operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
        const query = queries.length === 0 ? '' : `?${queries.map((q) => `${q}=%00`).join('&')}`;
        const attempts =
          upper === 'GET' || upper === 'DELETE'
            ? [{ url: `${path}${query}` }, { url: template.replace(/\{[^}]+\}/g, 'plain') + query }]
            : bodies.map((body) => ({ url: path.replace(/x%00y/g, 'plain'), body }));
        if (upper !== 'GET' && upper !== 'DELETE') attempts.push({ url: path, body: { name: 'n' } });
        for (const attempt of attempts) {
          requests++;
          const answer = await harness.controlPlane.app.inject({
            method: upper,
            url: attempt.url,
            headers: { authorization: `Bearer ${key}`, 'idempotency-key': `nul-${requests}` },
            ...('body' in attempt ? { payload: attempt.body } : {}),
          });
          if (answer.statusCode >= 500)
            failures.push(`${upper} ${attempt.url} -> ${answer.statusCode} ${answer.body}`);
        }
      }
    }
    expect(requests).toBeGreaterThan(80);
    expect(failures).toEqual([]);
  });

  it('names where the NUL is, on open routes too', async () => {
    const page = await harness.controlPlane.app.inject({ method: 'GET', url: '/checkout/%00' });
    expect(page.statusCode).toBe(400);
    expect(page.json()).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: '/id', location: 'params' }],
    });
    const created = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/sdk/customers',
      headers: { authorization: `Bearer ${key}` },
      payload: { externalRef: 'ok', metadata: { note: 'a\u0000b' } },
    });
    expect(created.statusCode).toBe(400);
    expect(created.json()).toMatchObject({ errors: [{ path: '/metadata/note', location: 'body' }] });
  });

  it('reads a POST without a body as {}: optional fields need none, a required one is named', async () => {
    const api = (url: string) =>
      harness.controlPlane.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${key}` } });
    const endpoint = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/webhook_endpoints',
      headers: { authorization: `Bearer ${key}` },
      payload: { url: 'http://127.0.0.1:9/hooks' },
    });
    expect(endpoint.statusCode).toBe(201);
    const rotated = await api(`/v1/webhook_endpoints/${endpoint.json().id}/rotate-secret`);
    expect(rotated.statusCode).toBe(200);
    expect(rotated.json().secret).toMatch(/^whsec_/);
    const missing = await api('/v1/ui/products');
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toMatchObject({
      code: 'validation_failed',
      errors: [{ path: '/name', location: 'body' }],
    });
    // A body that is there is validated as sent.
    const sentNull = await harness.controlPlane.app.inject({
      method: 'POST',
      url: '/v1/ui/products',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: 'null',
    });
    expect(sentNull.statusCode).toBe(400);
  });

  it("answers every request with its id, keeping a caller's own only when it is a short token", async () => {
    const idOf = async (headers: Record<string, string>) =>
      (await harness.controlPlane.app.inject({ method: 'GET', url: '/v1/sdk/merchant', headers })).headers[
        'x-request-id'
      ];
    // Even a refused call (no key) carries one, made here.
    expect(await idOf({})).toMatch(/^req_[0-9a-z]{26}$/);
    expect(await idOf({ 'x-request-id': 'trace-42' })).toBe('trace-42');
    for (const hostile of ['x'.repeat(129), 'two words', 'caf\u00e9', ''])
      expect(await idOf({ 'x-request-id': hostile }), hostile).toMatch(/^req_/);
  });

  it('refuses URLs that match the uri format but no URL parser takes, with 400', async () => {
    const call = (url: string, payload: object) =>
      harness.controlPlane.app.inject({
        method: 'POST',
        url,
        headers: { authorization: `Bearer ${key}` },
        payload,
      });
    const product = (await call('/v1/ui/products', { name: 'Urls' })).json();
    const server = await call('/v1/ui/mcp-servers', { name: 'urls', url: 'http://', productId: product.id });
    expect(server.statusCode).toBe(400);
    expect(server.json()).toMatchObject({ code: 'validation_failed', errors: [{ path: '/url' }] });
    const customer = (await call('/v1/sdk/customers', {})).json();
    const session = await call('/v1/sdk/checkout-sessions', {
      customerRef: customer.reference,
      topup: { credits: 1, amount: 100 },
      successUrl: 'https://',
    });
    expect(session.statusCode).toBe(400);
  });

  it('answers requests HTTP cannot read with problem+json too, naming what to fix', async () => {
    // Issue 60: `pur_…` pasted from the docs into a URL as it is (an unencoded UTF-8 ellipsis) got
    // Fastify's bare {"error":"Bad Request","message":"Client Error"} from Node's parser.
    const port = await freePort();
    await harness.controlPlane.app.listen({ host: '127.0.0.1', port });
    const raw = (head: string) => rawExchange(port, Buffer.concat([Buffer.from(head, 'utf8')]));
    const unencoded = await raw(
      `GET /v1/sdk/invoices/upcoming?purchaseRef=pur_\u2026 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`,
    );
    const tooLarge = await raw(
      `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`,
    );
    for (const [answer, status, code] of [
      [unencoded, 400, 'malformed_request'],
      [tooLarge, 431, 'headers_too_large'],
    ] as const) {
      expect(answer.status).toBe(status);
      expect(answer.head).toMatch(/\r\ncontent-type: application\/problem\+json/i);
      expect(JSON.parse(answer.body)).toMatchObject({ status, code });
    }
    expect(JSON.parse(unencoded.body).detail).toContain('percent-encode');
  });
});
