/**
 * What a JSON text holds that `JSON.parse` does not say: how deep it nests, and, in the objects a
 * reader names, keys that appear twice or that another decoder could take for a member the reader
 * reads. `JSON.parse` keeps the last of two equal keys; Go's `encoding/json` matches a struct's
 * fields case-insensitively (with Unicode simple folding: `ſ` is an `s`, the Kelvin sign a `k`),
 * so `{"method":"ping","METHOD":"tools/call"}` is a ping to one and a tool call to the other. A
 * reader that refuses what `inspectJson` reports reads every such message as every decoder does.
 *
 * The walk is iterative (no recursion over the text's depth) and reads a text `JSON.parse` has
 * already accepted: it tracks strings, brackets, colons and commas, and skips everything else.
 */

/** The members a reader reads of an object; a member's rules apply to its value. */
export interface KeyRulesSpec {
  readonly members: Readonly<Record<string, KeyRulesSpec | true>>;
  /** For an array value (or an array at the top level): the rules of each of its items. */
  readonly items?: KeyRulesSpec;
}

export interface KeyRules {
  readonly members: ReadonlyMap<string, KeyRules | undefined>;
  /** Each member by its folded form, to find the keys that fold to one without being it. */
  readonly folded: ReadonlyMap<string, string>;
  readonly items: KeyRules | undefined;
}

export type JsonShapeProblem =
  | { code: 'too_deep'; limit: number }
  | { code: 'duplicate_key'; key: string }
  | { code: 'ambiguous_key'; key: string; member: string }
  | { code: 'unpaired_surrogate' };

/**
 * A key's folded form: equal for two keys that any common decoder could match to one another.
 * Lower- then upper-casing folds ASCII case, `ſ` and the Kelvin sign as Go does, and a few more
 * (`ı`, `ß`): stricter than Go, which only refuses more keys that no client sends.
 */
export const foldKey = (key: string): string => key.toLowerCase().toUpperCase();

export function compileKeyRules(spec: KeyRulesSpec): KeyRules {
  const compiled = new Map<KeyRulesSpec, KeyRules>();
  const compile = (node: KeyRulesSpec): KeyRules => {
    const known = compiled.get(node);
    if (known !== undefined) return known;
    const members = new Map<string, KeyRules | undefined>();
    const folded = new Map<string, string>();
    const rules: KeyRules = {
      members,
      folded,
      items: undefined,
    };
    compiled.set(node, rules);
    for (const [name, child] of Object.entries(node.members)) {
      members.set(name, child === true ? undefined : compile(child));
      folded.set(foldKey(name), name);
    }
    if (node.items !== undefined) (rules as { items: KeyRules | undefined }).items = compile(node.items);
    return rules;
  };
  return compile(spec);
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

/** An unpaired UTF-16 surrogate: Go and others decode it as U+FFFD, JavaScript keeps it. */
const UNPAIRED = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

interface Frame {
  object: boolean;
  rules: KeyRules | undefined;
  /** Keys seen so far, kept only for an object with rules. */
  keys: Set<string> | undefined;
  /** The next string in this object is a key. */
  expectKey: boolean;
  /** The rules of the member whose value comes next. */
  next: KeyRules | undefined;
}

/**
 * Checks a JSON text (UTF-8 bytes or a string's UTF-16 code units: both spell JSON's structure in
 * ASCII) that `JSON.parse` accepted: nesting of at most `maxDepth` arrays and objects, escapes
 * that decode to well-formed text (unless `options.surrogates` is false), and, in objects `rules` names (the top level is one; an
 * array at the top level has `rules.items`), no key twice and none that folds to a member
 * without being it.
 */
export function inspectJson(
  text: Uint8Array | string,
  maxDepth: number,
  rules?: KeyRules,
  options: { surrogates: boolean } = { surrogates: true },
): JsonShapeProblem | undefined {
  const bytes = typeof text === 'string' ? undefined : text;
  const at =
    bytes === undefined ? (i: number) => (text as string).charCodeAt(i) : (i: number) => bytes[i] as number;
  const slice = (start: number, end: number) =>
    bytes === undefined
      ? (text as string).slice(start, end)
      : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8', start, end);
  const length = text.length;
  const stack: Frame[] = [];
  let top: Frame | undefined;
  let i = 0;
  while (i < length) {
    const c = at(i);
    if (c === QUOTE) {
      // The string's end: the next quote not escaped. Backslashes are rare; noted when seen.
      let j = i + 1;
      let escaped = false;
      for (;;) {
        const d = at(j);
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          escaped = true;
          j += 2;
        } else j += 1;
        if (j >= length) return undefined; // not JSON: the caller's parser said otherwise
      }
      const isKey = top?.object === true && top.expectKey;
      if ((escaped && (options.surrogates || isKey)) || (isKey && top?.keys !== undefined)) {
        const raw = slice(i, j + 1);
        const value = escaped ? decodeString(raw) : raw.slice(1, -1);
        if (value === undefined) return undefined; // not JSON: the caller's parser says so
        if (escaped && options.surrogates && UNPAIRED.test(value)) return { code: 'unpaired_surrogate' };
        if (isKey && top !== undefined) {
          const problem = checkKey(top, value);
          if (problem !== undefined) return problem;
        }
      } else if (isKey && top !== undefined) {
        top.expectKey = false;
        top.next = undefined;
      }
      i = j + 1;
      continue;
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (stack.length >= maxDepth) return { code: 'too_deep', limit: maxDepth };
      // The rules of this value: the member's whose value it is, an array's items', or the top's.
      const own = top === undefined ? rules : top.object ? top.next : top.rules?.items;
      const object = c === OPEN_OBJECT;
      const frame: Frame = {
        object,
        rules: own,
        keys: object && own !== undefined ? new Set() : undefined,
        expectKey: object,
        next: undefined,
      };
      stack.push(frame);
      top = frame;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      stack.pop();
      top = stack[stack.length - 1];
    } else if (c === COMMA && top?.object === true) {
      top.expectKey = true;
      top.next = undefined;
    }
    i += 1;
  }
  return undefined;
}

function decodeString(raw: string): string | undefined {
  try {
    return JSON.parse(raw) as string;
  } catch {
    return undefined;
  }
}

/** Records a key of an object with rules; a problem when it repeats or folds to another member. */
function checkKey(frame: Frame, key: string): JsonShapeProblem | undefined {
  frame.expectKey = false;
  const rules = frame.rules;
  if (rules === undefined || frame.keys === undefined) return undefined;
  if (frame.keys.has(key)) return { code: 'duplicate_key', key };
  frame.keys.add(key);
  if (rules.members.has(key)) {
    frame.next = rules.members.get(key);
    return undefined;
  }
  frame.next = undefined;
  const member = rules.folded.get(foldKey(key));
  return member === undefined ? undefined : { code: 'ambiguous_key', key, member };
}
