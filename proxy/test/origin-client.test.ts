import { lookup as dnsLookup } from 'node:dns';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type Server, type Socket } from 'node:net';
import { OutboundGuard } from '@mcp-meter/contracts/kit';
import { generate as selfSigned } from 'selfsigned';
import { afterEach, describe, expect, it } from 'vitest';
import {
  OriginClient,
  type OriginClientOptions,
  type OriginControl,
  originNeverRead,
} from '../src/origin/client';

/**
 * The proxy's HTTP/1.1 origin client against servers that write exact bytes (node:net), so
 * every framing HTTP/1.1 allows is met as the wire carries it: split anywhere, reused or not.
 */

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const servers: Array<{ close(): void }> = [];
const clients: OriginClient[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) server.close();
  for (const client of clients.splice(0)) await client.close();
});

function client(options: Partial<OriginClientOptions> = {}): OriginClient {
  const made = new OriginClient({
    connectTimeoutMs: 2_000,
    headersTimeoutMs: 2_000,
    idleTimeoutMs: 2_000,
    keepAliveMs: 30_000,
    maxConnections: 16,
    maxPending: 1_024,
    queueTimeoutMs: 2_000,
    lookup: dnsLookup as never,
    ...options,
  });
  clients.push(made);
  return made;
}

/** A server that answers each request it reads (up to its blank line and body) with `answer`. */
async function rawServer(
  answer: (request: string, socket: Socket, index: number) => void,
): Promise<{ url: string; connections: () => number; requests: string[] }> {
  let connections = 0;
  const requests: string[] = [];
  const server: Server = createServer((socket) => {
    connections++;
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const request = buffered.slice(0, end + 4 + length);
        buffered = buffered.slice(end + 4 + length);
        requests.push(request);
        answer(request, socket, requests.length - 1);
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, connections: () => connections, requests };
}

function call(
  through: OriginClient,
  origin: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    pauseAfterFirst?: (control: OriginControl) => void;
  } = {},
): Promise<Answer> {
  let status = 0;
  let headers: IncomingHttpHeaders = {};
  const chunks: Buffer[] = [];
  let control: OriginControl | undefined;
  return through
    .request(
      origin,
      {
        method: options.method ?? 'POST',
        path: '/mcp',
        headers: options.headers ?? { 'content-type': 'application/json' },
        body: options.body === undefined ? null : Buffer.from(options.body),
      },
      {
        head(s, h) {
          status = s;
          headers = h;
        },
        data(chunk) {
          chunks.push(Buffer.from(chunk));
          if (chunks.length === 1 && options.pauseAfterFirst !== undefined && control !== undefined) {
            options.pauseAfterFirst(control);
            return false;
          }
          return true;
        },
      },
      (c) => {
        control = c;
      },
    )
    .then(() => ({ status, headers, body: Buffer.concat(chunks).toString('utf8') }));
}

/** Writes `text` in pieces of `size` bytes, one per event-loop turn. */
async function dribble(socket: Socket, text: string, size: number): Promise<void> {
  for (let i = 0; i < text.length; i += size) {
    socket.write(text.slice(i, i + size));
    await new Promise((r) => setTimeout(r, 1));
  }
}

describe('the proxy origin client', () => {
  it('reads Content-Length answers and reuses one connection for calls in turn', async () => {
    const origin = await rawServer((_request, socket, i) => {
      const body = `{"n":${i}}`;
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
    });
    const through = client();
    for (let i = 0; i < 5; i++) {
      expect(await call(through, origin.url, { body: '{"jsonrpc":"2.0"}' })).toMatchObject({
        status: 200,
        body: `{"n":${i}}`,
        headers: { 'content-type': 'application/json' },
      });
    }
    expect(origin.connections()).toBe(1);
    expect(origin.requests[0]).toMatch(/^POST \/mcp HTTP\/1\.1\r\nhost: 127\.0\.0\.1:\d+\r\n/);
    expect(origin.requests[0]).toContain('content-length: 17\r\n\r\n{"jsonrpc":"2.0"}');
  });

  it('decodes chunked answers split at every byte, skips trailers, and reuses the connection', async () => {
    const events = ['event: message\ndata: {"a":1}\n\n', 'event: message\ndata: {"b":"é✓"}\n\n'];
    const wire = `${events.map((e) => `${Buffer.byteLength(e).toString(16)};ext=1\r\n${e}\r\n`).join('')}0\r\nx-trailer: t\r\n\r\n`;
    const origin = await rawServer((_request, socket) => {
      void dribble(
        socket,
        `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${wire}`,
        1,
      );
    });
    const through = client();
    for (let i = 0; i < 2; i++) {
      const answer = await call(through, origin.url, { body: '{}' });
      expect(answer.body).toBe(events.join(''));
    }
    expect(origin.connections()).toBe(1);
  });

  it('reads a close-delimited answer to its end and does not reuse that connection', async () => {
    const origin = await rawServer((_request, socket) => {
      socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"until":"close"}');
    });
    const through = client();
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('{"until":"close"}');
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('{"until":"close"}');
    expect(origin.connections()).toBe(2);
  });

  it('skips interim 1xx answers, reads bodiless 202 and 204 answers, and reuses the connection', async () => {
    const origin = await rawServer((_request, socket, i) => {
      if (i === 0)
        socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n');
      else socket.write('HTTP/1.1 204 No Content\r\nset-cookie: a=1\r\nset-cookie: b=2\r\n\r\n');
    });
    const through = client();
    expect(await call(through, origin.url, { body: '{}' })).toMatchObject({ status: 202, body: '' });
    expect(await call(through, origin.url, { body: '{}' })).toMatchObject({
      status: 204,
      body: '',
      headers: { 'set-cookie': ['a=1', 'b=2'] },
    });
    expect(origin.connections()).toBe(1);
  });

  it('gives header names lower-cased and values trimmed, repeated names together, on every answer', async () => {
    const origin = await rawServer((_request, socket) => {
      socket.write(
        'HTTP/1.1 200 OK\r\nContent-Type:  application/json \r\nX-Trace: a\r\nx-trace: b\r\nSet-Cookie: s=1\r\nContent-Length: 2, 2\r\n\r\n{}',
      );
    });
    const through = client();
    // The second answer reads the names as remembered from the first.
    for (let i = 0; i < 2; i++) {
      const answer = await call(through, origin.url, { body: '{}' });
      expect(answer.body).toBe('{}');
      expect(answer.headers).toEqual({
        'content-type': 'application/json',
        'x-trace': ['a', 'b'],
        'set-cookie': ['s=1'],
        'content-length': '2, 2',
      });
    }
    expect(origin.connections()).toBe(1);
  });

  it('refuses answers it cannot read rather than guess', async () => {
    const heads = [
      'HTTP/2 200\r\n\r\n',
      'HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd',
      'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n',
      'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n',
      'HTTP/1.1 200 OK\r\n: no name\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 OK\r\nBad Name: x\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 200 OK\r\ncontent-length: 0\r\nno colon at the end\r\n\r\n',
    ];
    const origin = await rawServer((_request, socket, i) => {
      socket.write(heads[i] ?? '');
    });
    const through = client();
    for (const head of heads)
      await expect(call(through, origin.url, { body: '{}' }), head).rejects.toMatchObject({
        code: 'origin_protocol_error',
      });
  });

  it('times out an origin that does not answer, and one that goes silent within its answer', async () => {
    const origin = await rawServer((_request, socket, i) => {
      if (i === 1) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc');
    });
    const through = client({ headersTimeoutMs: 200, idleTimeoutMs: 200 });
    await expect(call(through, origin.url, { body: '{}' })).rejects.toMatchObject({
      code: 'origin_headers_timeout',
    });
    await expect(call(through, origin.url, { body: '{}' })).rejects.toMatchObject({
      code: 'origin_body_timeout',
    });
  });

  it('stops reading while the sink is paused and goes on when resumed', async () => {
    let written = 0;
    const origin = await rawServer((_request, socket) => {
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n');
      setTimeout(() => {
        written = 1;
        socket.write('6\r\nsecond\r\n0\r\n\r\n');
      }, 50);
    });
    const through = client();
    let resumedAt = 0;
    const answer = await call(through, origin.url, {
      body: '{}',
      pauseAfterFirst: (control) =>
        setTimeout(() => {
          resumedAt = written;
          control.resume();
        }, 300),
    });
    expect(answer.body).toBe('firstsecond');
    // The second chunk was on the wire long before the resume; it was read only after it.
    expect(resumedAt).toBe(1);
  });

  it('queues calls past its connection limit and serves them all on that many connections', async () => {
    const origin = await rawServer((_request, socket) => {
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'), 20);
    });
    const through = client({ maxConnections: 2 });
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => call(through, origin.url, { body: '{}' })),
    );
    expect(answers.every((a) => a.body === 'ok')).toBe(true);
    expect(origin.connections()).toBe(2);
  });

  it('refuses a call past its queue at once and one that waited past its time, neither written', async () => {
    const origin = await rawServer((_request, socket) => {
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'), 400);
    });
    const through = client({ maxConnections: 1, maxPending: 1, queueTimeoutMs: 150 });
    const holding = call(through, origin.url, { body: '{}' });
    // Dialled and written before the next two are asked for.
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    const waiting = call(through, origin.url, { body: '{}' }).catch((error: unknown) => ({
      error,
      after: performance.now() - started,
    }));
    const full = await call(through, origin.url, { body: '{}' }).catch((error: unknown) => ({
      error,
      after: performance.now() - started,
    }));
    // The queue's one place is taken: refused before the waiting one's time is up.
    expect(full).toMatchObject({ error: { code: 'origin_busy' } });
    expect(originNeverRead((full as { error: unknown }).error)).toBe(true);
    const waited = (await waiting) as { error: unknown; after: number };
    expect(waited.error).toMatchObject({ code: 'origin_busy' });
    expect(originNeverRead(waited.error)).toBe(true);
    expect(waited.after).toBeGreaterThanOrEqual(140);
    expect((await holding).body).toBe('ok');
    // Only the first reached the origin; the freed connection serves the next call.
    expect(origin.requests).toHaveLength(1);
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('ok');
    expect(origin.connections()).toBe(1);
  });

  it('frees a place in its queue when a waiting call is aborted', async () => {
    const origin = await rawServer((_request, socket) => {
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'), 200);
    });
    const through = client({ maxConnections: 1, maxPending: 1, queueTimeoutMs: 5_000 });
    const holding = call(through, origin.url, { body: '{}' });
    await new Promise((r) => setTimeout(r, 50));
    let control: OriginControl | undefined;
    const leaving = through.request(
      origin.url,
      { method: 'POST', path: '/mcp', headers: {}, body: Buffer.from('{}') },
      { head() {}, data: () => true },
      (c) => {
        control = c;
      },
    );
    control?.abort(new Error('client went away'));
    await expect(leaving).rejects.toThrow('client went away');
    // Its place is free again: the next call waits for the connection and is served.
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('ok');
    expect((await holding).body).toBe('ok');
    expect(origin.requests).toHaveLength(2);
  });

  it('dials again when the origin closed an idle connection, and honours its Keep-Alive timeout', async () => {
    const origin = await rawServer((_request, socket, i) => {
      socket.write(`HTTP/1.1 200 OK\r\nkeep-alive: timeout=5\r\ncontent-length: 1\r\n\r\n${i}`);
      if (i === 0) setTimeout(() => socket.end(), 20);
    });
    const through = client();
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('0');
    await new Promise((r) => setTimeout(r, 100));
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('1');
    expect(origin.connections()).toBe(2);
  });

  it('sends a request again when the origin had closed the reused connection before reading it', async () => {
    // The origin closes the idle connection (FIN) and, in the same turn, before the client has
    // read that FIN, a request goes out on it: the origin's TCP answers it with a reset. The
    // request was never read, so it goes again on a new connection, once.
    const sockets: Socket[] = [];
    const origin = await rawServer((_request, socket, i) => {
      sockets.push(socket);
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${String(i).length}\r\n\r\n${i}`);
    });
    const through = client();
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('0');
    for (let round = 1; round <= 20; round++) {
      sockets.at(-1)?.destroy();
      expect((await call(through, origin.url, { body: `{"n":${round}}` })).body).toBe(String(round));
    }
    // Every request read exactly once, each on a connection of its own.
    expect(origin.requests.map((r) => r.slice(r.indexOf('\r\n\r\n') + 4))).toEqual([
      '{}',
      ...Array.from({ length: 20 }, (_, i) => `{"n":${i + 1}}`),
    ]);
    expect(origin.connections()).toBe(21);
  });

  it('sends again after a reset before any answer, never after a close that may follow a read', async () => {
    // After reading the second request, the origin resets the connection (RST: its TCP had the
    // request unread, or threw it away) or closes it (FIN) without answering. A reset before any
    // byte of an answer is taken as unread and sent again once, on a new connection; a close
    // may follow a call that ran, so that call fails once, and not as unread.
    for (const end of ['reset', 'close'] as const) {
      const origin = await rawServer((_request, socket, i) => {
        if (i !== 1) socket.write(`HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n${i}`);
        else if (end === 'reset') socket.resetAndDestroy();
        else socket.destroy();
      });
      const through = client();
      await call(through, origin.url, { body: '{}' });
      const second = await call(through, origin.url, { body: '{"n":2}' }).then(
        (answer) => answer.body,
        (error: unknown) => error,
      );
      if (end === 'reset') {
        expect(second).toBe('2');
        expect(origin.requests).toHaveLength(3);
        expect(origin.connections()).toBe(2);
      } else {
        expect(second).toBeInstanceOf(Error);
        expect(originNeverRead(second)).toBe(false);
        expect(origin.requests).toHaveLength(2);
        expect(origin.connections()).toBe(1);
      }
    }
  });

  it('marks a failed dial as a request the origin never read', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const failed = await call(client(), `http://127.0.0.1:${port}`, { body: '{}' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((failed as { code?: string }).code).toBe('ECONNREFUSED');
    expect(originNeverRead(failed)).toBe(true);
  });

  it('reuses an idle connection within its Keep-Alive time and dials again after it', async () => {
    // timeout=2: reused for a second (a second short of what the origin announced), then not,
    // though the origin has not closed it.
    const origin = await rawServer((_request, socket, i) => {
      socket.write(`HTTP/1.1 200 OK\r\nkeep-alive: timeout=2\r\ncontent-length: 1\r\n\r\n${i}`);
    });
    // Long waits otherwise: the sweep looks once a second, so it is the hand-out that refuses it.
    const through = client({ headersTimeoutMs: 8_000, idleTimeoutMs: 8_000 });
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('0');
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('1');
    expect(origin.connections()).toBe(1);
    await new Promise((r) => setTimeout(r, 1_100));
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('2');
    expect(origin.connections()).toBe(2);
  });

  it('cancels a call when aborted, and the connection is not handed to the next call', async () => {
    const origin = await rawServer((_request, socket, i) => {
      if (i === 0) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial');
      else socket.write('HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nnext');
    });
    const through = client({ maxConnections: 1 });
    let control: OriginControl | undefined;
    const first = through.request(
      origin.url,
      { method: 'POST', path: '/', headers: {}, body: null },
      {
        head() {},
        data() {
          control?.abort(new Error('client went away'));
          return true;
        },
      },
      (c) => {
        control = c;
      },
    );
    await expect(first).rejects.toThrow('client went away');
    expect((await call(through, origin.url, { body: '{}' })).body).toBe('next');
  });

  it('refuses headers that would split the request, before dialling', async () => {
    const origin = await rawServer(() => undefined);
    const through = client();
    const unsendable: Record<string, string>[] = [
      { 'x-a': 'ok\r\nx-injected: 1' },
      { 'bad name': 'v' },
      { 'x-b': 'nul\u0000' },
    ];
    for (const headers of unsendable)
      await expect(call(through, origin.url, { headers, body: '{}' })).rejects.toMatchObject({
        code: 'origin_protocol_error',
      });
    expect(origin.connections()).toBe(0);
  });

  it('dials only addresses the SSRF guard accepts', async () => {
    const origin = await rawServer((_request, socket) =>
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'),
    );
    const port = new URL(origin.url).port;
    const guarded = client({ lookup: new OutboundGuard([]).lookup as never });
    await expect(call(guarded, `http://localhost:${port}`, { body: '{}' })).rejects.toMatchObject({
      code: 'unsafe_url',
    });
    const allowed = client({ lookup: new OutboundGuard(['localhost']).lookup as never });
    expect((await call(allowed, `http://localhost:${port}`, { body: '{}' })).status).toBe(200);
  });

  it('speaks HTTP/1.1 over TLS to https origins', async () => {
    const tls = await selfSigned([{ name: 'commonName', value: '127.0.0.1' }], {
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    const server = createHttpsServer({ key: tls.private, cert: tls.cert }, (request, response) => {
      let body = '';
      request.on('data', (c) => {
        body += c;
      });
      request.on('end', () => response.end(`echo ${body}`));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
    const untrusting = client();
    await expect(call(untrusting, url, { body: 'x' })).rejects.toThrow();
    const through = client({ ca: tls.cert });
    expect((await call(through, url, { body: 'hello' })).body).toBe('echo hello');
    expect((await call(through, url, { body: 'again' })).body).toBe('echo again');
  });
});
