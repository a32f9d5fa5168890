import { createServer, type IncomingMessage, type Server } from 'node:http';
import { startListeningControlPlane } from '../../test/helpers/control-plane';

/** The control plane on the run's real PostgreSQL, Redis and ClickHouse, listening on loopback. */
export const startService = () =>
  startListeningControlPlane({
    bodyLimitBytes: 1024 * 1024,
    webhooks: { allowedHosts: ['127.0.0.1'], timeoutMs: 2_000, enabled: false },
  });

export interface Listening {
  server: Server;
  url: string;
  close(): Promise<void>;
}

/** An HTTP server on loopback with `handle`; its URL and a close that drops open connections. */
export async function listen(
  handle: (request: IncomingMessage, body: Buffer, response: import('node:http').ServerResponse) => void,
): Promise<Listening> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => handle(request, Buffer.concat(chunks), response));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A front that passes requests on to `target` unchanged, except those `fault` answers itself
 * (a 503, a reset): what a load balancer in a bad minute looks like to the SDK. Counts what it saw.
 */
export async function faultyFront(
  target: string,
  /** 'lose': pass the request on, then drop the connection instead of answering (done, answer lost). */
  fault: (
    request: IncomingMessage,
    seen: number,
  ) => 'pass' | 'lose' | { status: number; headers?: Record<string, string> } | 'reset',
): Promise<Listening & { seen: Array<{ method: string; path: string }> }> {
  const seen: Array<{ method: string; path: string }> = [];
  const front = await listen((request, body, response) => {
    seen.push({ method: request.method ?? '', path: request.url ?? '' });
    const decision = fault(request, seen.length);
    if (decision === 'reset') return request.socket.destroy();
    if (typeof decision === 'object') {
      response.writeHead(decision.status, {
        'content-type': 'application/problem+json',
        ...decision.headers,
      });
      return response.end(JSON.stringify({ status: decision.status, code: 'dependency_unavailable' }));
    }
    const headers = { ...request.headers };
    delete headers.host;
    delete headers.connection;
    fetch(`${target}${request.url}`, {
      method: request.method ?? 'GET',
      headers: headers as Record<string, string>,
      ...(body.length === 0 ? {} : { body }),
    }).then(
      async (answer) => {
        const text = Buffer.from(await answer.arrayBuffer());
        if (decision === 'lose') return request.socket.destroy();
        response.writeHead(answer.status, {
          'content-type': answer.headers.get('content-type') ?? 'application/json',
        });
        response.end(text);
      },
      () => request.socket.destroy(),
    );
  });
  return { ...front, seen };
}
