/**
 * What issue 57's checks cost per tool call, measured alone (the proxy bench's CPU per call moves
 * by more than this between runs on a busy machine): the body's JSON shape check (depth, repeated
 * and folded keys, surrogates) beside the JSON.parse it follows, and the target and header checks,
 * on the bodies and heads the proxy bench sends. Prints a table; writes nothing.
 *
 *   node --import ./deploy/loader.mjs bench/gate-checks.ts
 *   BEFORE=/path/to/an/older/checkout node --import ./deploy/loader.mjs bench/gate-checks.ts
 *
 * With BEFORE, that checkout's readJsonBody (without the shape check) is measured beside this one.
 */

import { targetSendable } from '../proxy/src/intake';
import { readJsonBody } from '../proxy/src/request-body';

const legacy = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'add', arguments: { a: 1, b: 2 } },
  }),
);
const modern = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name: 'add',
      arguments: { a: 1, b: 2 },
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } },
      },
    },
  }),
);
const large = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name: 'summarise',
      arguments: { text: 'lorem ipsum '.repeat(800), options: { depth: [1, [2, [3]]] } },
    },
  }),
);
/** The head the bench's wrk script sends, as uWebSockets.js hands it over. */
const headers: Array<[string, string]> = [
  ['host', '127.0.0.1:8081'],
  ['content-type', 'application/json'],
  ['accept', 'application/json, text/event-stream'],
  ['authorization', `Bearer ${'e'.repeat(300)}`],
  ['content-length', String(legacy.length)],
  ['user-agent', 'wrk'],
];
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const UNSAFE_VALUE = /[^\t\x20-\x7e]/;

function timeNs(what: () => unknown, iterations: number): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) what();
  return Number(process.hrtime.bigint() - start) / iterations;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
/** Each measure's trials, taken in turns with every other measure's so drift reaches all alike. */
const measures: Array<{ name: string; what: () => unknown; iterations: number; trials: number[] }> = [];
const measure = (name: string, what: () => unknown, iterations = 200_000) =>
  void measures.push({ name, what, iterations, trials: [] });

type Read = typeof readJsonBody;
const before: Read | undefined =
  process.env.BEFORE === undefined
    ? undefined
    : ((await import(`${process.env.BEFORE}/proxy/src/request-body.ts`)) as { readJsonBody: Read })
        .readJsonBody;

measure('JSON.parse, legacy tools/call (97 B)', () => JSON.parse(legacy.toString('utf8')));
if (before !== undefined)
  measure('readJsonBody before issue 57, legacy tools/call', () =>
    before(legacy, 'application/json', undefined),
  );
measure('readJsonBody with the shape check, legacy tools/call', () =>
  readJsonBody(legacy, 'application/json', undefined),
);
measure('JSON.parse, 2026-07-28 tools/call (223 B)', () => JSON.parse(modern.toString('utf8')));
if (before !== undefined)
  measure('readJsonBody before issue 57, 2026-07-28 tools/call', () =>
    before(modern, 'application/json', undefined),
  );
measure('readJsonBody with the shape check, 2026-07-28 tools/call', () =>
  readJsonBody(modern, 'application/json', undefined),
);
measure('JSON.parse, 9.7 KB of arguments', () => JSON.parse(large.toString('utf8')), 10_000);
if (before !== undefined)
  measure(
    'readJsonBody before issue 57, 9.7 KB of arguments',
    () => before(large, 'application/json', undefined),
    10_000,
  );
measure(
  'readJsonBody with the shape check, 9.7 KB of arguments',
  () => readJsonBody(large, 'application/json', undefined),
  10_000,
);
measure('target check (/mcp/<subdomain>, no query)', () => targetSendable('/mcp/bench-server', undefined));
measure('header checks (6 headers: token name, ASCII value)', () => {
  let ok = true;
  for (const [name, value] of headers) ok = ok && TOKEN.test(name) && !UNSAFE_VALUE.test(value);
  return ok;
});

for (const m of measures) timeNs(m.what, m.iterations / 10); // warm-up
for (let trial = 0; trial < 15; trial++)
  for (const m of measures) m.trials.push(timeNs(m.what, m.iterations));
console.log('| what | ns per call, fastest of 15 trials | median |\n| --- | --- | --- |');
for (const m of measures)
  console.log(`| ${m.name} | ${Math.min(...m.trials).toFixed(0)} | ${median(m.trials).toFixed(0)} |`);
