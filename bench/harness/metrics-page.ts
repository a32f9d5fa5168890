import { get as httpGet } from 'node:http';

/**
 * What the benches read from a service's Prometheus page and other plain GETs: a proxy's
 * published records, its GC pauses and request spans over a trial, and counts read until they
 * hold still (the pipeline has caught up).
 */

/**
 * The three spans a proxy times per forwarded request (docs/proxy.md, its metrics), and `added`,
 * own and answer time of one request together (the SLI of docs/operations.md).
 */
export const SPANS = ['own', 'origin', 'answer', 'added'] as const;
export type Span = (typeof SPANS)[number];

/**
 * Per span over a trial: requests timed, those over 1 ms, and the bucket bounds the 99th and
 * 99.9th percentiles fall in (the latter absent in results from before 2026-11-30's morning).
 */
export type SpansDuring = Record<
  Span,
  { count: number; over1ms: number; p99AtMostMs: number; p999AtMostMs?: number }
>;

/** Garbage-collection pauses of a proxy over a trial: how many and how long, by kind, and the longest. */
export interface GcDuring {
  minor: number;
  minorMs: number;
  major: number;
  majorMs: number;
  longestMs: number;
}

/**
 * A GET's answer text, read on a connection of its own: vegeta runs while the event loop waits,
 * so a kept-alive connection its server closed meanwhile (idle) is found closed only when reused,
 * and a read right after a trial would fail. Used for every read around a vegeta trial.
 */
export function freshGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    httpGet(url, { agent: false }, (answer) => {
      let text = '';
      answer.setEncoding('utf8');
      answer.on('data', (chunk: string) => {
        text += chunk;
      });
      answer.on('end', () => resolve(text));
      answer.on('error', reject);
    }).on('error', reject);
  });
}

/**
 * A metric's series on a page summed (proxy workers each label theirs `worker`), and how many
 * series there were.
 */
export function metricSum(page: string, name: string): { sum: number; series: number } {
  let sum = 0;
  let series = 0;
  for (const m of page.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) {
    sum += Number(m[1]);
    series++;
  }
  return { sum, series };
}

/**
 * The usage records a proxy's metrics page says it emitted and the bus has not yet taken: a
 * record spilled to disk (its queue over the bound) is sent again from there and counts as
 * replayed, not published; a dropped one is never sent. NaN when the page has no emitter.
 */
export function unpublishedOf(page: string): number {
  const emitted = metricSum(page, 'mcpmeter_usage_emitted_total');
  const published = metricSum(page, 'mcpmeter_usage_published_total');
  if (emitted.series === 0 || published.series === 0) return Number.NaN;
  return (
    emitted.sum -
    published.sum -
    metricSum(page, 'mcpmeter_usage_replayed_total').sum -
    metricSum(page, 'mcpmeter_usage_dropped_total').sum
  );
}

/**
 * Waits (up to `seconds`) until the proxy serving `url` has published every usage record it
 * emitted, from its metrics page; what is still unpublished then (0 once caught up).
 */
export async function whenPublished(url: string, seconds: number): Promise<number> {
  const page = `${new URL(url).origin}/metrics`;
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const left = unpublishedOf(await freshGet(page));
    if (!(left > 0) || Date.now() >= deadline) return Number.isNaN(left) ? 0 : left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A proxy's GC metrics (`mcpmeter_proxy_gc_*{kind}`) from its metrics page (whose read resets the longest pause), by name and kind. */
export function gcMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const m of text.matchAll(/^mcpmeter_proxy_gc_(\w+)\{kind="(\w+)"\} ([\d.e+-]+)$/gm))
    values.set(`${m[1]} ${m[2]}`, Number(m[3]));
  return values;
}

/** A proxy's tool calls by outcome (`mcpmeter_proxy_tool_calls_total`), summed over its workers. */
export function callOutcomes(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const m of text.matchAll(
    /^mcpmeter_proxy_tool_calls_total\{[^}]*outcome="(\w+)"[^}]*\} ([\d.e+-]+)$/gm,
  ))
    values.set(m[1] as string, (values.get(m[1] as string) ?? 0) + Number(m[2]));
  return values;
}

/**
 * The tool calls a proxy ended other than as a success between two readings: refused by it (an
 * origin with no connection free, a limit) or failed at the origin. The generator counts such a
 * call's HTTP 200 with a JSON-RPC error as answered, so a trial reads them here.
 */
export function unsuccessfulBetween(
  before: Map<string, number>,
  after: Map<string, number>,
  ignored: readonly string[] = [],
): number {
  let count = 0;
  for (const [outcome, value] of after)
    if (outcome !== 'success' && !ignored.includes(outcome)) count += value - (before.get(outcome) ?? 0);
  return count;
}

/**
 * Starts counting the tool calls the proxy serving `url` refuses (a paywall, its limit store
 * away, a busy origin) or fails at the origin (one page for all its workers); the function
 * returned reads how many since. wrk counts such a call's HTTP 200 as answered, and a proxy that
 * refused calls cheaply would read faster than one that ran them. Outcome `cancelled` is left
 * out: wrk stops with a call in flight on each of its connections, and those are its clients
 * leaving, not the proxy refusing.
 */
export async function unsuccessfulSince(url: string): Promise<() => Promise<number>> {
  const page = `${new URL(url).origin}/metrics`;
  const before = callOutcomes(await freshGet(page));
  return async () => unsuccessfulBetween(before, callOutcomes(await freshGet(page)), ['cancelled']);
}

/** A proxy's span histograms: cumulative bucket counts by span and upper bound (seconds). */
export function spanBuckets(text: string): Map<Span, Map<number, number>> {
  const spans = new Map<Span, Map<number, number>>(SPANS.map((span) => [span, new Map()]));
  for (const m of text.matchAll(
    /^mcpmeter_proxy_(own|origin|answer|added)_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm,
  ))
    spans.get(m[1] as Span)?.set(m[2] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[2]), Number(m[3]));
  return spans;
}

/**
 * What a cumulative histogram (count by upper bound, seconds) grew by between two readings, by
 * bound in ascending order: the last is +Inf's, every observation in between.
 */
export function histogramGrew(
  before: ReadonlyMap<number, number>,
  after: ReadonlyMap<number, number>,
): Array<readonly [number, number]> {
  return [...after]
    .map(([bound, n]) => [bound, n - (before.get(bound) ?? 0)] as const)
    .sort((a, b) => a[0] - b[0]);
}

/** The bucket bound a quantile of `grew` falls in, in ms: the smallest bound that many are within. */
export function boundAtMs(grew: ReadonlyArray<readonly [number, number]>, quantile: number): number {
  const count = grew.at(-1)?.[1] ?? 0;
  return (grew.find(([, n]) => n >= count * quantile)?.[0] ?? Number.POSITIVE_INFINITY) * 1000;
}

export function spansBetween(
  before: Map<Span, Map<number, number>>,
  after: Map<Span, Map<number, number>>,
): SpansDuring {
  const one = (span: Span) => {
    const grew = histogramGrew(before.get(span) ?? new Map(), after.get(span) ?? new Map());
    const count = grew.at(-1)?.[1] ?? 0;
    const within1ms = grew.find(([bound]) => bound >= 0.001)?.[1] ?? count;
    return {
      count,
      over1ms: count - within1ms,
      p99AtMostMs: boundAtMs(grew, 0.99),
      p999AtMostMs: boundAtMs(grew, 0.999),
    };
  };
  return { own: one('own'), origin: one('origin'), answer: one('answer'), added: one('added') };
}

export function gcBetween(before: Map<string, number>, after: Map<string, number>): GcDuring {
  const grew = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
  let longest = 0;
  for (const [name, value] of after)
    if (name.startsWith('pause_max_seconds ')) longest = Math.max(longest, value);
  return {
    minor: grew('pauses_total minor'),
    minorMs: grew('pause_seconds_total minor') * 1000,
    major: grew('pauses_total major'),
    majorMs: grew('pause_seconds_total major') * 1000,
    longestMs: longest * 1000,
  };
}

/** A count read every second until it holds for three reads (or `seconds` pass): the pipeline has caught up. */
export async function whenStable(read: () => Promise<number>, seconds: number): Promise<number> {
  let last = -1;
  for (let i = 0, stable = 0; i < seconds && stable < 3; i++) {
    const now = await read();
    stable = now === last ? stable + 1 : 0;
    last = now;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return last;
}
