import { describe, expect, it } from 'vitest';
import { AnswerScanner, type CallAnswer } from '../src/answer/scanner';
import type { ToolCall } from '../src/jsonrpc';

const call = (id: string | number): ToolCall => ({ id, tool: 't' });

/** Feeds `text` in the given pieces (byte offsets) and returns what the scanner found per call. */
function scan(contentType: string, text: string | Buffer, calls: ToolCall[], cuts: number[] = []) {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const scanner = new AnswerScanner(contentType, calls);
  let from = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b), bytes.length]) {
    scanner.write(bytes.subarray(from, cut));
    from = cut;
  }
  scanner.end();
  return calls.map((c) => scanner.answerTo(c));
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** The meaning the scanner must reproduce, computed with JSON.parse over whole documents. */
function oracle(documents: string[], calls: ToolCall[]): Array<CallAnswer | undefined> {
  const found = new Map<string, CallAnswer>();
  const key = (id: unknown) => `${typeof id}:${String(id)}`;
  for (const document of documents) {
    let value: unknown;
    try {
      value = JSON.parse(document);
    } catch {
      continue;
    }
    for (const m of Array.isArray(value) ? value : [value]) {
      if (!isObject(m) || (typeof m.id !== 'string' && typeof m.id !== 'number')) continue;
      if (!('result' in m || 'error' in m) || 'method' in m) continue;
      if (!found.has(key(m.id)))
        found.set(key(m.id), {
          error: 'error' in m,
          toolError: isObject(m.result) && m.result.isError === true,
          inputRequired: !('error' in m) && isObject(m.result) && m.result.resultType === 'input_required',
          ...(!('error' in m) && isObject(m.result) && m.result.resultType === 'task' ? { task: true } : {}),
          ...(isObject(m.result) && typeof m.result.requestState === 'string'
            ? { requestState: m.result.requestState }
            : {}),
        });
    }
  }
  return calls.map((c) => found.get(key(c.id)));
}

/** A small deterministic PRNG (mulberry32), so a failing case can be replayed from its seed. */
function prng(seed: number) {
  let a = seed;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
    chance: (p: number) => next() < p,
  };
}
type Rng = ReturnType<typeof prng>;

const IDS: Array<string | number> = [1, 2, 7, '7', 'a"b', 'x\\y', 'é', '', 0, -3, 1.5, 'long-'.repeat(20)];
const TRICKY = [
  'plain',
  'with "quotes"',
  'back\\slash\\',
  '\\"',
  'tab\tnew\nline',
  'ünïcödé ✓ 😀',
  '}]{[,:',
  '',
];

function junk(rng: Rng, depth: number): unknown {
  const kind = rng.int(depth > 2 ? 4 : 7);
  if (kind === 0) return rng.pick(TRICKY);
  if (kind === 1) return rng.pick([0, -1, 3.25, 1e21, 1.2345678901234567e19]);
  if (kind === 2) return rng.pick([true, false, null]);
  if (kind === 3) return rng.pick(IDS);
  if (kind === 4) return Array.from({ length: rng.int(4) }, () => junk(rng, depth + 1));
  // Objects full of decoy keys: only the message's own id/result/error/method count.
  const object: Record<string, unknown> = {};
  for (let i = rng.int(4); i > 0; i--)
    object[
      rng.pick(['id', 'isError', 'result', 'error', 'method', 'content', 'k', 'resultType', 'requestState'])
    ] = junk(rng, depth + 1);
  return object;
}

function message(rng: Rng): unknown {
  const m: Record<string, unknown> = {};
  const fields: Array<[string, () => unknown]> = [
    ['jsonrpc', () => '2.0'],
    ['id', () => (rng.chance(0.9) ? rng.pick(IDS) : rng.pick([null, true, { id: 1 }]))],
  ];
  const shape = rng.int(6);
  if (shape === 0) fields.push(['error', () => ({ code: -32602, message: rng.pick(TRICKY) })]);
  else if (shape === 1)
    fields.push(['method', () => 'sampling/createMessage'], ['params', () => junk(rng, 1)]);
  else if (shape === 2) fields.push(['result', () => junk(rng, 1)]);
  else {
    fields.push([
      'result',
      () => {
        const result: Record<string, unknown> = {};
        const parts: Array<[string, () => unknown]> = [
          ['content', () => [{ type: 'text', text: rng.pick(TRICKY) }, junk(rng, 2)]],
          ['isError', () => rng.pick([true, false, 'true', 1, null])],
          ['structuredContent', () => junk(rng, 2)],
          ['resultType', () => rng.pick(['complete', 'input_required', 'input_required', 'task', 7, null])],
          ['requestState', () => rng.pick(['st-1', rng.pick(TRICKY), 'x'.repeat(3000), 42, null])],
        ];
        for (const [k, v] of parts.sort(() => rng.next() - 0.5)) if (rng.chance(0.8)) result[k] = v();
        return result;
      },
    ]);
  }
  if (rng.chance(0.1)) fields.push(['error', () => null]);
  for (const [k, v] of fields.sort(() => rng.next() - 0.5)) m[k] = v();
  return m;
}

function document(rng: Rng): string {
  const value = rng.chance(0.3) ? Array.from({ length: 1 + rng.int(4) }, () => message(rng)) : message(rng);
  return JSON.stringify(value, null, rng.pick([undefined, 0, 1, '\t']));
}

const EOLS = ['\n', '\r\n', '\r'];

/** SSE framing with what real streams carry: event names, ids, comments, multi-line data, any line end. */
function sseStream(rng: Rng, documents: string[]): string {
  let out = rng.chance(0.2) ? `: stream open${rng.pick(EOLS)}${rng.pick(EOLS)}` : '';
  documents.forEach((doc, i) => {
    const eol = rng.pick(EOLS);
    if (rng.chance(0.7)) out += `event: message${eol}`;
    if (rng.chance(0.3)) out += `id: ${i}${eol}`;
    if (rng.chance(0.2)) out += `: note${eol}`;
    for (const line of doc.split('\n')) out += `data:${rng.chance(0.8) ? ' ' : ''}${line}${eol}`;
    if (rng.chance(0.1)) out += `retry: 1000${eol}`;
    if (i < documents.length - 1 || rng.chance(0.7)) out += eol;
  });
  return out;
}

function cutsFor(rng: Rng, length: number): number[] {
  const mode = rng.int(3);
  if (mode === 0) return [];
  if (mode === 1) return Array.from({ length }, (_, i) => i);
  return Array.from({ length: rng.int(8) }, () => rng.int(length));
}

describe('reading the answers to tool calls as they stream', () => {
  it('agrees with JSON.parse on random JSON answers, cut into random pieces', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const rng = prng(seed);
      const doc = document(rng);
      const calls = IDS.map(call);
      const expected = oracle([doc], calls);
      expect({
        seed,
        found: scan('application/json', doc, calls, cutsFor(rng, Buffer.byteLength(doc))),
      }).toEqual({
        seed,
        found: expected,
      });
    }
  });

  it('agrees with JSON.parse event by event on random SSE streams, cut into random pieces', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const rng = prng(seed);
      const docs = Array.from({ length: 1 + rng.int(4) }, () => document(rng));
      const stream = sseStream(rng, docs);
      const calls = IDS.map(call);
      const expected = oracle(docs, calls);
      const found = scan(
        'text/event-stream; charset=utf-8',
        stream,
        calls,
        cutsFor(rng, Buffer.byteLength(stream)),
      );
      expect({ seed, found }).toEqual({ seed, found: expected });
    }
  });

  it('accepts exactly the numbers and words JSON.parse accepts, wherever they stand', () => {
    const alphabet = '0123456789-+.eEtruefalsn';
    for (let seed = 1; seed <= 4000; seed++) {
      const rng = prng(seed);
      const literal = Array.from({ length: 1 + rng.int(6) }, () => alphabet[rng.int(alphabet.length)]).join(
        '',
      );
      // As an id, as isError, and as a value nobody reads: the answer is well-formed only if the literal is.
      const doc = rng.pick([
        `{"jsonrpc":"2.0","id":${literal},"result":{}}`,
        `{"jsonrpc":"2.0","id":5,"result":{"isError":${literal}}}`,
        `{"jsonrpc":"2.0","id":5,"result":{"n":[${literal}]}}`,
      ]);
      const calls = [call(5), ...(Number.isFinite(Number(literal)) ? [call(Number(literal))] : [])];
      const cuts = cutsFor(rng, doc.length);
      expect({ doc, found: scan('application/json', doc, calls, cuts) }).toEqual({
        doc,
        found: oracle([doc], calls),
      });
    }
  });

  it('reads a tool error that comes after megabytes of result, and keeps none of it', () => {
    const big = 'A'.repeat(3 * 1024 * 1024);
    const answer = `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"image","data":"${big}","mimeType":"image/png"}],"isError":true}}`;
    const cuts = Array.from({ length: 200 }, (_, i) => i * 16_384 + 7);
    expect(scan('application/json', answer, [call(9)], cuts)).toEqual([
      { error: false, toolError: true, inputRequired: false },
    ]);
    const events = `${`event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"${'x'.repeat(64 * 1024)}"}}\n\n`.repeat(40)}data: {"jsonrpc":"2.0","id":"c-1","error":{"code":-32603,"message":"failed"}}\n\n`;
    expect(scan('text/event-stream', events, [call('c-1')], [1000, 70_000, 2_000_000])).toEqual([
      { error: true, toolError: false, inputRequired: false },
    ]);
  });

  it('takes a response to the call, not a request from the server that reuses its id', () => {
    const stream =
      sse({ jsonrpc: '2.0', id: 1, method: 'sampling/createMessage', params: {} }) +
      sse({ jsonrpc: '2.0', id: 1, result: { content: [], isError: true } });
    expect(scan('text/event-stream', stream, [call(1)])).toEqual([
      { error: false, toolError: true, inputRequired: false },
    ]);
  });

  it('matches ids by type and value, escapes included', () => {
    const answer =
      '[{"jsonrpc":"2.0","\\u0069d":"a\\u0022b","result":{"is\\u0045rror":true}},{"id":7e0,"result":{}}]';
    expect(scan('application/json', answer, [call('a"b'), call(7), call('7')])).toEqual([
      { error: false, toolError: true, inputRequired: false },
      { error: false, toolError: false, inputRequired: false },
      undefined,
    ]);
  });

  it('reads a multi-round answer: input_required with its requestState, as soon as the JSON value ends', () => {
    const call = { id: 3, tool: 'ask' };
    const answer = Buffer.from(
      '{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{"a":{}},"requestState":"s\\u0041-1"}}  ',
    );
    const scanner = new AnswerScanner('application/json', [call]);
    scanner.write(answer.subarray(0, 40));
    expect(scanner.answerSoFar(call)).toBeUndefined();
    scanner.write(answer.subarray(40));
    // Known before the answer ends (only whitespace may follow), so a hold can be kept first.
    expect(scanner.answerSoFar(call)).toEqual({
      error: false,
      toolError: false,
      inputRequired: true,
      requestState: 'sA-1',
    });
    scanner.end();
    expect(scanner.answerTo(call)?.inputRequired).toBe(true);
  });

  it('reads a task handle (the tasks extension): the call runs on at the origin', () => {
    const call = { id: 'c', tool: 'slow_compute' };
    const scanner = new AnswerScanner('text/event-stream', [call]);
    scanner.write(
      Buffer.from(
        'data: {"jsonrpc":"2.0","id":"c","result":{"resultType":"task","taskId":"t1","status":"working","ttlMs":60000}}\n\n',
      ),
    );
    scanner.end();
    expect(scanner.answerTo(call)).toEqual({
      error: false,
      toolError: false,
      inputRequired: false,
      task: true,
    });
  });

  it('finds nothing in an answer that is not well-formed JSON', () => {
    const calls = [call(1)];
    for (const bad of [
      '{"jsonrpc":"2.0","id":1,"result":{}',
      '{"jsonrpc":"2.0","id":1,"result":{}} trailing',
      '{"jsonrpc":"2.0","id":1,"result":{},}',
      '{"jsonrpc":"2.0","id":01,"result":{}}',
      '{"jsonrpc":"2.0" "id":1,"result":{}}',
      '{"jsonrpc":"2.0","id":1,"result":[}]}',
      '{"jsonrpc":"2.0","id":1,"result":tru}',
      '',
    ])
      expect({ bad, found: scan('application/json', bad, calls) }).toEqual({ bad, found: [undefined] });
    // In a stream, a bad event is skipped and the others still count.
    expect(
      scan('text/event-stream', `data: {"id":1,"result":{\n\n${sse({ id: 1, error: {} })}`, calls),
    ).toEqual([{ error: true, toolError: false, inputRequired: false }]);
  });
});

function sse(message: unknown): string {
  return `event: message\ndata: ${JSON.stringify(message)}\n\n`;
}
