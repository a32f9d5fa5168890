import { lookup as dnsLookup } from 'node:dns';
import { createServer, type Server, type Socket } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OriginClient } from '../src/origin/client';

/**
 * Answers an origin could write, honest and hostile, against the proxy's origin client on a real
 * loopback socket (issue 57): smuggled second answers, Content-Length with Transfer-Encoding,
 * conflicting lengths, bare LF, folded or NUL-bearing headers, oversized chunk sizes, answers cut
 * short, and honest answers split anywhere. Whatever the mix, on connections kept alive and
 * reused, each request ends in an error or in exactly its own answer: never another's.
 */

type Kind =
  | 'plain'
  | 'chunked'
  | 'split'
  | 'smuggled'
  | 'smuggled-chunked'
  | 'cl-and-te'
  | 'two-lengths'
  | 'same-lengths'
  | 'bare-lf'
  | 'folded'
  | 'nul-header'
  | 'huge-chunk'
  | 'cut-short';

const KINDS: Kind[] = [
  'plain',
  'chunked',
  'split',
  'smuggled',
  'smuggled-chunked',
  'cl-and-te',
  'two-lengths',
  'same-lengths',
  'bare-lf',
  'folded',
  'nul-header',
  'huge-chunk',
  'cut-short',
];

const bodyOf = (id: string) => `{"answer":"${id}"}`;
const plain = (body: string) =>
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
const chunked = (body: string) =>
  `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;

/** What an origin writes for request `id` answered as `kind`; `next` is the id a smuggled answer claims. */
function answerFor(kind: Kind, id: string, next: string): string {
  const body = bodyOf(id);
  switch (kind) {
    case 'plain':
    case 'split':
      return plain(body);
    case 'chunked':
      return chunked(body);
    case 'smuggled':
      return plain(body) + plain(bodyOf(next));
    case 'smuggled-chunked':
      return chunked(body) + plain(bodyOf(next));
    case 'cl-and-te':
      return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\ntransfer-encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    case 'two-lengths':
      return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\ncontent-length: ${body.length + 5}\r\n\r\n${body}${plain(bodyOf(next)).slice(0, 5)}`;
    case 'same-lengths':
      return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}, ${body.length}\r\n\r\n${body}`;
    case 'bare-lf':
      return `HTTP/1.1 200 OK\ncontent-length: ${body.length}\n\r\n\r\n${body}`;
    case 'folded':
      return `HTTP/1.1 200 OK\r\nx-a: b\r\n content-length: 0\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    case 'nul-header':
      return `HTTP/1.1 200 OK\r\nx-a: b\u0000c\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    case 'huge-chunk':
      return `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffffff\r\n${body}\r\n0\r\n\r\n`;
    case 'cut-short':
      return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length + 50}\r\n\r\n${body}`;
  }
}

/** Kinds an honest HTTP/1.1 client must read as the answer they are. */
const HONEST = new Set<Kind>(['plain', 'chunked', 'split', 'same-lengths']);

describe("an origin's answers, honest and hostile", () => {
  let server: Server;
  let url: string;
  /** How each request is answered, by its id (the request path's last segment). */
  const plans = new Map<string, { kind: Kind; next: string }>();

  beforeAll(async () => {
    server = createServer((socket: Socket) => {
      let buffered = '';
      socket.on('data', (chunk) => {
        buffered += chunk.toString('latin1');
        for (;;) {
          const end = buffered.indexOf('\r\n\r\n');
          if (end < 0) return;
          const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
          if (buffered.length < end + 4 + length) return;
          const head = buffered.slice(0, end);
          buffered = buffered.slice(end + 4 + length);
          const id = /^POST \/r\/(\S+) /.exec(head)?.[1] ?? '';
          const plan = plans.get(id) ?? { kind: 'plain', next: '' };
          const bytes = answerFor(plan.kind, id, plan.next);
          if (plan.kind === 'split') {
            // Honest bytes in pieces of a few bytes, each its own write.
            for (let i = 0; i < bytes.length; i += 7) socket.write(bytes.slice(i, i + 7));
          } else socket.write(bytes, 'latin1');
          if (plan.kind === 'cut-short') socket.end();
        }
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });

  afterAll(() => {
    server.close();
  });

  const runs = Number(process.env.GATE_FUZZ_RUNS ?? 300);
  it(
    "gives each request its own answer or an error, never another request's, over reused connections",
    async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(fc.constantFrom(...KINDS), fc.boolean()), { minLength: 1, maxLength: 8 }),
          async (requests) => {
            run++;
            const client = new OriginClient({
              connectTimeoutMs: 2_000,
              headersTimeoutMs: 2_000,
              idleTimeoutMs: 2_000,
              keepAliveMs: 30_000,
              maxConnections: 2,
              maxPending: 1_024,
              queueTimeoutMs: 2_000,
              lookup: dnsLookup as never,
            });
            const ids = requests.map((_, i) => `${run}-${i}`);
            requests.forEach(
              ([kind], i) => void plans.set(ids[i] as string, { kind, next: ids[i + 1] ?? `${run}-x` }),
            );
            const results: Array<Promise<{ id: string; kind: Kind; outcome: string | Error }>> = [];
            for (const [i, [kind, concurrent]] of requests.entries()) {
              const id = ids[i] as string;
              const chunks: Buffer[] = [];
              let status = 0;
              const done = client
                .request(
                  url,
                  {
                    method: 'POST',
                    path: `/r/${id}`,
                    headers: { 'content-type': 'application/json' },
                    body: Buffer.from('{}'),
                  },
                  {
                    head(s) {
                      status = s;
                    },
                    data(chunk) {
                      chunks.push(Buffer.from(chunk));
                      return true;
                    },
                  },
                  () => undefined,
                )
                .then(
                  () => ({ id, kind, outcome: `${status} ${Buffer.concat(chunks).toString('latin1')}` }),
                  (error: Error) => ({ id, kind, outcome: error }),
                );
              results.push(done);
              // Some requests wait for the one before: its connection goes back to the pool first.
              if (!concurrent) await done;
            }
            for (const { id, kind, outcome } of await Promise.all(results)) {
              if (outcome instanceof Error) {
                expect(HONEST.has(kind), `${kind} failed: ${outcome.message}`).toBe(false);
                continue;
              }
              // Delivered: exactly this request's own answer, whatever else the origin wrote.
              expect(outcome, kind).toBe(`200 ${bodyOf(id)}`);
            }
            await client.close();
          },
        ),
        { numRuns: runs },
      );
      // About 5 ms a run here; `npm run fuzz:proxy` runs 50,000.
    },
    Math.max(120_000, runs * 20),
  );
});
