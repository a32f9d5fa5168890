import { createServer, type IncomingMessage, type Server } from 'node:http';
import fc from 'fast-check';

/** What the fuzz origin received for one case (by its `x-case` header). */
export interface Received {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
}

/** One generated request: what is sent to the proxy, and what the origin should see if it is sent on. */
export interface FuzzCase {
  method: string;
  /** After `/mcp/<subdomain>`: a sub-path and a query, as written on the wire (UTF-8). */
  suffix: string;
  headers: Array<[string, string]>;
  body: string;
}

/**
 * A real Node `http` server that records every request by its `x-case` header and answers each
 * JSON-RPC request in a POST with a result, counting the tool calls it answers.
 */
export async function startFuzzOrigin() {
  const received = new Map<string, Received[]>();
  const unlabelled: Received[] = [];
  const parseErrors: string[] = [];
  let toolCalls = 0;
  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const seen: Received = {
        method: req.method ?? '',
        url: req.url ?? '',
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
      };
      const label = req.headers['x-case'];
      if (typeof label === 'string') received.set(label, [...(received.get(label) ?? []), seen]);
      else unlabelled.push(seen);
      let parsed: unknown;
      try {
        parsed = req.method === 'POST' ? JSON.parse(seen.body.toString('utf8')) : undefined;
      } catch {
        parsed = undefined;
      }
      const messages = (Array.isArray(parsed) ? parsed : [parsed]).filter(
        (m): m is { id: unknown; method?: unknown } =>
          m !== null && typeof m === 'object' && 'id' in m && (m as { id: unknown }).id !== null,
      );
      if (messages.length === 0) {
        res.writeHead(req.method === 'POST' ? 202 : 405, { 'x-origin': 'fuzz' });
        res.end();
        return;
      }
      const answers = messages.map((m) => {
        if (m.method === 'tools/call') toolCalls++;
        return { jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'ok' }] } };
      });
      res.writeHead(200, { 'content-type': 'application/json', 'x-origin': 'fuzz' });
      res.end(JSON.stringify(Array.isArray(parsed) ? answers : answers[0]));
    });
  });
  server.on('clientError', (error: Error, socket) => {
    parseErrors.push(error.message);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/base`,
    received,
    unlabelled,
    parseErrors,
    toolCalls: () => toolCalls,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Pieces of targets and header values: plain, percent-encoded, hostile to a Latin-1 writer. Bytes
 * the proxy's HTTP parser (uWebSockets.js) refuses itself are left out: it answers them by going
 * silent, so each would cost the fuzzer a timeout; the gate test sends them once each.
 */
const CLEAN_TARGET = ['a', 'Z9', '-._~', '%20', '%41', '%2F', '%c3%a9', ":@!$&'()*+,;=", '"<>^`{|}', '#'];
const HOSTILE_TARGET = [
  '%0d',
  '%0A',
  '%00',
  '%7f',
  '%2f',
  '%5C',
  '%zz',
  'é',
  '\u010d\u010a',
  '\u0120',
  '😀',
  '.',
  '..',
  '\\',
  '\x7f',
];
const CLEAN_VALUE = ['a', 'Z', '0', ' ', '\t', ',', ';', '"', '=', ':', '/'];
const HOSTILE_VALUE = ['é', '\u010d\u010a', '\x7f'];
const HEADER_NAMES = ['x-a', 'x-b', 'X-Mixed-Case', 'mcp-session-id', 'cookie', 'accept-language', 'x-dup'];

/** Mostly clean pieces, one in eight hostile: most requests go through, and many do not. */
const pieces = (clean: string[], hostile: string[], max: number) =>
  fc
    .array(
      fc.oneof(
        { weight: 7, arbitrary: fc.constantFrom(...clean) },
        { weight: 1, arbitrary: fc.constantFrom(...hostile) },
      ),
      { maxLength: max },
    )
    .map((p) => p.join(''));

const call = (id: number, extra = '') =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}${extra}}`;

const BODIES = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 1e9 }).map((id) => call(id)) },
  { weight: 1, arbitrary: fc.constant('{"jsonrpc":"2.0","id":5,"method":"tools/list"}') },
  { weight: 1, arbitrary: fc.constant(`[${call(6)},${call(7)}]`) },
  {
    weight: 1,
    arbitrary: fc.constant(
      '{"jsonrpc":"2.0","id":8,"method":"ping","METHOD":"tools/call","params":{"name":"echo"}}',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constant(
      '{"jsonrpc":"2.0","id":9,"method":"tools/call","method":"tools/call","params":{"name":"echo"}}',
    ),
  },
  { weight: 1, arbitrary: fc.constant(call(10, `,"x":${'['.repeat(70)}${']'.repeat(70)}`)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
  {
    weight: 1,
    arbitrary: fc.constant('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"\\ud800"}}'),
  },
);

export const fuzzCases: fc.Arbitrary<FuzzCase> = fc.record({
  method: fc.constantFrom('POST', 'POST', 'POST', 'POST', 'GET', 'DELETE'),
  suffix: fc
    .tuple(
      fc.array(pieces(CLEAN_TARGET, HOSTILE_TARGET, 4), { maxLength: 3 }),
      fc.option(pieces(CLEAN_TARGET, HOSTILE_TARGET, 4)),
    )
    .map(
      ([segments, query]) => `${segments.map((s) => `/${s}`).join('')}${query === null ? '' : `?${query}`}`,
    )
    // A target ending in a bare "?" reaches the origin without it: a spelling, not a change.
    .filter((suffix) => !suffix.endsWith('?')),
  headers: fc.array(fc.tuple(fc.constantFrom(...HEADER_NAMES), pieces(CLEAN_VALUE, HOSTILE_VALUE, 5)), {
    maxLength: 4,
  }),
  body: BODIES,
});

/**
 * A header's value as uWebSockets.js reads it: trimmed of spaces, tabs and (as it trims them, by
 * signed bytes) any byte past ASCII at either end. A value with such a byte inside reaches the
 * proxy whole and is refused; what the proxy forwards is what it read (docs/proxy.md).
 */
export const valueAsRead = (value: string): string =>
  value.replace(/^[\t \u0080-\uffff]+|[\t \u0080-\uffff]+$/g, ''); // the fuzzer sends no other controls

/** The values an origin received for `name`, in order (Node keeps each header line apart in rawHeaders). */
export function valuesOf(received: Received, name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < received.rawHeaders.length; i += 2)
    if (received.rawHeaders[i]?.toLowerCase() === name) values.push(received.rawHeaders[i + 1] ?? '');
  return values;
}
