/**
 * BP, the proxy's floor: the same server (uWebSockets.js) and origin client (undici's dispatcher,
 * the proxy's pool settings) with nothing in between. No token check, routing, gating, limits,
 * metering, header filtering or answer inspection: every request is sent to `ORIGIN_URL` and the
 * answer's status, content type and body come back. What a tools/call costs here is what any
 * Node hop built on these two packages costs on this machine, so B2 and B3 are read against it.
 * Prints its port as JSON on stdout.
 */
import uWS from 'uWebSockets.js';
import { Agent, type Dispatcher } from 'undici';

const target = new URL(process.env.ORIGIN_URL ?? '');
const origins = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

function forward(
  res: uWS.HttpResponse,
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

const app = uWS.App().post('/*', (res, req) => {
  const headers = { 'content-type': req.getHeader('content-type'), accept: req.getHeader('accept') };
  const state = { aborted: false };
  res.onAborted(() => {
    state.aborted = true;
  });
  const chunks: Buffer[] = [];
  res.onData((chunk, isLast) => {
    chunks.push(Buffer.from(new Uint8Array(chunk))); // uWS reuses the chunk's memory
    if (isLast) forward(res, state, headers, Buffer.concat(chunks));
  });
});

app.listen('127.0.0.1', 0, (socket) => {
  if (socket === false) {
    process.stderr.write('passthrough could not listen\n');
    process.exit(1);
  }
  const port = uWS.us_socket_local_port(socket as unknown as uWS.us_socket);
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
