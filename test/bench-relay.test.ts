import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBenchTool, startListening } from './helpers/bench-tools';

/**
 * bench/load/relay.c, the latency trials' do-nothing TCP hop (F), built with the machine's C
 * compiler and run before a Node HTTP server. Not timed: what is checked is that it passes every
 * byte both ways as sent (keep-alive calls, bodies larger than its buffer, many connections at
 * once) and that either side closing ends the pair, so a trial through it is the origin's own
 * answers and nothing else.
 */
const work = mkdtempSync(join(tmpdir(), 'relay-'));

let server: Server;
let relay: ChildProcess;
let relayPort = 0;
/** Connections the origin accepted, and how many of them are still open. */
let accepted = 0;
let open = 0;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  // The origin answers each body with its length and hash, then the body itself back.
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'x-path': req.url ?? '',
        'x-length': String(body.length),
        'x-sha': sha(body),
        'content-length': body.length,
      });
      res.end(body);
    });
  });
  server.on('connection', (socket) => {
    accepted++;
    open++;
    socket.on('close', () => open--);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const originPort = (server.address() as AddressInfo).port;
  ({ child: relay, port: relayPort } = await startListening(buildBenchTool('relay', work), [
    String(originPort),
  ]));
});

afterAll(async () => {
  relay.kill('SIGTERM');
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(work, { recursive: true, force: true });
});

/** A POST of `body` through the relay on `agent`: the status, headers and body it answered. */
function post(agent: Agent, path: string, body: Buffer) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>(
    (resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: relayPort,
          path,
          method: 'POST',
          agent,
          headers: { 'content-length': body.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
          );
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      // A relay that lost a byte leaves the origin waiting for the rest: fail, not hang.
      req.setTimeout(10_000, () => req.destroy(new Error(`no answer through the relay for ${path}`)));
      req.end(body);
    },
  );
}

const until = async (done: () => boolean) => {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return done();
};

describe('the bench relay (bench/load/relay.c)', () => {
  it('passes keep-alive calls to the origin and their answers back, byte for byte', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const before = accepted;
    for (let i = 0; i < 50; i++) {
      const body = Buffer.from(
        JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', note: 'é😀\u0000' }),
      );
      const answer = await post(agent, `/f?call=${i}`, body);
      expect(answer.status).toBe(200);
      expect(answer.headers['x-path']).toBe(`/f?call=${i}`);
      expect(answer.headers['x-sha']).toBe(sha(body));
      expect(answer.body.equals(body)).toBe(true);
    }
    // One client connection is one origin connection, kept for every call on it.
    expect(accepted - before).toBe(1);
    agent.destroy();
  });

  it('passes bodies many times its buffer both ways, whole', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const body = randomBytes(3 * 1024 * 1024 + 17);
    const answer = await post(agent, '/large', body);
    expect(answer.headers['x-length']).toBe(String(body.length));
    expect(answer.headers['x-sha']).toBe(sha(body));
    expect(sha(answer.body)).toBe(sha(body));
    agent.destroy();
  });

  it('relays many connections at once, each to its own origin connection', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const before = accepted;
    const bodies = Array.from({ length: 256 }, (_, i) => randomBytes(100 + i * 37));
    const answers = await Promise.all(bodies.map((b, i) => post(agent, `/many/${i}`, b)));
    answers.forEach((a, i) => {
      expect(a.headers['x-path']).toBe(`/many/${i}`);
      expect(a.body.equals(bodies[i] as Buffer)).toBe(true);
    });
    expect(accepted - before).toBeGreaterThan(1);
    expect(accepted - before).toBeLessThanOrEqual(64);
    agent.destroy();
  });

  it('closes the origin connection when the client closes, and the client when the origin does', async () => {
    expect(await until(() => open === 0)).toBe(true);
    const client = connect(relayPort, '127.0.0.1');
    await new Promise((resolve) => client.once('connect', resolve));
    expect(await until(() => open === 1)).toBe(true);
    client.end();
    expect(await until(() => open === 0)).toBe(true);

    // The origin ends a connection after its answer: the relay passes the end on.
    const second = connect(relayPort, '127.0.0.1');
    const chunks: Buffer[] = [];
    second.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise((resolve) => second.once('close', resolve));
    second.write('POST /bye HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi');
    await closed;
    const text = Buffer.concat(chunks).toString('latin1');
    expect(text.startsWith('HTTP/1.1 200')).toBe(true);
    expect(text.endsWith('\r\n\r\nhi')).toBe(true);
    expect(await until(() => open === 0)).toBe(true);
  });
});
