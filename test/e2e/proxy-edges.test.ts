import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
} from 'node:http';
import { join } from 'node:path';
import { deflateSync, gzipSync } from 'node:zlib';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient } from '../helpers/api';
import { type ProviderKeys, suffix } from '../helpers/flows';
import { pollUntil } from '../helpers/poll';
import { runAdmin } from '../helpers/processes';
import { type SplitStack, startSeller, startSplitStack } from '../helpers/seller';

interface UsageAnswer {
  records: number;
  total: number;
  groups?: Array<{ value: string; records: number }>;
}
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}
interface Exchange {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

// Long enough that 300 streams opening at once on a loaded two-core machine get their headers
// in time (1 s gave a 504 once in a full run); the origin that never answers still shows the limit.
const HEADERS_TIMEOUT_MS = 3_000;
const IDLE_TIMEOUT_MS = 3_000;
const MAX_BODY_BYTES = 4_096;

const toolCall = (id: number | string, name = 'add') =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { a: 1, b: 2 } } });
const sse = (message: unknown) => `event: message\ndata: ${JSON.stringify(message)}\n\n`;
const result = (id: unknown, text: string) => ({
  jsonrpc: '2.0',
  id,
  result: { content: [{ type: 'text', text }] },
});

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

/**
 * An origin that misbehaves on request, one behaviour per path: it never answers (/hang),
 * streams an answer in two parts with a gate between them (/stream), goes silent after the
 * first event (/stall), reports what it received (/headers), takes a notification (/notify).
 */
async function startEdgeOrigin() {
  const seen: Seen[] = [];
  let openGate: () => void = () => {};
  let gate = new Promise<void>((resolve) => {
    openGate = resolve;
  });
  const closes: Array<{ path: string; at: number }> = [];
  const server: Server = createServer(async (req, res) => {
    const body = await readBody(req);
    const path = (req.url ?? '').split('?')[0] ?? '';
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    res.on('close', () => closes.push({ path, at: Date.now() }));
    const message: unknown = body === '' ? null : JSON.parse(body);
    const id = message !== null && !Array.isArray(message) ? (message as { id?: unknown }).id : null;
    switch (path) {
      case '/hang':
        return;
      case '/headers':
        res.writeHead(200, {
          'content-type': 'application/json',
          'mcp-session-id': 'origin-session-7',
          'x-origin-tag': 'kept',
          'set-cookie': 'origin_session=abc; Path=/',
          'access-control-allow-origin': 'https://only.example',
        });
        res.end(JSON.stringify(result(id, JSON.stringify({ url: req.url, headers: req.headers }))));
        return;
      case '/events':
        if (req.method !== 'GET') break;
        // A session's standalone stream: open until the client leaves, a comment every second.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': open\n\n');
        {
          const timer = setInterval(() => res.write(': ping\n\n'), 1_000);
          res.on('close', () => clearInterval(timer));
        }
        return;
      case '/needs-key':
        // An origin whose key the provider set wrong: it challenges whoever calls it.
        res.writeHead(401, {
          'content-type': 'application/json',
          'www-authenticate': 'Bearer realm="origin"',
        });
        res.end(JSON.stringify({ error: 'invalid api key' }));
        return;
      case '/quiet-events':
        // An event stream whose first event comes only when the gate opens.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        await gate;
        res.end(sse(result(id, 'late')));
        return;
      case '/notify':
        res.writeHead(202);
        res.end();
        return;
      case '/stream':
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write(
          sse({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'first' } }),
        );
        await gate;
        res.end(sse(result(id, 'done')));
        return;
      case '/stall':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(
          sse({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'first' } }),
        );
        return;
      case '/listen':
        // MCP 2026-07-28 subscriptions/listen: the acknowledgement, silence longer than the
        // proxy's idle allowance, then a change notification, then the end of the stream.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(sse({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: {} }));
        await new Promise((resolve) => setTimeout(resolve, IDLE_TIMEOUT_MS + 1_500));
        res.end(sse({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: {} }));
        return;
      case '/task': {
        // The MCP tasks extension (SEP-2663): a tool call answered with a task handle, then the
        // client polls tasks/get until the task's result is inlined.
        const method = (message as { method?: string } | null)?.method;
        const task = {
          taskId: 'task-1',
          createdAt: '2026-11-25T00:00:00Z',
          lastUpdatedAt: '2026-11-25T00:00:01Z',
          ttlMs: 60_000,
        };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            result:
              method === 'tools/call'
                ? { resultType: 'task', status: 'working', ...task }
                : {
                    resultType: 'complete',
                    status: 'completed',
                    ...task,
                    result: { content: [{ type: 'text', text: 'computed' }] },
                  },
          }),
        );
        return;
      }
      case '/big-error':
        // A tool that fails after producing megabytes (an image): the error flag comes last.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            result: {
              content: [{ type: 'image', data: 'Q'.repeat(3 << 20), mimeType: 'image/png' }],
              isError: true,
            },
          }),
        );
        return;
      case '/long-stream':
        // Megabytes of progress before the call's answer, a JSON-RPC error.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < 48; i++)
          res.write(
            sse({
              jsonrpc: '2.0',
              method: 'notifications/message',
              params: { level: 'info', data: 'p'.repeat(64 << 10) },
            }),
          );
        res.end(sse({ jsonrpc: '2.0', id, error: { code: -32603, message: 'gave up' } }));
        return;
      case '/batch': {
        // Answers each request of a batch; the tool `fail` errs. Notifications get no answer.
        const messages = JSON.parse(body) as Array<{ id?: unknown; params?: { name?: string } }>;
        const answers = messages
          .filter((m) => m.id !== undefined)
          .map((m) =>
            m.params?.name === 'fail'
              ? { jsonrpc: '2.0', id: m.id, error: { code: -32602, message: 'no' } }
              : result(m.id, 'ok'),
          );
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answers));
        return;
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(result(id, '3')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = address !== null && typeof address === 'object' ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    closes,
    release() {
      openGate();
      gate = new Promise<void>((resolve) => {
        openGate = resolve;
      });
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What a stream has delivered once `needle` is in it, or by `ms` (the proxy may open with `:`). */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, needle: string, ms: number) {
  const decoder = new TextDecoder();
  const deadline = Date.now() + ms;
  let text = '';
  while (!text.includes(needle)) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const next = await Promise.race([
      reader.read(),
      new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), left)),
    ]);
    if (next === 'late' || next.done) break;
    text += decoder.decode(next.value, { stream: true });
  }
  return text;
}

/** A raw HTTP exchange: full control over headers and body framing, which fetch does not give. */
function send(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer[] },
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    // The path goes as written: URL parsing would resolve dot segments before they are sent.
    const { hostname, port } = new URL(url);
    const path = url.slice(url.indexOf('/', url.indexOf('//') + 2));
    const request = { hostname, port, path, method: options.method ?? 'POST', headers: options.headers };
    const req = httpRequest(request, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    if (Array.isArray(options.body)) for (const chunk of options.body) req.write(chunk);
    else if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

/**
 * What the proxy does at its edges, against a real control plane, ingest, Redis, Kafka and
 * ClickHouse: identity refused, bodies too large, servers switched off, origins that refuse,
 * hang, stall or stream, clients that leave, and which headers cross in each direction.
 */
describe('the proxy at its edges', () => {
  const infra = inject('infra');
  let stack: SplitStack;
  let baseUrl: string;
  let proxyUrl: string;
  let origin: Awaited<ReturnType<typeof startEdgeOrigin>>;
  let api: ReturnType<typeof apiClient>;
  let productId: string;
  let freePlanId: string;

  const register = async (
    path: string,
    extra: Record<string, unknown> = {},
    url = `${origin.url}${path}`,
  ) => {
    const created = await api<{ id: string; subdomain: string }>('POST', '/v1/ui/mcp-servers', {
      name: `edge-${path.replace(/\W/g, '') || 'root'}-${suffix()}`,
      url,
      productId,
      defaultPlanId: freePlanId,
      ...extra,
    });
    expect(created.status).toBe(201);
    return { ...created.body, proxied: `${proxyUrl}/mcp/${created.body.subdomain}` };
  };
  const customerWithToken = async () => {
    const customer = (await api<{ reference: string }>('POST', '/v1/sdk/customers', {})).body;
    const token = (
      await api<{ accessToken: string }>('POST', `/v1/sdk/customers/${customer.reference}/tokens`, {})
    ).body.accessToken;
    return { ref: customer.reference, token };
  };
  const jsonHeaders = (token?: string) => ({
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
  });
  /** Records of one customer in ClickHouse, by a property, once there are `count` of them. */
  const recordsOf = async (customerRef: string, count: number, groupBy = 'outcome') =>
    pollUntil(
      async () =>
        (
          await api<UsageAnswer>(
            'GET',
            `/ui/meters/requests/usage?customerRef=${customerRef}&groupBy=${groupBy}`,
          )
        ).body,
      (body) => body.records >= count,
      { what: `${count} usage records of ${customerRef}`, timeoutMs: 30_000 },
    );

  beforeAll(async () => {
    stack = await startSplitStack({
      name: 'edges',
      infra,
      secretKey: 'cd'.repeat(32),
      logLevel: 'error',
      proxy: {
        PROXY_MAX_BODY_BYTES: String(MAX_BODY_BYTES),
        PROXY_ORIGIN_CONNECT_TIMEOUT_MS: '1000',
        PROXY_ORIGIN_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        PROXY_ORIGIN_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
        EMITTER_LINGER_MS: '20',
        PROXY_METRICS_TOKEN: 'metrics-secret',
      },
    });
    baseUrl = stack.baseUrl;
    proxyUrl = stack.proxyUrl;
    await stack.ready;
    origin = await startEdgeOrigin();
    const seller = await startSeller(stack, {
      provider: 'Edges Co',
      product: 'Edges',
      plans: [{ name: 'Free', price: 0, limit: 1_000_000 }],
    });
    api = seller.api;
    productId = seller.productId;
    freePlanId = seller.plans.Free as string;
  });

  afterAll(async () => {
    await stack?.stop();
    await origin?.close();
  });

  it('asks for a bearer token (RFC 6750, MCP authorization) and never calls the origin without one', async () => {
    const server = await register('/plain');
    const before = origin.seen.length;
    const missing = await send(server.proxied, { headers: jsonHeaders(), body: toolCall(11) });
    expect(missing.status).toBe(401);
    // RFC 9728 §5.1: the challenge names the server's protected-resource metadata and scope.
    expect(missing.headers['www-authenticate']).toMatch(
      /^Bearer realm="mcp", resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource\/mcp\/[a-z0-9-]+", scope="mcp"$/,
    );
    expect(JSON.parse(missing.body)).toMatchObject({ jsonrpc: '2.0', id: 11, error: { code: -32001 } });

    const { token } = await customerWithToken();
    const [head, payload, signature] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...claims, sub: 'cus_someone_else' })).toString('base64url')}.${signature}`;
    // The genuine token first: the proxy remembers it, and the forgery ends as it does (the
    // same signature), which must not pass for it.
    const genuine = await send(server.proxied, { headers: jsonHeaders(token), body: toolCall(13) });
    expect(genuine.status).toBe(200);
    for (const bad of [forged, 'not-a-jwt', `${token}x`, 'bnVsbA.e30.AAAA', 'e30.bnVsbA.AAAA', '..']) {
      const refused = await send(server.proxied, { headers: jsonHeaders(bad), body: toolCall(12) });
      expect(refused.status).toBe(401);
      expect(refused.headers['www-authenticate']).toMatch(
        /^Bearer realm="mcp", resource_metadata="[^"]+", scope="mcp", error="invalid_token", error_description="[^"]+"$/,
      );
      expect(JSON.parse(refused.body)).toMatchObject({ id: 12, error: { code: -32001 } });
    }
    // A token of another provider opens none of this provider's servers.
    const other = await runAdmin<ProviderKeys>(['provider', 'create', '--name', 'Other Co'], {
      ...process.env,
      DATABASE_URL: infra.databaseUrl,
      SECRET_KEY: 'cd'.repeat(32),
      DATA_DIR: join(stack.dir, 'data'),
    });
    const otherApi = apiClient(baseUrl, other.sandboxKey);
    const stranger = (await otherApi<{ reference: string }>('POST', '/v1/sdk/customers', {})).body.reference;
    const strangerToken = (
      await otherApi<{ accessToken: string }>('POST', `/v1/sdk/customers/${stranger}/tokens`, {})
    ).body.accessToken;
    // Another provider's server is answered as if it did not exist, so tokens map no one else's.
    const foreign = await send(server.proxied, { headers: jsonHeaders(strangerToken), body: toolCall(13) });
    expect(foreign.status).toBe(404);
    expect(JSON.parse(foreign.body)).toMatchObject({ code: 'mcp_server_not_found' });
    // Without a valid token, a server that exists and one that does not answer alike.
    for (const path of [server.proxied, `${proxyUrl}/mcp/no-such-server-${suffix()}`]) {
      const anonymous = await send(path, { headers: jsonHeaders(), body: toolCall(14) });
      expect(anonymous.status).toBe(401);
      expect(JSON.parse(anonymous.body)).toMatchObject({ id: 14, error: { code: -32001 } });
    }
    // The genuine token's call alone reached the origin.
    expect(origin.seen.length).toBe(before + 1);
  });

  it('refuses bodies over the limit with 413, declared or streamed, before the origin sees them', async () => {
    const server = await register('/plain');
    const { token } = await customerWithToken();
    const before = origin.seen.length;
    const big = JSON.stringify({
      jsonrpc: '2.0',
      id: 21,
      method: 'tools/call',
      params: { name: 'add', arguments: { pad: 'x'.repeat(MAX_BODY_BYTES) } },
    });
    const declared = await send(server.proxied, { headers: jsonHeaders(token), body: big });
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Request body too large', data: { code: 'payload_too_large' } },
    });
    // Chunked, with no length up front: refused once the running total passes the limit.
    const pieces = Array.from({ length: 8 }, (_, i) => Buffer.from(big.slice(i * 1024, (i + 1) * 1024)));
    const streamed = await send(server.proxied, {
      headers: { ...jsonHeaders(token), 'transfer-encoding': 'chunked' },
      body: pieces,
    });
    expect(streamed.status).toBe(413);
    // Just under the limit passes.
    const fits = await send(server.proxied, { headers: jsonHeaders(token), body: toolCall(22) });
    expect(fits.status).toBe(200);
    expect(origin.seen.length).toBe(before + 1);
  });

  it('answers for unknown routes and servers, and honours inactive and suspended servers', async () => {
    const { token } = await customerWithToken();
    const nowhere = await send(`${proxyUrl}/elsewhere`, { headers: jsonHeaders(token), body: toolCall(31) });
    expect(nowhere.status).toBe(404);
    expect(JSON.parse(nowhere.body)).toMatchObject({ code: 'route_not_found' });
    const unknown = await send(`${proxyUrl}/mcp/no-such-server-${suffix()}`, {
      headers: jsonHeaders(token),
      body: toolCall(32),
    });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ code: 'mcp_server_not_found' });

    const server = await register('/plain');
    const before = origin.seen.length;
    for (const status of ['inactive', 'suspended'] as const) {
      expect((await api('PATCH', `/v1/ui/mcp-servers/${server.id}`, { status })).status).toBe(200);
      const refused = await pollUntil(
        () => send(server.proxied, { headers: jsonHeaders(token), body: toolCall(33) }),
        (answer) => answer.status === 503,
        { what: `the proxy to see the server ${status}`, timeoutMs: 10_000 },
      );
      expect(JSON.parse(refused.body)).toMatchObject({
        id: 33,
        error: { code: -32000, message: `This MCP server is ${status}` },
      });
    }
    expect(origin.seen.length).toBe(before);
    expect((await api('PATCH', `/v1/ui/mcp-servers/${server.id}`, { status: 'active' })).status).toBe(200);
    const back = await pollUntil(
      () => send(server.proxied, { headers: jsonHeaders(token), body: toolCall(34) }),
      (answer) => answer.status === 200,
      { what: 'the proxy to see the server active again', timeoutMs: 10_000 },
    );
    expect(JSON.parse(back.body)).toMatchObject({ id: 34, result: { content: [{ text: '3' }] } });
  });

  it('turns an origin that refuses or does not answer in time into a JSON-RPC error, recorded as upstream_error', async () => {
    const customer = await customerWithToken();
    const closedPort = await freePort();
    const refusing = await register('', {}, `http://127.0.0.1:${closedPort}/mcp`);
    const hanging = await register('/hang');

    const refused = await send(refusing.proxied, {
      headers: jsonHeaders(customer.token),
      body: toolCall(41),
    });
    expect(refused.status).toBe(200);
    expect(JSON.parse(refused.body)).toMatchObject({
      jsonrpc: '2.0',
      id: 41,
      error: { code: -32603, message: 'The MCP server is unreachable; try again' },
    });

    const started = Date.now();
    const late = await send(hanging.proxied, { headers: jsonHeaders(customer.token), body: toolCall(42) });
    const waited = Date.now() - started;
    expect(late.status).toBe(200);
    expect(JSON.parse(late.body)).toMatchObject({
      id: 42,
      error: { code: -32603, message: 'The MCP server did not answer in time; try again' },
    });
    expect(waited).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);

    // Not a JSON-RPC request (no id to answer): gateway statuses instead.
    const notification = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const gone = await send(refusing.proxied, { headers: jsonHeaders(customer.token), body: notification });
    expect(gone.status).toBe(502);
    expect(JSON.parse(gone.body)).toMatchObject({ code: 'origin_unreachable' });
    const slow = await send(hanging.proxied, { headers: jsonHeaders(customer.token), body: notification });
    expect(slow.status).toBe(504);
    expect(JSON.parse(slow.body)).toMatchObject({ code: 'origin_timeout' });

    const recorded = await recordsOf(customer.ref, 2);
    expect(recorded.records).toBe(2);
    expect(recorded.groups).toEqual([{ value: 'upstream_error', records: 2 }]);
  });

  it("does not pass on an origin's authentication challenge: the client's token is not what it refused", async () => {
    const customer = await customerWithToken();
    const server = await register('/needs-key', { authHeaderName: 'X-Api-Key', authApiKey: 'wrong-key' });
    const answer = await send(server.proxied, { headers: jsonHeaders(customer.token), body: toolCall(45) });
    expect(answer.status).toBe(200);
    expect(answer.headers['www-authenticate']).toBeUndefined();
    expect(JSON.parse(answer.body)).toMatchObject({
      id: 45,
      error: { code: -32603, message: expect.stringContaining("refused the proxy's credentials") },
    });
    expect(origin.seen.at(-1)?.headers['x-api-key']).toBe('wrong-key');
    const notification = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const plain = await send(server.proxied, { headers: jsonHeaders(customer.token), body: notification });
    expect(plain.status).toBe(502);
    expect(plain.headers['www-authenticate']).toBeUndefined();
    expect(JSON.parse(plain.body)).toMatchObject({ code: 'origin_auth_failed' });
    const recorded = await recordsOf(customer.ref, 1);
    expect(recorded.groups).toEqual([{ value: 'upstream_error', records: 1 }]);
  });

  it('streams an SSE answer as it comes, without waiting for the end', async () => {
    const customer = await customerWithToken();
    const server = await register('/stream');
    const response = await fetch(server.proxied, {
      method: 'POST',
      headers: jsonHeaders(customer.token),
      body: toolCall(51),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    // The origin holds the rest back until this first event has reached the client.
    let text = await readUntil(reader, '"data":"first"', 2_000);
    expect(text).toContain('"data":"first"');
    expect(text).not.toContain('"result"');
    origin.release();
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      text += decoder.decode(next.value);
    }
    expect(text).toContain(JSON.stringify(result(51, 'done')));
    const recorded = await recordsOf(customer.ref, 1);
    expect(recorded.groups).toEqual([{ value: 'success', records: 1 }]);
  });

  it('keeps a subscriptions/listen stream open through silence longer than the idle allowance, unmetered', async () => {
    const customer = await customerWithToken();
    const server = await register('/listen');
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const started = Date.now();
    const response = await fetch(server.proxied, {
      method: 'POST',
      headers: {
        ...jsonHeaders(customer.token),
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'subscriptions/listen',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 71,
        method: 'subscriptions/listen',
        params: { _meta: meta, notifications: { toolsListChanged: true } },
      }),
    });
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const opened = await readUntil(reader, 'notifications/subscriptions/acknowledged', 5_000);
    expect(opened).toContain('notifications/subscriptions/acknowledged');
    const later = await readUntil(reader, 'notifications/tools/list_changed', IDLE_TIMEOUT_MS + 10_000);
    expect(later).toContain('notifications/tools/list_changed');
    expect(Date.now() - started).toBeGreaterThan(IDLE_TIMEOUT_MS + 1_000);
    // Listening is not a call: the customer's only record is the tool call that follows.
    const call = await send(`${(await register('/')).proxied}`, {
      headers: jsonHeaders(customer.token),
      body: toolCall(72),
    });
    expect(call.status).toBe(200);
    const recorded = await recordsOf(customer.ref, 1);
    expect(recorded.records).toBe(1);
  });

  it('meters a call answered with a task handle once, at the call, and not the polling after it', async () => {
    const customer = await customerWithToken();
    const server = await register('/task');
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const post = (method: string, id: number, params: Record<string, unknown>, name?: string) =>
      send(server.proxied, {
        headers: {
          ...jsonHeaders(customer.token),
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': method,
          ...(name === undefined ? {} : { 'mcp-name': name }),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
      });
    const started = await post(
      'tools/call',
      81,
      { name: 'slow_compute', arguments: { seconds: 1 } },
      'slow_compute',
    );
    expect(JSON.parse(started.body).result).toMatchObject({ resultType: 'task', taskId: 'task-1' });
    for (const id of [82, 83]) {
      const polled = await post('tasks/get', id, { taskId: 'task-1' });
      expect(JSON.parse(polled.body).result).toMatchObject({ status: 'completed' });
    }
    const recorded = await recordsOf(customer.ref, 1);
    expect(recorded.groups).toEqual([{ value: 'task', records: 1 }]);
    // A task handle is a call the plan admitted: billable like any served call.
    expect(recorded.total).toBe(1);
  });

  it('ends a stream whose origin goes silent, and records the call as upstream_error', async () => {
    const customer = await customerWithToken();
    const server = await register('/stall');
    const started = Date.now();
    const answer = await send(server.proxied, { headers: jsonHeaders(customer.token), body: toolCall(61) });
    expect(Date.now() - started).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 50);
    expect(answer.status).toBe(200);
    expect(answer.body).toContain('"data":"first"');
    const recorded = await recordsOf(customer.ref, 1);
    expect(recorded.groups).toEqual([{ value: 'upstream_error', records: 1 }]);
  });

  it('reads the outcome of answers of any size: an error after megabytes is recorded as an error', async () => {
    const customer = await customerWithToken();
    const big = await register('/big-error');
    const long = await register('/long-stream');
    const bigAnswer = await send(big.proxied, { headers: jsonHeaders(customer.token), body: toolCall(81) });
    expect(bigAnswer.status).toBe(200);
    expect(bigAnswer.body.length).toBeGreaterThan(3 << 20);
    expect(JSON.parse(bigAnswer.body)).toMatchObject({ id: 81, result: { isError: true } });
    const longAnswer = await send(long.proxied, { headers: jsonHeaders(customer.token), body: toolCall(82) });
    expect(longAnswer.status).toBe(200);
    expect(longAnswer.body.length).toBeGreaterThan(3 << 20);
    expect(longAnswer.body).toContain('"id":82,"error"');
    const recorded = await recordsOf(customer.ref, 2);
    expect(recorded.records).toBe(2);
    expect(recorded.groups).toEqual([{ value: 'error', records: 2 }]);
  });

  it('cancels the origin request when the client leaves, and still records the call', async () => {
    const customer = await customerWithToken();
    const server = await register('/stream');
    // The metrics page's tool calls of one outcome, over the proxy's workers.
    const callsCounted = async (outcome: string) => {
      const page = await send(`${proxyUrl}/metrics`, {
        method: 'GET',
        headers: { authorization: 'Bearer metrics-secret' },
      });
      let sum = 0;
      for (const m of page.body.matchAll(/^mcpmeter_proxy_tool_calls_total\{([^}]*)\} (\d+)$/gm))
        if ((m[1] as string).includes(`outcome="${outcome}"`)) sum += Number(m[2]);
      return sum;
    };
    const [cancelledBefore, errorsBefore] = [await callsCounted('cancelled'), await callsCounted('error')];
    const controller = new AbortController();
    const response = await fetch(server.proxied, {
      method: 'POST',
      headers: jsonHeaders(customer.token),
      body: toolCall(71),
      signal: controller.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    const closesBefore = origin.closes.length;
    controller.abort();
    await pollUntil(
      async () => origin.closes.slice(closesBefore).filter((c) => c.path === '/stream').length,
      (n) => n >= 1,
      { what: 'the origin request closed after the client left', timeoutMs: 5_000 },
    );
    origin.release();
    // The call reached the origin and counted against the limit: it is recorded, as cancelled.
    const recorded = await recordsOf(customer.ref, 1, 'cancelled');
    expect(recorded.records).toBe(1);
    expect(recorded.groups).toEqual([{ value: 'true', records: 1 }]);
    expect((await recordsOf(customer.ref, 1)).groups).toEqual([{ value: 'error', records: 1 }]);
    // The metrics page counts it apart from tools' errors: the client gave up, nothing failed.
    expect(await callsCounted('cancelled')).toBe(cancelledBefore + 1);
    expect(await callsCounted('error')).toBe(errorsBefore);
  });

  it('forwards end-to-end headers and the query, adds the origin key, drops credentials and hop-by-hop headers', async () => {
    const customer = await customerWithToken();
    const server = await register('/headers', { authHeaderName: 'X-Api-Key', authApiKey: 'origin-secret-9' });
    const answer = await send(`${server.proxied}?region=eu`, {
      headers: {
        ...jsonHeaders(customer.token),
        'mcp-session-id': 'client-session-3',
        'mcp-protocol-version': '2025-06-18',
        'last-event-id': '17',
        'x-trace': 'abc',
        connection: 'keep-alive, x-hop',
        'x-hop': 'for the next hop only',
        te: 'trailers',
        'proxy-authorization': 'Basic c2VjcmV0',
      },
      body: toolCall(81),
    });
    expect(answer.status).toBe(200);
    const message = JSON.parse(answer.body) as { result: { content: Array<{ text: string }> } };
    const received = JSON.parse(message.result.content[0]?.text ?? '{}') as {
      url: string;
      headers: Record<string, string>;
    };
    expect(received.url).toBe('/headers?region=eu');
    expect(received.headers).toMatchObject({
      'mcp-session-id': 'client-session-3',
      'mcp-protocol-version': '2025-06-18',
      'last-event-id': '17',
      'x-trace': 'abc',
      'x-api-key': 'origin-secret-9',
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    });
    for (const dropped of ['authorization', 'proxy-authorization', 'te', 'x-hop'])
      expect(received.headers[dropped]).toBeUndefined();
    // The origin's own headers come back, the session id among them.
    expect(answer.headers['mcp-session-id']).toBe('origin-session-7');
    expect(answer.headers['x-origin-tag']).toBe('kept');
    // Every origin shares the proxy's host: no origin may set a cookie there.
    expect(answer.headers['set-cookie']).toBeUndefined();
  });

  it('forwards a JSON-RPC batch whole and records each tools/call in it by its own answer', async () => {
    const customer = await customerWithToken();
    const server = await register('/batch');
    const batch = [
      JSON.parse(toolCall(101)),
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99 } },
      JSON.parse(toolCall('b-102', 'fail')),
      { jsonrpc: '2.0', id: 103, method: 'tools/list' },
    ];
    const answer = await send(server.proxied, {
      headers: jsonHeaders(customer.token),
      body: JSON.stringify(batch),
    });
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as Array<{ id: unknown }>).map((a) => a.id)).toEqual([101, 'b-102', 103]);
    expect(JSON.parse(origin.seen.at(-1)?.body ?? '[]')).toEqual(batch);
    // Two tools/call: one record each; the notification and tools/list are not metered.
    const recorded = await recordsOf(customer.ref, 2);
    expect(recorded.records).toBe(2);
    expect(recorded.groups?.sort((a, b) => a.value.localeCompare(b.value))).toEqual([
      { value: 'error', records: 1 },
      { value: 'success', records: 1 },
    ]);
  });

  it('keeps calls flowing while more clients than the origin pool holds keep their GET streams open', async () => {
    const customer = await customerWithToken();
    const server = await register('/events');
    // More standalone streams than PROXY_ORIGIN_MAX_CONNECTIONS (256 by default).
    const clients = Array.from({ length: 300 }, () => new AbortController());
    const opening = Promise.all(
      clients.map(async (client) => {
        const response = await fetch(server.proxied, {
          headers: { authorization: `Bearer ${customer.token}`, accept: 'text/event-stream' },
          signal: client.signal,
        });
        expect(response.status).toBe(200);
        const reader = (response.body as ReadableStream<Uint8Array>).getReader();
        expect(await readUntil(reader, ': open', 10_000)).toContain(': open');
      }),
    );
    const opened = await Promise.race([
      opening.then(() => 'open'),
      new Promise<'stuck'>((resolve) => setTimeout(() => resolve('stuck'), 10_000)),
    ]);
    expect(opened).toBe('open');
    // Queued behind the streams, it would end in the headers timeout's error, not this answer.
    const answer = await Promise.race([
      send(server.proxied, { headers: jsonHeaders(customer.token), body: toolCall(111) }),
      new Promise<'queued'>((resolve) => setTimeout(() => resolve('queued'), 5_000)),
    ]);
    expect(answer).not.toBe('queued');
    expect(JSON.parse((answer as Exchange).body)).toMatchObject({
      id: 111,
      result: { content: [{ text: '3' }] },
    });
    for (const client of clients) client.abort();
  });

  it('lets pages from allowed origins in, CORS headers on every answer, and refuses every other origin with 403', async () => {
    const customer = await customerWithToken();
    const server = await register('/headers', { allowedOrigins: ['https://app.example'] });
    const before = origin.seen.length;
    const preflight = (from: string) =>
      send(server.proxied, {
        method: 'OPTIONS',
        headers: {
          origin: from,
          'access-control-request-method': 'POST',
          'access-control-request-headers':
            'authorization, content-type, mcp-session-id, mcp-protocol-version',
        },
      });
    const allowed = await preflight('https://app.example');
    expect(allowed.status).toBe(204);
    expect(allowed.headers).toMatchObject({
      'access-control-allow-origin': 'https://app.example',
      'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
      'access-control-allow-headers': 'authorization, content-type, mcp-session-id, mcp-protocol-version',
      'access-control-max-age': '86400',
      vary: 'origin',
    });
    // Another site, a look-alike, and a server that does not exist all get the same 403.
    for (const from of ['http://evil.example', 'https://app.example.evil.example', 'null']) {
      const refused = await preflight(from);
      expect(refused.status).toBe(403);
      expect(refused.headers['access-control-allow-origin']).toBeUndefined();
    }
    const nowhere = await send(`${proxyUrl}/mcp/no-such-server-here`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(nowhere.status).toBe(403);
    expect(origin.seen.length).toBe(before);

    const browser = { origin: 'https://app.example' };
    const answer = await send(server.proxied, {
      headers: { ...jsonHeaders(customer.token), ...browser },
      body: toolCall(121),
    });
    expect(answer.status).toBe(200);
    // The proxy's CORS headers, not the origin's (one value, so browsers accept it).
    expect(answer.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(answer.headers['access-control-expose-headers']).toContain('mcp-session-id');
    expect(answer.headers['mcp-session-id']).toBe('origin-session-7');
    // A refusal must be readable too: the client needs the challenge to sign in.
    const unauthorized = await send(server.proxied, {
      headers: { ...jsonHeaders(), ...browser },
      body: toolCall(122),
    });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(unauthorized.headers['access-control-expose-headers']).toContain('www-authenticate');
    // A page from another origin, with a valid token: 403 before anything is judged, forwarded or spent.
    const seen = origin.seen.length;
    const foreign = await send(server.proxied, {
      headers: { ...jsonHeaders(customer.token), origin: 'http://evil.example' },
      body: toolCall(124),
    });
    expect(foreign.status).toBe(403);
    expect(JSON.parse(foreign.body).code).toBe('browser_origin_not_allowed');
    expect(foreign.headers['access-control-allow-origin']).toBeUndefined();
    expect(origin.seen.length).toBe(seen);
    // Without an Origin (not a browser), the origin's headers pass as they are.
    const direct = await send(server.proxied, { headers: jsonHeaders(customer.token), body: toolCall(123) });
    expect(direct.headers['access-control-allow-origin']).toBe('https://only.example');
    // The default is no origin at all: browsers are refused until the provider allows one.
    const closed = await register('/headers');
    const refusedByDefault = await send(closed.proxied, {
      headers: { ...jsonHeaders(customer.token), ...browser },
      body: toolCall(125),
    });
    expect(refusedByDefault.status).toBe(403);
  });

  it('passes notifications through with the origin status and records no usage for them', async () => {
    const customer = await customerWithToken();
    const server = await register('/notify');
    const accepted = await send(server.proxied, {
      headers: jsonHeaders(customer.token),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    expect(accepted.status).toBe(202);
    expect(accepted.body).toBe('');
    // A tools/call afterwards is the only record of this customer.
    const plain = await register('/plain');
    const answered = await send(plain.proxied, { headers: jsonHeaders(customer.token), body: toolCall(91) });
    expect(answered.status).toBe(200);
    const recorded = await recordsOf(customer.ref, 1);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await recordsOf(customer.ref, 1)).records).toBe(1);
    expect(recorded.groups).toEqual([{ value: 'success', records: 1 }]);
  });

  it('refuses every body it cannot read as plain UTF-8 JSON-RPC before the origin sees it', async () => {
    const customer = await customerWithToken();
    const server = await register('/plain');
    const before = origin.seen.length;
    const call = toolCall(131);
    const cases: Array<{
      why: string;
      headers: Record<string, string>;
      body: string | Buffer[];
      code: string;
    }> = [
      {
        why: 'gzip',
        headers: { 'content-encoding': 'gzip' },
        body: [gzipSync(call)],
        code: 'body_encoded',
      },
      {
        why: 'deflate',
        headers: { 'content-encoding': 'deflate' },
        body: [deflateSync(call)],
        code: 'body_encoded',
      },
      {
        why: 'a byte-order mark',
        headers: {},
        body: [Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(call)],
        code: 'body_byte_order_mark',
      },
      {
        why: 'UTF-16',
        headers: { 'content-type': 'application/json; charset=utf-16' },
        body: [Buffer.from(call, 'utf16le')],
        code: 'body_charset_unsupported',
      },
      {
        why: 'text/plain',
        headers: { 'content-type': 'text/plain' },
        body: call,
        code: 'body_not_json_content_type',
      },
      {
        why: 'no content type',
        headers: { 'content-type': '' },
        body: call,
        code: 'body_not_json_content_type',
      },
      {
        why: 'Latin-1 bytes',
        headers: {},
        body: [Buffer.from(call.replace('add', 'ädd'), 'latin1')],
        code: 'body_not_utf8',
      },
      { why: 'broken JSON', headers: {}, body: `${call}}`, code: 'body_not_json' },
      { why: 'an empty body', headers: {}, body: '', code: 'body_not_json' },
      { why: 'a JSON string', headers: {}, body: JSON.stringify(call), code: 'body_not_jsonrpc' },
      {
        why: 'a call without an id',
        headers: {},
        body: JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'add' } }),
        code: 'tool_call_without_id',
      },
      {
        why: 'a call with a null id',
        headers: {},
        body: JSON.stringify({ jsonrpc: '2.0', id: null, method: 'tools/call', params: { name: 'add' } }),
        code: 'tool_call_without_id',
      },
      {
        why: 'two calls of a batch under one id',
        headers: {},
        body: `[${toolCall(132)},${toolCall(132, 'other')}]`,
        code: 'tool_call_id_repeated',
      },
    ];
    for (const c of cases) {
      const headers: Record<string, string> = { ...jsonHeaders(customer.token), ...c.headers };
      if (headers['content-type'] === '') delete headers['content-type'];
      const answer = await send(server.proxied, { headers, body: c.body });
      expect({ why: c.why, status: answer.status }).toEqual({ why: c.why, status: 400 });
      expect(JSON.parse(answer.body), c.why).toMatchObject({
        jsonrpc: '2.0',
        id: null,
        error: { code: expect.any(Number), message: expect.any(String), data: { code: c.code } },
      });
    }
    // MCP is POST, GET and DELETE: a PUT carrying a call is not forwarded either.
    const put = await send(server.proxied, {
      method: 'PUT',
      headers: jsonHeaders(customer.token),
      body: call,
    });
    expect(put.status).toBe(405);
    expect(origin.seen.length).toBe(before);
    // Plain JSON, with or without a UTF-8 charset, still goes through.
    const plain = await send(server.proxied, {
      headers: { ...jsonHeaders(customer.token), 'content-type': 'application/json; charset=UTF-8' },
      body: call,
    });
    expect(plain.status).toBe(200);
    expect(origin.seen.length).toBe(before + 1);
    expect((await recordsOf(customer.ref, 1)).records).toBe(1);
  });

  it('keeps every request on the registered origin path: dot segments refused, raw or encoded', async () => {
    const customer = await customerWithToken();
    const server = await register('/plain');
    const before = origin.seen.length;
    for (const rest of [
      '/../../x',
      '/a/../../x',
      '/%2e%2e/x',
      '/%2E%2e/x',
      '/.%2e/x',
      '/%2e/x',
      '/a%2f..%2fx',
      '/..%5cx',
      '/a\\..\\x',
      '/%zz',
    ]) {
      const answer = await send(`${server.proxied}${rest}`, {
        headers: jsonHeaders(customer.token),
        body: toolCall(141),
      });
      expect({ rest, status: answer.status }).toEqual({ rest, status: 400 });
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'path_not_allowed' });
    }
    expect(origin.seen.length).toBe(before);
    // An ordinary sub-path stays below the registered path.
    const below = await send(`${server.proxied}/extra`, {
      headers: jsonHeaders(customer.token),
      body: toolCall(142),
    });
    expect(below.status).toBe(200);
    expect(origin.seen.at(-1)?.url).toBe('/plain/extra');
  });

  it("refuses a customer's tokens once it is deleted or its tokens are revoked", async () => {
    const server = await register('/plain');
    for (const end of ['revoke', 'delete'] as const) {
      const customer = await customerWithToken();
      const before = await send(server.proxied, {
        headers: jsonHeaders(customer.token),
        body: toolCall(151),
      });
      expect(before.status).toBe(200);
      const ended =
        end === 'delete'
          ? await api('DELETE', `/v1/sdk/customers/${customer.ref}`)
          : await api('POST', `/v1/sdk/customers/${customer.ref}/tokens/revoke`);
      expect(ended.status).toBe(200);
      const refused = await pollUntil(
        () => send(server.proxied, { headers: jsonHeaders(customer.token), body: toolCall(152) }),
        (answer) => answer.status === 401,
        { what: `the proxy to refuse a token after ${end}`, timeoutMs: 10_000 },
      );
      expect(refused.headers['www-authenticate']).toContain('token revoked');
    }
  });

  it("sends an event stream's head as soon as the origin does, before any event", async () => {
    const customer = await customerWithToken();
    const server = await register('/quiet-events');
    const head = await new Promise<{ status: number; type: string; body: Promise<string> }>(
      (resolve, reject) => {
        const { hostname, port, pathname } = new URL(server.proxied);
        const req = httpRequest(
          { hostname, port, path: pathname, method: 'POST', headers: jsonHeaders(customer.token) },
          (res) => {
            const body = new Promise<string>((done) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
            });
            resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body });
          },
        );
        req.on('error', reject);
        req.end(toolCall(161));
      },
    );
    // The head arrived while the origin still holds its only event back.
    expect(head).toMatchObject({ status: 200, type: 'text/event-stream' });
    origin.release();
    const body = await head.body;
    expect(body.startsWith(':\n')).toBe(true);
    expect(body).toContain('"late"');
  });

  it('serves /metrics only with PROXY_METRICS_TOKEN when one is set', async () => {
    const refused = await send(`${proxyUrl}/metrics`, { method: 'GET', headers: {} });
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="metrics"');
    const wrong = await send(`${proxyUrl}/metrics`, {
      method: 'GET',
      headers: { authorization: 'Bearer nope' },
    });
    expect(wrong.status).toBe(401);
    const scraped = await send(`${proxyUrl}/metrics`, {
      method: 'GET',
      headers: { authorization: 'Bearer metrics-secret' },
    });
    expect(scraped.status).toBe(200);
    expect(scraped.body).toContain('mcpmeter_proxy_http_requests_total');
  });
});
