import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileKeyRules, foldKey, inspectJson } from '../src/kit/json-shape';

/** The nesting depth of a parsed value, computed the obvious way (test inputs are shallow). */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + children.reduce<number>((deepest, child) => Math.max(deepest, depthOf(child)), 0);
}

const envelope = { members: { method: true, id: true, params: { members: { name: true } } } } as const;
const rules = compileKeyRules({ ...envelope, items: envelope });

describe('inspecting a JSON text', () => {
  it('finds the depth of any JSON value exactly, as bytes and as a string', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        const text = JSON.stringify(value);
        const depth = depthOf(value);
        for (const form of [text, Buffer.from(text)]) {
          expect(inspectJson(form, depth)).toBeUndefined();
          if (depth > 0) expect(inspectJson(form, depth - 1)).toEqual({ code: 'too_deep', limit: depth - 1 });
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('walks 200,000 levels without recursion and says they are too deep', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    expect(inspectJson(Buffer.from(deep), 64)).toEqual({ code: 'too_deep', limit: 64 });
    const args = `{"method":"tools/call","params":{"arguments":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}}`;
    expect(inspectJson(args, 64, rules)).toEqual({ code: 'too_deep', limit: 64 });
  });

  it('reads brackets, quotes and commas inside strings as text', () => {
    const text = JSON.stringify({ method: '[{"METHOD":1}', params: { name: '\\"},{', x: '\\\\' } });
    expect(inspectJson(text, 2, rules)).toBeUndefined();
  });

  it('refuses a key given twice where the reader reads, escaped or not', () => {
    expect(inspectJson('{"method":"ping","method":"tools/call"}', 64, rules)).toEqual({
      code: 'duplicate_key',
      key: 'method',
    });
    expect(inspectJson('{"method":"ping","\\u006dethod":"tools/call"}', 64, rules)).toEqual({
      code: 'duplicate_key',
      key: 'method',
    });
    expect(inspectJson('{"params":{"x":1,"x":2}}', 64, rules)).toEqual({ code: 'duplicate_key', key: 'x' });
    // Batches: each message is an envelope; two messages may share keys.
    expect(inspectJson('[{"id":1},{"id":2,"id":3}]', 64, rules)).toEqual({
      code: 'duplicate_key',
      key: 'id',
    });
    expect(inspectJson('[{"id":1},{"id":2}]', 64, rules)).toBeUndefined();
    // Where the reader does not read (arguments, results), keys are the origin's business.
    expect(inspectJson('{"params":{"arguments":{"a":1,"a":2}}}', 64, rules)).toBeUndefined();
  });

  it('refuses keys that fold to a member without being it, as Go would match them', () => {
    for (const [key, member] of [
      ['Method', 'method'],
      ['METHOD', 'method'],
      ['paramſ', 'params'],
      ['Name', 'name'],
      ['\u212Aey', undefined],
    ] as const) {
      const text =
        member === 'name' ? `{"params":{"${key}":"paid","name":"free"}}` : `{"${key}":"tools/call","id":1}`;
      const found = inspectJson(text, 64, rules);
      if (member === undefined) expect(found).toBeUndefined();
      else expect(found).toEqual({ code: 'ambiguous_key', key, member });
    }
    expect(foldKey('\u212A')).toBe(foldKey('k'));
    expect(foldKey('\u017F')).toBe(foldKey('s'));
  });

  it('refuses unpaired surrogate escapes, unless asked not to look', () => {
    expect(inspectJson('{"params":{"name":"paid\\ud800"}}', 64, rules)).toEqual({
      code: 'unpaired_surrogate',
    });
    expect(inspectJson('["\\udc00x"]', 64)).toEqual({ code: 'unpaired_surrogate' });
    expect(inspectJson('["\\ud83d\\ude00", "\\\\ud800"]', 64)).toBeUndefined();
    expect(inspectJson('["\\ud800"]', 64, undefined, { surrogates: false })).toBeUndefined();
  });

  it('finds every duplicate or folded key that JSON.parse would hide, and nothing else', () => {
    const key = fc.constantFrom('method', 'Method', 'id', 'ID', 'params', 'x', 'y', 'name');
    fc.assert(
      fc.property(fc.array(fc.tuple(key, fc.integer()), { maxLength: 6 }), (entries) => {
        const text = `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
        const keys = entries.map(([k]) => k);
        const duplicate = keys.some((k, i) => keys.indexOf(k) !== i);
        const folded = keys.some((k) =>
          ['method', 'id', 'params'].some((m) => m !== k && foldKey(m) === foldKey(k)),
        );
        const found = inspectJson(text, 64, rules);
        expect(found !== undefined).toBe(duplicate || folded);
      }),
      { numRuns: 2_000 },
    );
  });
});
