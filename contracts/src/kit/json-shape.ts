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
  /** The members by index: names, their UTF-8 bytes (to know a key without decoding it), rules. */
  readonly names: readonly string[];
  readonly spelled: readonly Buffer[];
  readonly children: ReadonlyArray<KeyRules | undefined>;
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
      names: Object.keys(node.members),
      spelled: Object.keys(node.members).map((name) => Buffer.from(name, 'utf8')),
      children: [],
      folded,
      items: undefined,
    };
    compiled.set(node, rules);
    for (const [name, child] of Object.entries(node.members)) {
      members.set(name, child === true ? undefined : compile(child));
      folded.set(foldKey(name), name);
    }
    if (Object.keys(node.members).length > 30) throw new Error('key rules: at most 30 members an object');
    (rules.children as Array<KeyRules | undefined>).push(...rules.names.map((name) => members.get(name)));
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

/** An open object or array the reader has rules for. */
interface Frame {
  object: boolean;
  rules: KeyRules;
  /** The members seen so far, one bit each (objects only). */
  seen: number;
  /** Other keys seen so far: a list while short, a set past 16. */
  others: string[] | Set<string> | undefined;
  /** The next string in this object is a key. */
  expectKey: boolean;
  /** The rules of the member whose value comes next. */
  next: KeyRules | undefined;
}

/**
 * Checks a JSON text (UTF-8 bytes, or a string) that `JSON.parse` accepted: nesting of at most
 * `maxDepth` arrays and objects, escapes that decode to well-formed text (unless
 * `options.surrogates` is false), and, in objects `rules` names (the top level is one; an array
 * at the top level has `rules.items`), no key twice and none that folds to a member without
 * being it. Outside the objects with rules only depth and escapes are looked at.
 */
export function inspectJson(
  text: Uint8Array | string,
  maxDepth: number,
  rules?: KeyRules,
  options: { surrogates: boolean } = { surrogates: true },
): JsonShapeProblem | undefined {
  const bytes =
    typeof text === 'string'
      ? Buffer.from(text, 'utf8')
      : Buffer.isBuffer(text)
        ? text
        : Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  return walk(bytes, maxDepth, rules, options.surrogates);
}

function walk(
  bytes: Buffer,
  maxDepth: number,
  rules: KeyRules | undefined,
  surrogates: boolean,
): JsonShapeProblem | undefined {
  const length = bytes.length;
  const stack: Frame[] = [];
  let top: Frame | undefined;
  /** Containers open inside the innermost frame (or at the top) that have no rules. */
  let plain = 0;
  let i = 0;
  while (i < length) {
    const c = bytes[i] as number;
    if (c === QUOTE) {
      // The string's end: the next quote not escaped. Short strings are walked here; a long one
      // is searched natively for its quote and any backslash before it.
      let j = i + 1;
      let escaped = false;
      for (;;) {
        if (j >= length) return undefined; // not JSON: the caller's parser says so
        const d = bytes[j] as number;
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          escaped = true;
          j += 2;
          continue;
        }
        j += 1;
        if (j - i > 64) {
          const quote = bytes.indexOf(QUOTE, j);
          const backslash = bytes.indexOf(BACKSLASH, j);
          if (quote < 0) return undefined;
          if (backslash < 0 || backslash > quote) {
            j = quote;
            break;
          }
          escaped = true;
          j = backslash + 2;
        }
      }
      const isKey = plain === 0 && top !== undefined && top.object && top.expectKey;
      if (escaped && (surrogates || isKey)) {
        const value = decodeString(bytes.toString('utf8', i, j + 1));
        if (value === undefined) return undefined;
        if (surrogates && UNPAIRED.test(value)) return { code: 'unpaired_surrogate' };
        if (isKey) {
          const problem = checkKey(top as Frame, value);
          if (problem !== undefined) return problem;
        }
      } else if (isKey) {
        const frame = top as Frame;
        const index = memberAt(frame.rules, bytes, i + 1, j);
        const problem = index >= 0 ? seeMember(frame, index) : checkKey(frame, plainKey(bytes, i + 1, j));
        if (problem !== undefined) return problem;
      }
      i = j + 1;
      continue;
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (stack.length + plain >= maxDepth) return { code: 'too_deep', limit: maxDepth };
      // The rules of this value: the member's whose value it is, an array's items', or the top's.
      const own = plain > 0 ? undefined : top === undefined ? rules : top.object ? top.next : top.rules.items;
      if (own === undefined) plain += 1;
      else {
        const object = c === OPEN_OBJECT;
        top = { object, rules: own, seen: 0, others: undefined, expectKey: object, next: undefined };
        stack.push(top);
      }
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (plain > 0) plain -= 1;
      else {
        stack.pop();
        top = stack[stack.length - 1];
      }
    } else if (c === COMMA && plain === 0 && top?.object) {
      top.expectKey = true;
      top.next = undefined;
    }
    i += 1;
  }
  return undefined;
}

/** The index of the member whose name the bytes spell, or -1. */
function memberAt(rules: KeyRules, bytes: Buffer, start: number, end: number): number {
  const size = end - start;
  const spelled = rules.spelled;
  for (let m = 0; m < spelled.length; m++) {
    const name = spelled[m] as Buffer;
    if (name.length !== size) continue;
    let k = 0;
    while (k < size && name[k] === bytes[start + k]) k++;
    if (k === size) return m;
  }
  return -1;
}

/** A member's key: a problem when it came before in this object. */
function seeMember(frame: Frame, index: number): JsonShapeProblem | undefined {
  frame.expectKey = false;
  const bit = 1 << index;
  if ((frame.seen & bit) !== 0) return { code: 'duplicate_key', key: frame.rules.names[index] as string };
  frame.seen |= bit;
  frame.next = frame.rules.children[index];
  return undefined;
}

/** An unescaped key: built here while it is short ASCII (no call out), else decoded as UTF-8. */
function plainKey(bytes: Buffer, start: number, end: number): string {
  if (end - start > 32) return bytes.toString('utf8', start, end);
  let key = '';
  for (let k = start; k < end; k++) {
    const b = bytes[k] as number;
    if (b >= 0x80) return bytes.toString('utf8', start, end);
    key += String.fromCharCode(b);
  }
  return key;
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
  const index = frame.rules.names.indexOf(key);
  if (index >= 0) return seeMember(frame, index);
  frame.expectKey = false;
  frame.next = undefined;
  const others = frame.others;
  if (others === undefined) frame.others = [key];
  else if (Array.isArray(others)) {
    if (others.includes(key)) return { code: 'duplicate_key', key };
    others.push(key);
    if (others.length > 16) frame.others = new Set(others);
  } else {
    if (others.has(key)) return { code: 'duplicate_key', key };
    others.add(key);
  }
  const member = frame.rules.folded.get(foldKey(key));
  return member === undefined ? undefined : { code: 'ambiguous_key', key, member };
}
