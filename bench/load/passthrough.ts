/**
 * BP, the proxy's floor: the same server (uWebSockets.js) and origin client (undici's dispatcher,
 * the proxy's pool settings) with nothing in between. No token check, routing, gating, limits,
 * metering, header filtering or answer inspection: every request is sent to `ORIGIN_URL` and the
 * answer's status, content type and body come back. What a tools/call costs here is what any
 * Node hop built on these two packages costs on this machine, so B2 and B3 are read against it.
 * Prints its port as JSON on stdout.
 */

import type * as UWS from 'uWebSockets.js';
import { connect, type Socket } from 'node:net';
import { Agent, type Dispatcher } from 'undici';
import uWS from '../../proxy/src/uws';

const target = new URL(process.env.ORIGIN_URL ?? '');
const origins = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

function forward(
  res: UWS.HttpResponse,
  state: { aborted: boolean },
  headers: Record<string, string>,
  body: Buffer,
) {
  let status = '502';
  let contentType = 'application/json';
  origins.dispatch(
    { origin: target.origin, path: target.pathname, method: 'POST', headers, body },
    {
      onRequestStart() {},
      onResponseStart(
        _controller: Dispatcher.DispatchController,
        statusCode: number,
        h: Record<string, string | string[] | undefined>,
      ) {
        status = String(statusCode);
        contentType = String(h['content-type'] ?? contentType);
      },
      onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer) {
        if (state.aborted) return;
        // The trivial origin answers in one chunk with a length: one write, as the proxy does.
        res.cork(() => {
          res.writeStatus(status).writeHeader('content-type', contentType).end(chunk);
        });
      },
      onResponseEnd() {},
      onResponseError() {
        if (!state.aborted) res.cork(() => res.writeStatus('502').end());
      },
    },
  );
}

/**
 * PASSTHROUGH_CLIENT=net: the same hop with a lean HTTP/1.1 keep-alive client over `net` in place
 * of undici, for issue 28's comparison. A bench prototype, not product code: it reads only
 * answers framed by Content-Length (what the bench's origin sends) and nothing else of HTTP.
 */
class LeanClient {
  private readonly idle: Socket[] = [];
  private readonly waiting: Array<(socket: Socket) => void> = [];
  private open = 0;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly max: number,
  ) {}

  post(
    path: string,
    headers: Record<string, string>,
    body: Buffer,
    done: (status: string, type: string, answer: Buffer | undefined) => void,
  ) {
    const head = Buffer.from(
      `POST ${path} HTTP/1.1\r\nhost: ${this.host}:${this.port}\r\ncontent-type: ${headers['content-type']}\r\naccept: ${headers.accept}\r\ncontent-length: ${body.length}\r\n\r\n`,
    );
    this.socket((socket) => {
      let pending: Buffer = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = pending.subarray(0, end).toString('latin1').split('\r\n');
        let length = 0;
        let type = 'application/json';
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          const name = line.slice(0, colon).toLowerCase();
          if (name === 'content-length') length = Number(line.slice(colon + 1));
          else if (name === 'content-type') type = line.slice(colon + 1).trim();
        }
        if (pending.length < end + 4 + length) return;
        socket.off('data', onData);
        socket.off('error', onError);
        done((lines[0] ?? '').split(' ')[1] ?? '502', type, pending.subarray(end + 4, end + 4 + length));
        this.release(socket);
      };
      const onError = () => {
        socket.off('data', onData);
        this.open--;
        done('502', 'application/json', undefined);
      };
      socket.on('data', onData);
      socket.once('error', onError);
      socket.write(Buffer.concat([head, body]));
    });
  }

  private socket(use: (socket: Socket) => void) {
    const socket = this.idle.pop();
    if (socket !== undefined) return use(socket);
    if (this.open >= this.max) return void this.waiting.push(use);
    this.open++;
    const made = connect({ host: this.host, port: this.port, noDelay: true });
    made.once('connect', () => use(made));
    made.on('close', () => {
      const at = this.idle.indexOf(made);
      if (at >= 0) {
        this.idle.splice(at, 1);
        this.open--;
      }
    });
  }

  private release(socket: Socket) {
    const next = this.waiting.shift();
    if (next !== undefined) next(socket);
    else this.idle.push(socket);
  }
}

const lean =
  process.env.PASSTHROUGH_CLIENT === 'net'
    ? new LeanClient(target.hostname, Number(target.port), 256)
    : undefined;

function forwardLean(
  res: UWS.HttpResponse,
  state: { aborted: boolean },
  headers: Record<string, string>,
  body: Buffer,
) {
  (lean as LeanClient).post(target.pathname, headers, body, (status, type, answer) => {
    if (state.aborted) return;
    res.cork(() => {
      res
        .writeStatus(status)
        .writeHeader('content-type', type)
        .end(answer ?? Buffer.alloc(0));
    });
  });
}

const app = uWS.App().post('/*', (res, req) => {
  const headers = { 'content-type': req.getHeader('content-type'), accept: req.getHeader('accept') };
  const state = { aborted: false };
  res.onAborted(() => {
    state.aborted = true;
  });
  const chunks: Buffer[] = [];
  res.onData((chunk, isLast) => {
    chunks.push(Buffer.from(new Uint8Array(chunk))); // uWS reuses the chunk's memory
    if (isLast) (lean === undefined ? forward : forwardLean)(res, state, headers, Buffer.concat(chunks));
  });
});

app.listen('127.0.0.1', 0, (socket) => {
  if (socket === false) {
    process.stderr.write('passthrough could not listen\n');
    process.exit(1);
  }
  const port = uWS.us_socket_local_port(socket as unknown as UWS.us_socket);
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
