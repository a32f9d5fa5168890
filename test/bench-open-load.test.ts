import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLoadTrial, type Target, wireRequest } from '../bench/harness/load';
import { buildBenchTool } from './helpers/bench-tools';

/**
 * bench/load/open-load.c, the latency trials' optional generator, built with the machine's C
 * compiler and run against a Node HTTP server that counts what it receives. Not timed: what is
 * checked is that every call of the schedule is sent whole, answered and written down once,
 * whatever the server does with its connections.
 */
const work = mkdtempSync(join(tmpdir(), 'open-load-'));
let binary = '';
const BODY = {
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: { name: 'add', arguments: { a: 1, b: 2 } },
};

let server: Server;
let port = 0;
const received: string[] = [];

beforeAll(async () => {
  binary = buildBenchTool('open-load', work);
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${req.headers.authorization} ${Buffer.concat(chunks)}`);
      const body = '{"jsonrpc":"2.0","id":7,"result":{}}';
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': body.length,
      });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(work, { recursive: true, force: true });
});

const target = (to: number): Target => ({
  url: `http://127.0.0.1:${to}/mcp/bench?x=1`,
  token: 'tok',
  call: { method: 'POST', headers: { 'content-type': 'application/json' }, body: BODY },
});

/**
 * Runs open-load at `rate` for `seconds` (asynchronously: the server answers in this process);
 * its trial as the bench reads it, and the raw lines.
 */
async function run(rate: number, seconds: number, to = port) {
  const request = wireRequest(target(to));
  const requestFile = join(work, 'request');
  const out = join(work, 'out.csv');
  writeFileSync(requestFile, request.bytes);
  const { stdout: summary } = await promisify(execFile)(
    binary,
    [request.host, String(request.port), requestFile, String(rate), String(seconds), out],
    { encoding: 'utf8', timeout: 60_000 },
  );
  const csv = readFileSync(out, 'utf8');
  return { summary, lines: csv.trim().split('\n'), trial: openLoadTrial('T', rate, seconds, summary, csv) };
}

describe('open-load', () => {
  it('sends every call of the schedule whole, and writes each answer down once', async () => {
    received.length = 0;
    const { summary, lines, trial } = await run(200, 1);
    expect(received).toHaveLength(200);
    expect(new Set(received)).toEqual(new Set([`POST /mcp/bench?x=1 Bearer tok ${JSON.stringify(BODY)}`]));
    expect(summary).toMatch(/^calls 200 ok 200 late \d+ waited 0 cpu_us \d+\n$/);
    expect(lines).toHaveLength(200);
    for (const line of lines) expect(line).toMatch(/^\d+,200,\d+$/);
    // Each call's due time once: none written down twice, none lost.
    expect(new Set(lines.map((l) => l.split(',')[0])).size).toBe(200);
    expect(trial).toMatchObject({ requests: 200, success: 1, valid: true });
  });

  it('opens a new connection after an answer that closes its own, and loses no call', async () => {
    // An origin that says each answer ends its connection and closes it only 50 ms later, as a
    // busy one may: a call written on that connection meanwhile would never be answered.
    let answered = 0;
    const closing = createNetServer((socket) => {
      let pending = Buffer.alloc(0);
      let done = false;
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        const head = pending.indexOf('\r\n\r\n');
        const length = Number(/content-length: (\d+)/i.exec(pending.toString('latin1'))?.[1] ?? 0);
        if (done || head < 0 || pending.length < head + 4 + length) return;
        done = true;
        answered++;
        socket.write('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}');
        setTimeout(() => socket.end(), 50);
      });
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => closing.listen(0, '127.0.0.1', resolve));
    try {
      const { trial } = await run(100, 1, (closing.address() as AddressInfo).port);
      expect(answered).toBe(100);
      expect(trial).toMatchObject({ requests: 100, success: 1, valid: true });
    } finally {
      await new Promise((resolve) => closing.close(resolve));
    }
  });

  it('reads a trial as invalid when calls failed or fell behind the schedule', () => {
    const csv = (statuses: number[]) =>
      statuses.map((s, i) => `${i * 1000},${s},${1_000_000 + i}\n`).join('');
    const ok = openLoadTrial('T', 10, 1, 'calls 10 ok 10 late 0 waited 0 cpu_us 5', csv(Array(10).fill(200)));
    expect(ok).toMatchObject({ valid: true, success: 1, achievedRate: 10 });
    expect(ok.p50).toBeCloseTo(1.000005, 6);
    const failed = openLoadTrial(
      'T',
      10,
      1,
      'calls 10 ok 9 late 0 waited 0 cpu_us 5',
      csv([...Array(9).fill(200), 0]),
    );
    expect(failed).toMatchObject({ valid: false, success: 0.9 });
    const behind = openLoadTrial(
      'T',
      10,
      1,
      'calls 10 ok 10 late 0 waited 2 cpu_us 5',
      csv(Array(10).fill(200)),
    );
    expect(behind).toMatchObject({ valid: false, achievedRate: 8 });
    const short = openLoadTrial('T', 10, 1, 'calls 9 ok 9 late 0 waited 0 cpu_us 5', csv(Array(9).fill(200)));
    expect(short.valid).toBe(false);
  });
});
