/**
 * What an ingest process run alone (SERVICES=ingest) answers over HTTP, on INGEST_METRICS_PORT:
 * `GET /metrics` (what its consumer stored, its event loop and collector; behind METRICS_TOKEN
 * when one is set) and `GET /healthz` (its consumer joining, running or failed). Beside the
 * control plane, ingest's families are on the control plane's page instead.
 */

import { createServer, type Server } from 'node:http';
import { sameSecret } from '@mcp-meter/contracts/kit';
import { EventLoopDelay, GcPauses } from '@mcp-meter/contracts/metrics';
import { type ErrorCode, problemDocument } from '@mcp-meter/control-plane/problem';
import type { IngestMetrics } from '@mcp-meter/ingest';

export interface IngestHttp {
  url: string;
  close(): Promise<void>;
}

export async function serveIngestHttp(options: {
  host: string;
  port: number;
  token: string | undefined;
  metrics: IngestMetrics;
  state: () => 'starting' | 'running' | 'failed';
}): Promise<IngestHttp> {
  const loopDelay = new EventLoopDelay('mcpmeter_ingest_event_loop_delay_seconds');
  const gcPauses = new GcPauses('mcpmeter_ingest_gc');
  const expected = options.token === undefined ? undefined : `Bearer ${options.token}`;
  const server: Server = createServer((request, response) => {
    const answer = (status: number, type: string, body: string) => {
      response.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
    };
    // The API's problem shape and codes (control-plane/src/errors.ts).
    const problem = (code: ErrorCode, detail: string) => {
      const document = problemDocument(code, detail);
      if (document.status === 401) response.setHeader('www-authenticate', 'Bearer realm="metrics"');
      answer(document.status, 'application/problem+json', JSON.stringify(document));
    };
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return problem('method_not_allowed', 'Only GET is answered here');
    if (path === '/healthz') {
      const ingest = options.state();
      if (ingest === 'failed') return problem('service_unavailable', 'The usage consumer failed to start');
      return answer(200, 'application/json', JSON.stringify({ status: 'ok', ingest }));
    }
    if (path !== '/metrics') return problem('route_not_found', 'This process answers /metrics and /healthz');
    if (expected !== undefined && !sameSecret(request.headers.authorization ?? '', expected))
      return problem('unauthorized', 'A metrics token is required (METRICS_TOKEN)');
    answer(
      200,
      'text/plain; version=0.0.4',
      options.metrics.render() + loopDelay.render() + gcPauses.render(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = address !== null && typeof address === 'object' ? address.port : options.port;
  return {
    url: `http://${options.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        loopDelay.close();
        gcPauses.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
