import { cores } from './harness/cores';
import { type CoresBusy, cpuBetween, cpuSample, onOneCore, pinGroups, stackGroups } from './harness/cpu';
import type { LatencyTrial, LoadGenerators, Target } from './harness/load';
import { boundAtMs, freshGet, histogramGrew, metricSum, whenStable } from './harness/metrics-page';
import { api } from './harness/processes';
import { quiet } from './latency';
import { CARRIED_P50_MS, type RateTried, searchOpenMax, triedAt } from './open-max';

/**
 * The control plane's SDK limit check (`POST /v1/sdk/limits`, one unit consumed per check) in the
 * proxy bench: its most checks/s on one pinned core (wrk, closed model), exactly counted; the
 * most it carries under an open model in the same arrangement (open-max.ts), and its latency at
 * shares of that against the objective of deploy/prometheus (99 % within 25 ms), read both from
 * vegeta and from the service's own SLI histogram.
 */

/** The objective's threshold, a bucket bound of `mcpmeter_control_plane_limit_check_seconds`. */
export const LIMIT_CHECK_OBJECTIVE_SECONDS = 0.025;
/** The shares of the open-model maximum the latency trials run at, as the proxy's trials do. */
export const LIMIT_CHECK_SHARES = [0.25, 0.5, 0.75] as const;
/** The share of the goal row (proxy.md), given two trials; the others one each. */
export const LIMIT_CHECK_GOAL_SHARE = 0.5;
/**
 * Each trial of the open-model maximum's search, s: over 7,000 checks at the rates searched on
 * the slowest machine yet (half of 7,471/s), with less of a backlog for ingest to store before
 * the next trial than the hops' 3 s.
 */
export const LIMIT_CHECK_SEARCH_SECONDS = 2;
/** Where the search's bisection bottoms out, as a share of the rate it starts from (open-max.ts). */
export const LIMIT_CHECK_SEARCH_FLOOR = 1 / 2;

export interface LimitCheckLatency {
  share: number;
  trial: LatencyTrial;
  /** From the control plane's histogram over the trial: checks timed, and those within 25 ms. */
  timed: number;
  withinObjective: number;
  /** The bucket bounds the 99th and 99.9th percentiles fall in (ms). */
  p99AtMostMs: number;
  p999AtMostMs: number;
  /**
   * What else held the control plane's process over the trial, from its metrics page: its event
   * loop's longest delay, its longest collector pause and the pauses' total, and the usage
   * batches ingest stored (ingest and chdb run in this process in the bench) with their time.
   */
  process?: ProcessDuring;
  /** The other of the share's two trials, the worse (absent in runs with one trial a share). */
  worse?: LimitCheckLatency;
}

/** Two trials at one rate, the better first: a valid one, then the larger share within the objective. */
export function betterFirst(
  a: LimitCheckLatency,
  b: LimitCheckLatency,
): [LimitCheckLatency, LimitCheckLatency] {
  if (a.trial.valid !== b.trial.valid) return a.trial.valid ? [a, b] : [b, a];
  return shareWithin(b) > shareWithin(a) ? [b, a] : [a, b];
}

export interface ProcessDuring {
  loopMaxMs: number;
  gcLongestMs: number;
  gcTotalMs: number;
  batches: number;
  batchMs: number;
}

/**
 * The process's readings between two reads of its page: the loop's and the collector's longest
 * are "since the previous read" on the page (the read before the trial reset them); the rest are
 * counters, taken as differences.
 */
export function processBetween(before: string, after: string): ProcessDuring {
  const grew = (name: string) => metricSum(after, name).sum - metricSum(before, name).sum;
  const longestPause = Math.max(
    0,
    ...[...after.matchAll(/^mcpmeter_control_plane_gc_pause_max_seconds\{[^}]*\} (\S+)$/gm)].map((m) =>
      Number(m[1]),
    ),
  );
  const loopMax = /^mcpmeter_control_plane_event_loop_delay_seconds\{quantile="1"\} (\S+)$/m.exec(after)?.[1];
  return {
    loopMaxMs: Number(loopMax ?? 0) * 1000,
    gcLongestMs: longestPause * 1000,
    gcTotalMs: grew('mcpmeter_control_plane_gc_pause_seconds_total') * 1000,
    batches: grew('mcpmeter_ingest_batch_seconds_count'),
    batchMs: grew('mcpmeter_ingest_batch_seconds_sum') * 1000,
  };
}

export interface LimitCheckResult {
  rps: number;
  answered: number;
  errors: number;
  counted: number;
  busy?: CoresBusy;
  /**
   * Checks a second the control plane's core gives with their records stored: the checks wrk's
   * trials answered over the process's CPU seconds from their start until ingest had stored
   * their records (absent in runs from before 2026-12-07). Near `rps`, it says how little of
   * the checks' ingest wrk's trials leave for after them.
   */
  sustained?: number;
  /**
   * The most checks/s carried under an open model, pinned as the latency trials are, and the
   * rates its search tried: the latency trials run at shares of it. Absent in runs from before
   * 2026-12-07, whose trials ran at shares of wrk's `rps`: wrk keeps 32 checks in flight, so
   * each turn of the event loop serves many and shares its fixed costs among them (socket
   * wake-ups, the spool's write); checks arriving on their own schedule pay more of them each,
   * and queue well short of wrk's rate.
   */
  openMax?: { max: number; tried: RateTried[] };
  /** Open-model trials (absent in runs from before 2026-12-06). */
  latency?: LimitCheckLatency[];
}

export interface LimitCheckBench {
  load: LoadGenerators;
  named: ReadonlyMap<number, string>;
  base: string;
  key: string;
  subject: { customer: string; product: string };
  trialSeconds: number;
  latencySeconds: number;
  log: (line: string) => void;
}

/**
 * The limit check's histogram on a control plane's metrics page: cumulative counts by upper
 * bound (seconds), summed over any labels but `le`.
 */
export function limitCheckBuckets(page: string): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const m of page.matchAll(/^mcpmeter_control_plane_limit_check_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
    const le = /(?:^|,)le="([^"]+)"/.exec(m[1] ?? '')?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + Number(m[2]));
  }
  return buckets;
}

/** What the histogram grew by between two readings: checks timed, within `objective`, and percentiles' bounds. */
export function limitCheckBetween(
  before: Map<number, number>,
  after: Map<number, number>,
  objective = LIMIT_CHECK_OBJECTIVE_SECONDS,
): Pick<LimitCheckLatency, 'timed' | 'withinObjective' | 'p99AtMostMs' | 'p999AtMostMs'> {
  const grew = histogramGrew(before, after);
  const within = grew.find(([bound]) => bound === objective);
  if (within === undefined) throw new Error(`the limit check's histogram has no bucket at ${objective} s`);
  return {
    timed: grew.at(-1)?.[1] ?? 0,
    withinObjective: within[1],
    p99AtMostMs: boundAtMs(grew, 0.99),
    p999AtMostMs: boundAtMs(grew, 0.999),
  };
}

export async function measureLimitCheck(b: LimitCheckBench): Promise<LimitCheckResult> {
  const { load, named, base, key, subject, log } = b;
  const target: Target = {
    url: `${base}/v1/sdk/limits`,
    token: key,
    call: {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: { customerRef: subject.customer, productRef: subject.product },
    },
  };
  const usedOf = async () =>
    (
      await api<{ used: number }>(base, key, 'POST', '/v1/sdk/limits', {
        customerRef: subject.customer,
        productRef: subject.product,
        consume: false,
      })
    ).used;
  // `used` counts stored records: read once the pipeline has stored the checks' records.
  const settledUsed = () => whenStable(usedOf, 60);
  // Warm-up, as every proxy target had: the check's route compiled and optimised, its subject kept.
  load.wrk('L', target, 3);
  const usedBefore = await settledUsed();
  // The control plane alone on core 0; what it calls (PostgreSQL, Redis, Kafka) on core 1 with
  // wrk, as a proxy's origin is on the other core: the core measured is the control plane's own.
  const cpuBefore = cpuSample(named);
  const checks = onOneCore(named, 'control-plane', () => load.wrk('L', target, b.trialSeconds, cores().rest));
  const usedDelta = (await settledUsed()) - usedBefore;
  // The process's CPU until the checks' records were stored (and a few idle seconds after).
  const cpuSeconds = cpuBetween(cpuBefore, cpuSample(named))['control-plane'] ?? 0;
  const best = checks.reduce((x, y) => (y.result.rps > x.result.rps ? y : x));
  const answered = checks.reduce((a, c) => a + c.result.requests, 0);
  const result: LimitCheckResult = {
    rps: best.result.rps,
    answered,
    errors: checks.reduce((a, c) => a + c.result.errors, 0),
    counted: usedDelta,
    busy: best.busy,
    ...(cpuSeconds > 0 ? { sustained: Math.round(answered / cpuSeconds) } : {}),
  };
  log(
    `limit check pinned to one core: ${Math.round(result.rps)} checks/s; ${result.answered} answered, ${result.counted} counted, ${result.errors} errors; its core ${Math.round(best.busy.hop * 100)}% busy`,
  );

  // Under a fixed arrival rate (vegeta), the same arrangement: the control plane alone on core 0,
  // vegeta and the rest on core 1. First the most it carries so, then its latency at shares of that.
  const page = `${base}/metrics`;
  const stack = stackGroups(named);
  pinGroups(
    named,
    stack.filter((g) => g !== 'control-plane'),
    cores().rest,
  );
  pinGroups(named, ['control-plane'], cores().hop);
  const latency: LimitCheckLatency[] = [];
  const tried: RateTried[] = [];
  const searched = async (rate: number) => {
    // Each trial from a quiet stack: the records of the one before stored.
    await quiet(named, log);
    return triedAt(rate, tried, () =>
      load.vegeta('L-max', target, rate, LIMIT_CHECK_SEARCH_SECONDS, cores().rest),
    );
  };
  const once = async (share: number, rate: number): Promise<LimitCheckLatency> => {
    // The records of the trial before stored first: ingest shares this process in the bench.
    await quiet(named, log);
    const before = await freshGet(page);
    const trial = load.vegeta('L', target, rate, b.latencySeconds, cores().rest);
    const after = await freshGet(page);
    const spans = limitCheckBetween(limitCheckBuckets(before), limitCheckBuckets(after));
    const held = processBetween(before, after);
    log(
      `limit check @${rate}/s (${share * 100} % of its maximum): ${spans.withinObjective} of ${spans.timed} within 25 ms on its histogram, p99 ≤ ${spans.p99AtMostMs} ms, p99.9 ≤ ${spans.p999AtMostMs} ms; loop delay max ${held.loopMaxMs.toFixed(1)} ms, GC longest ${held.gcLongestMs.toFixed(1)} ms (${held.gcTotalMs.toFixed(0)} ms in all), ${held.batches} ingest batches (${held.batchMs.toFixed(0)} ms)`,
    );
    return { share, trial, ...spans, process: held };
  };
  try {
    // From what the core gives with the checks' records stored (wrk's rate where that was not
    // read) down to half of it: the hops' eighth would spend steps for nothing (the open-model
    // maximum was 0.54 of wrk's rate in the first run). Were it below half, nothing would be
    // carried and the report would say so.
    const start = Math.min(result.rps, result.sustained ?? result.rps);
    const max = await searchOpenMax(start, searched, LIMIT_CHECK_SEARCH_FLOOR);
    result.openMax = { max, tried };
    log(
      `limit check, open model: ${max} checks/s carried (wrk's closed model: ${Math.round(result.rps)}); tried ${tried.map((t) => `${t.rate}${t.carried ? '✓' : '✗'}`).join(' ')}`,
    );
    // Nothing carried (a machine stalled throughout): the shares of wrk's rate, as the report says.
    const reference = max > 0 ? max : result.rps;
    // Two trials at the goal's share, the better read (valid first, then the larger share within
    // 25 ms) and the worse kept: as the proxy's B3, so one stall of this shared machine does not
    // decide it. One at the others, which the run's 15 minutes have no room to double.
    for (const share of LIMIT_CHECK_SHARES) {
      const rate = Math.max(1, Math.round(reference * share));
      const first = await once(share, rate);
      if (share !== LIMIT_CHECK_GOAL_SHARE) {
        latency.push(first);
        continue;
      }
      const [better, worse] = betterFirst(first, await once(share, rate));
      latency.push({ ...better, worse });
    }
  } finally {
    pinGroups(named, stack, cores().all);
  }
  result.latency = latency;
  return result;
}

const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : '–');
const bound = (v: number) => (Number.isFinite(v) ? String(v) : '+Inf');
const shareWithin = (l: LimitCheckLatency) => l.withinObjective / Math.max(l.timed, 1);

/** The goal row of the limit check's latency at half its maximum (proxy.md's goals); '' if not measured. */
export function limitCheckLatencyGoalRow(r: LimitCheckResult | undefined): string {
  const half = r?.latency?.find((l) => l.share === 0.5);
  if (half === undefined) return '';
  const met = half.trial.valid && shareWithin(half) >= 0.99;
  return `| control-plane limit check at 50 % of ${maximumOf(r)} (${half.trial.rate}/s, open model, pinned as above): p50 / p99 / p99.9 seen by vegeta; within 25 ms on its SLI histogram | ${ms(half.trial.p50)} / ${ms(half.trial.p99)} / ${ms(half.trial.p999)} ms; ${(shareWithin(half) * 100).toFixed(2)} % (${half.withinObjective} of ${half.timed})${half.trial.valid ? '' : ' INVALID'}${half.worse === undefined ? '' : `; the other trial ${within(half.worse)}`} | ≥ 99 % within 25 ms (the objective of deploy/prometheus) | ${met ? 'met' : '**not met**'} |\n`;
}

/** What the latency trials' shares are of: the open-model maximum, or (earlier runs, or none carried) wrk's rate. */
const maximumOf = (r: LimitCheckResult | undefined) =>
  r?.openMax === undefined
    ? 'its maximum (wrk, closed model)'
    : r.openMax.max > 0
      ? `its open-model maximum (${r.openMax.max}/s; wrk's closed model ${Math.round(r.rps)}/s)`
      : `wrk's closed-model maximum (no rate carried under the open model)`;

/** What wrk's trials left for after them, from the CPU their checks cost until stored. */
const sustainedNote = (r: LimitCheckResult) =>
  r.sustained === undefined
    ? ''
    : ` (its trials' checks over the control plane's CPU seconds until ingest had stored their
records come to ${r.sustained}/s: what it left of their ingest for after it is small beside that)`;

/** The open-model search: each rate tried, carried or not, and its median. */
const searchLine = (r: LimitCheckResult) =>
  r.openMax === undefined
    ? ''
    : `The open-model maximum, ${r.openMax.max > 0 ? `${r.openMax.max} checks/s` : 'none: no rate was carried'}, is
the highest rate carried (every check answered, on schedule, the median under ${CARRIED_P50_MS} ms: no queue
building), found as the proxy's hops' are (\`bench/open-max.ts\`, ${LIMIT_CHECK_SEARCH_SECONDS} s trials, each from a quiet
stack, to within 8 %, from ${r.sustained === undefined ? "wrk's rate" : `the lower of wrk's rate and ${r.sustained}/s`} down to ${LIMIT_CHECK_SEARCH_FLOOR * 100} % of it). wrk read ${Math.round(r.rps)} checks/s: it keeps 32
checks in flight, so each turn of the event loop serves many and shares its fixed costs (socket
wake-ups, the spool's write) among them, where checks arriving on their own schedule pay more
of them each${sustainedNote(r)}. Rates tried (checks/s, median, carried): ${r.openMax.tried.map((t) => `${t.rate} (${ms(t.p50)} ms, ${t.carried ? 'yes' : 'no'})`).join(', ')}.

`;

const within = (l: LimitCheckLatency) =>
  `${(shareWithin(l) * 100).toFixed(2)} % (${l.withinObjective} of ${l.timed})${l.trial.valid ? '' : ' INVALID'}`;

/** How many trials each share had: two a share (runs of 2026-12-06), or two at the goal's share. */
function trialsOf(latency: readonly LimitCheckLatency[]): string {
  const doubled = latency.filter((l) => l.worse !== undefined).map((l) => `${l.share * 100} %`);
  if (doubled.length === latency.length) return 'two trials a share';
  return doubled.length === 0
    ? 'one trial a share'
    : `two trials at ${doubled.join(', ')} (the goal's), one at the others`;
}

/** One trial's row of the table: `which`, the better or the other of its share. */
const trialRow = (l: LimitCheckLatency, which: string) =>
  `| ${l.share * 100} % (${l.trial.rate}/s), ${which} | ${ms(l.trial.p50)} / ${ms(l.trial.p99)} / ${ms(l.trial.p999)} | ≤ ${bound(l.p99AtMostMs)} / ≤ ${bound(l.p999AtMostMs)} | ${within(l)} | ${l.process === undefined ? '' : `${l.process.loopMaxMs.toFixed(1)} / ${l.process.gcLongestMs.toFixed(1)} (${l.process.gcTotalMs.toFixed(0)}) / ${l.process.batches} (${l.process.batchMs.toFixed(0)})`} | ${l.trial.valid ? 'valid' : `**invalid** (success ${l.trial.success.toFixed(4)}, ${Math.round(l.trial.achievedRate)}/s achieved)`} |`;

/** The limit check's latency table and its method (proxy.md); '' if not measured. */
export function limitCheckLatencySection(r: LimitCheckResult | undefined): string {
  if (r?.latency === undefined || r.latency.length === 0) return '';
  const rows = r.latency
    .flatMap((l) =>
      l.worse === undefined
        ? [trialRow(l, 'one trial')]
        : [trialRow(l, 'better'), trialRow(l.worse, 'other')],
    )
    .join('\n');
  return `${searchLine(r)}The limit check's latency under an open model (vegeta, a fixed arrival rate whatever the
answers do) at 25, 50 and 75 % of ${maximumOf(r)}, pinned the same way, ${trialsOf(r.latency)},
each once the stack is quiet (under 0.3 of a core busy: the records of the trial before stored),
of two the better read (valid, then more checks within 25 ms) and the other shown.
vegeta's figures are the whole round trip on loopback; the histogram's are the
service's own SLI (\`mcpmeter_control_plane_limit_check_seconds\`, arrival to the end of the answer:
what the objective "99 % within 25 ms" of \`deploy/prometheus/mcpmeter-rules.yml\` reads), the
percentiles as the bucket bounds they fall in. A trial is invalid when a check failed or calls
fell behind schedule. *The process* is what held the control plane's event loop over the trial,
from its page: the loop's longest delay, the collector's longest pause (all pauses together),
and the usage batches ingest stored meanwhile (their time together, ms): in the bench ingest and
chdb run in the control plane's process, as \`npm start\` runs them; the chart runs ingest apart
and ClickHouse as a server.

| rate, trial | vegeta p50 / p99 / p99.9 (ms) | histogram p99 / p99.9 (ms) | within 25 ms | the process: loop delay max / GC longest (all) / ingest batches (ms) | |
| --- | --- | --- | --- | --- | --- |
${rows}
`;
}
