import { createHash } from 'node:crypto';
import { ID } from '@mcp-meter/contracts/kit';
import type { OperationExample } from '../../src/http/operation-examples';

/**
 * What the examples test keeps of each call, and how it makes a run's answers into the examples
 * the API reference shows: the same every run, and holding no secret of the run.
 *
 * Ids become made-up ids of the same kind, numbered in the order they first appear (so one id
 * reads the same in every example it is in); the run's URLs become example.com ones; keys, tokens,
 * codes and signing secrets become placeholders; the run's own times move, keeping their distances,
 * as its start moves to the morning of 2026-05-28 (the test clock's times are left as they are).
 */

// biome-ignore lint/suspicious/noExplicitAny: examples are JSON of every shape
type Json = any;

const PREFIXES = Object.values(ID).join('|');
/** Our ids, and the sandbox processor's (`dp_sandbox_…`, `po_sandbox_…`). */
const ID_PATTERN = new RegExp(`\\b((?:${PREFIXES})(?:_sandbox)?)_[0-9a-hjkmnp-tv-z]{26}\\b`, 'g');
const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const ISO_TIME = /\b(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z)\b/g;
/** Where the times of the run are moved to. */
const EXAMPLE_START = Date.parse('2026-05-28T09:00:00.000Z');
/** Times after this are the run's own (the examples' test clock ends before it) and are moved. */
const RUN_TIMES_FROM = Date.parse('2026-08-01T00:00:00.000Z');

export class ExampleRecorder {
  readonly recorded = new Map<string, OperationExample>();
  private readonly replacements: Array<[string, string]> = [];
  private readonly ids = new Map<string, string>();
  private readonly counts = new Map<string, number>();

  constructor(private readonly startedAt: number) {}

  /** `value`, wherever it appears in an example, reads as `placeholder` instead. */
  mask(value: string, placeholder: string): void {
    if (value.length === 0) return;
    this.replacements.push([value, placeholder]);
    // As it appears inside a URL's query (the issuer in a redirect).
    const encoded = encodeURIComponent(value);
    if (encoded !== value) this.replacements.push([encoded, encodeURIComponent(placeholder)]);
  }

  record(operationId: string, example: OperationExample): void {
    if (this.recorded.has(operationId)) throw new Error(`${operationId} has its example already`);
    this.recorded.set(operationId, example);
  }

  /** Every example recorded, in order, made into what the reference shows. */
  examples(): Record<string, OperationExample> {
    const out: Record<string, OperationExample> = {};
    // Longest first, so a URL is replaced before the origin it starts with.
    this.replacements.sort((a, b) => b[0].length - a[0].length);
    for (const [operationId, example] of this.recorded) out[operationId] = this.clean(example);
    return out;
  }

  private clean(value: Json): Json {
    if (typeof value === 'string') return this.cleanString(value);
    if (Array.isArray(value)) return value.map((each) => this.clean(each));
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(
        Object.entries(value)
          .filter(([, each]) => each !== undefined)
          .map(([key, each]) => [key, this.clean(each)]),
      );
    return value;
  }

  private cleanString(text: string): string {
    let out = text;
    for (const [value, placeholder] of this.replacements) out = out.split(value).join(placeholder);
    out = out.replace(ID_PATTERN, (id, prefix: string) => this.fakeId(id, prefix));
    out = out.replace(/\beyJ[\w-]+\.[\w-]+\.[\w-]+/g, 'eyJhbGciOiJFUzI1NiIsImtpZCI6ImV4YW1wbGUifQ.…');
    out = out.replace(/\b[0-9a-f]{64}\b/g, 'c2f8…e41a');
    out = out.replace(ISO_TIME, (time) => this.moveTime(time));
    if (/^\d{4}-\d{2}-\d{2}$/.test(out)) out = this.moveTime(`${out}T00:00:00.000Z`).slice(0, 10);
    return out;
  }

  /** The made-up id standing for `id`: the same for the same id, a new one for the next. */
  private fakeId(id: string, prefix: string): string {
    const known = this.ids.get(id);
    if (known !== undefined) return known;
    const n = (this.counts.get(prefix) ?? 0) + 1;
    this.counts.set(prefix, n);
    const digest = createHash('sha256').update(`${prefix}${n}`).digest();
    const random = Array.from(digest.subarray(0, 16), (byte) => CROCKFORD[byte % 32]).join('');
    const fake = `${prefix}_01jx${String(n).padStart(6, '0')}${random}`;
    this.ids.set(id, fake);
    return fake;
  }

  /** A time of the run (not of the test clock), moved as the run's start moves to the example morning. */
  private moveTime(time: string): string {
    const at = Date.parse(time);
    if (Number.isNaN(at) || at < RUN_TIMES_FROM) return time;
    return new Date(EXAMPLE_START + (at - this.startedAt)).toISOString();
  }
}

/**
 * The shape of a JSON value: its type, an object's keys with their shapes, an array's element
 * shapes. Two runs of the same calls answer the same shapes with different ids and times.
 */
export function shapeOf(value: Json): Json {
  if (value === null) return 'null';
  if (Array.isArray(value)) return [...new Set(value.map((each) => JSON.stringify(shapeOf(each))))].sort();
  if (typeof value === 'object')
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, shapeOf(value[key])]),
    );
  return typeof value;
}
