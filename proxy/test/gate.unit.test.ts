import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { targetSendable } from '../src/intake';
import { argumentsDigest, canonical } from '../src/paywall/state';
import { readJsonBody } from '../src/request-body';

const read = (text: string) => readJsonBody(Buffer.from(text), 'application/json', undefined);
const codeOf = (text: string) => {
  const reading = read(text);
  return reading.ok ? 'ok' : reading.code;
};

/** The canonical form as it was written before it became iterative: the reference. */
function recursiveCanonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(recursiveCanonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${recursiveCanonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

describe('what the proxy lets through to an origin', () => {
  it('sends on only targets of visible ASCII with no encoded controls', () => {
    expect(targetSendable('/mcp/x/a', undefined)).toBe(true);
    expect(targetSendable('/mcp/x/a%20b', 'q=%C3%A9&r=1+2')).toBe(true);
    // U+010D U+010A: written as Latin-1 they were "\r\n" and a second request.
    expect(targetSendable('/mcp/x/\u010d\u010aGET /', undefined)).toBe(false);
    expect(targetSendable('/mcp/x', 'a=\u010d\u010a')).toBe(false);
    expect(targetSendable('/mcp/x/é', undefined)).toBe(false);
    expect(targetSendable('/mcp/x/a b', undefined)).toBe(false);
    expect(targetSendable('/mcp/x/\t', undefined)).toBe(false);
    expect(targetSendable('/mcp/x/a%0d%0a', undefined)).toBe(false);
    expect(targetSendable('/mcp/x', 'a=%00')).toBe(false);
    expect(targetSendable('/mcp/x', 'a=%7F')).toBe(false);
    expect(targetSendable('/mcp/x', '')).toBe(true);
  });

  it('passes any string made only of visible ASCII, and no other', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (path) => {
        const visible = /^[\x21-\x7e]*$/.test(path) && !/%(?:[01][0-9a-f]|7f)/i.test(path);
        expect(targetSendable(`/mcp/x/${path}`, undefined)).toBe(visible);
      }),
      { numRuns: 5_000 },
    );
  });

  it('refuses messages whose envelope or params another decoder reads differently', () => {
    const call = (params: string) => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${params}}`;
    expect(codeOf(call('{"name":"free","arguments":{}}'))).toBe('ok');
    expect(codeOf('{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"paid"}}')).toBe(
      'ambiguous_key',
    );
    expect(
      codeOf('{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call","params":{"name":"paid"}}'),
    ).toBe('ambiguous_key');
    expect(codeOf('{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}')).toBe('duplicate_key');
    expect(codeOf(call('{"name":"free","Name":"paid"}'))).toBe('ambiguous_key');
    expect(codeOf(call('{"name":"free","name":"paid"}'))).toBe('duplicate_key');
    expect(codeOf(call('{"name":"free","_meta":{"progressToken":1,"ProgressToken":2}}'))).toBe(
      'ambiguous_key',
    );
    expect(codeOf(call('{"name":"free","requeststate":"x"}'))).toBe('ambiguous_key');
    expect(
      codeOf(call('{"name":"free","inputResponses":{"checkout":{"action":"accept","Action":"decline"}}}')),
    ).toBe('ambiguous_key');
    expect(
      codeOf(`[${call('{"name":"a"}')},{"jsonrpc":"2.0","id":2,"method":"tools/call","paramS":{}}]`),
    ).toBe('ambiguous_key');
    expect(codeOf(call('{"name":"paid\\udbff"}'))).toBe('unpaired_surrogate');
    // The tool's own arguments are the origin's to read: their keys are not judged.
    expect(codeOf(call('{"name":"free","arguments":{"Name":"x","name":"y","a":1,"a":2}}'))).toBe('ok');
  });

  it('refuses bodies nested deeper than 64 levels with too_deep, never a crash', () => {
    const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
    const call = (args: string) =>
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":${args}}}`;
    expect(codeOf(call(nested(62)))).toBe('ok');
    expect(codeOf(call(nested(63)))).toBe('too_deep');
    expect(codeOf(call(nested(200_000)))).toBe('too_deep');
  });

  it('digests arguments by an iterative canonical form equal to the recursive one', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (value) => {
        expect(canonical(value)).toBe(recursiveCanonical(value));
      }),
      { numRuns: 3_000 },
    );
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = i % 2 === 0 ? [deep] : { a: deep };
    expect(argumentsDigest(deep)).toMatch(/^[\w-]{43}$/);
  });
});
