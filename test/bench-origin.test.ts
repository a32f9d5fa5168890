import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBenchTool, startListening } from './helpers/bench-tools';

/**
 * bench/load/origin.c, the latency trials' origin, built with the machine's C compiler. Not
 * timed: what is checked is that it answers as the bench's Node origin answers the bench's call,
 * over keep-alive and pipelined requests in order, only once a request's whole body has come,
 * refuses what it cannot read, and starts on a port just left by another origin, as the bench
 * puts it where the Node origin stood.
 */
const work = mkdtempSync(join(tmpdir(), 'origin-'));
let binary = '';
/** What bench/load/servers.ts answers the bench's call (bench/scenarios/tool-call.json). */
const NODE_ORIGIN_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  result: { content: [{ type: 'text', text: String(1 + 2) }] },
});
const CALL = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'add', arguments: { a: 1, b: 2 } },
});
const request = (body = CALL, extra = '') =>
  `POST /b1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

let origin: ChildProcess;
let port = 0;

const start = (at: number) => startListening(binary, [String(at)]);

/** A connection to the origin and everything it answers, with whether it closed. */
function open(): Promise<{ socket: Socket; read: () => string; closed: () => boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    const socket = connect(port, '127.0.0.1', () =>
      resolve({ socket, read: () => Buffer.concat(chunks).toString('utf8'), closed: () => ended }),
    );
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => {
      ended = true;
    });
    socket.on('error', reject);
  });
}

const until = async (done: () => boolean) => {
  for (let i = 0; i < 500 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  return done();
};
const answers = (text: string) => text.split('HTTP/1.1 200 OK').length - 1;

beforeAll(async () => {
  binary = buildBenchTool('origin', work);
  ({ child: origin, port } = await start(0));
});

afterAll(() => {
  origin?.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

describe('the C origin of the latency trials', () => {
  it("answers the bench's call as the Node origin does", async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/b3`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: CALL,
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('application/json');
    expect(await answer.text()).toBe(NODE_ORIGIN_BODY);
  });

  it('answers 20,000 pipelined requests on one connection in order, the client reading late', async () => {
    const c = await open();
    // 20-byte requests, 150-byte answers the client does not read at first: the kernel's buffers
    // fill, then the origin's own 64 KB of answers, while requests it has read wait for room.
    c.socket.pause();
    c.socket.write('GET /b1 HTTP/1.1\r\n\r\n'.repeat(20_000));
    await new Promise((r) => setTimeout(r, 300));
    c.socket.resume();
    expect(await until(() => answers(c.read()) === 20_000)).toBe(true);
    const text = c.read();
    const one = text.slice(0, text.length / 20_000);
    expect(text).toBe(one.repeat(20_000));
    expect(one.endsWith(`\r\n\r\n${NODE_ORIGIN_BODY}`)).toBe(true);
    // Still open: keep-alive.
    c.socket.write(request());
    expect(await until(() => answers(c.read()) === 20_001)).toBe(true);
    expect(c.closed()).toBe(false);
    c.socket.destroy();
  });

  it("answers only once a request's whole body has come", async () => {
    const c = await open();
    const whole = request();
    c.socket.write(whole.slice(0, whole.length - 10));
    await new Promise((r) => setTimeout(r, 200));
    expect(c.read()).toBe('');
    c.socket.write(whole.slice(whole.length - 10));
    expect(await until(() => answers(c.read()) === 1)).toBe(true);
    c.socket.destroy();
  });

  it.each([
    ['a chunked body', 'POST /b1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'],
    ['a body with no length', 'POST /b1 HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['a length that is no number', 'POST /b1 HTTP/1.1\r\nContent-Length: x1\r\n\r\n'],
    ['a body over its buffer', 'POST /b1 HTTP/1.1\r\nContent-Length: 70000\r\n\r\n'],
    ['a head over its buffer', `POST /b1 HTTP/1.1\r\nX-Big: ${'a'.repeat(70_000)}`],
  ])('refuses %s with 400 and closes', async (_name, raw) => {
    const c = await open();
    c.socket.write(raw);
    expect(await until(c.closed)).toBe(true);
    expect(c.read()).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
  });

  it('closes after answering a request that asks it to', async () => {
    const c = await open();
    c.socket.write(request(CALL, 'Connection: close\r\n') + request());
    expect(await until(c.closed)).toBe(true);
    expect(answers(c.read())).toBe(1);
  });

  it('starts on the port another origin just left, its connections still open then', async () => {
    const at = await freePort();
    const first = await start(at);
    expect(first.port).toBe(at);
    const c = await new Promise<Socket>((resolve) => {
      const s = connect(at, '127.0.0.1', () => resolve(s));
    });
    c.write(request());
    await new Promise((r) => c.once('data', r));
    first.child.kill('SIGTERM');
    await new Promise((r) => first.child.once('exit', r));
    c.destroy();
    const second = await start(at);
    expect(second.port).toBe(at);
    const answer = await fetch(`http://127.0.0.1:${at}/b3`, { method: 'POST', body: CALL });
    expect(await answer.text()).toBe(NODE_ORIGIN_BODY);
    second.child.kill('SIGKILL');
  });
});
