import type { LatencyTrial } from './harness/load';
import type { GcDuring, Span, SpansDuring } from './harness/metrics-page';
import { LATENCY_HOPS, type OpenModelLatency, type ShareTrials } from './latency';
import { CARRIED_P50_MS, type RateTried } from './open-max';

/**
 * The open-model latency section of bench/results/proxy.md (bench/latency.ts measures it): each
 * hop's maximum pinned apart, what it adds over the origin at 25, 50 and 75 % of it, and where
 * the metered proxy's time went.
 */

const fmt = (v: number, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : 'invalid');
const percentOf = (share: number) => `${Math.round(share * 100)} %`;

/** The best valid value of `pick` over `trials` (NaN when none is valid). */
function bestOf(trials: readonly LatencyTrial[], pick: (t: LatencyTrial) => number): number {
  const valid = trials.filter((t) => t.valid);
  return valid.length === 0 ? Number.NaN : Math.min(...valid.map(pick));
}

/** What the hop adds over the origin at the same rate, by `pick`: each side's best trial. */
export function addedOver(s: ShareTrials, pick: (t: LatencyTrial) => number): number {
  return bestOf(s.hop, pick) - bestOf(s.origin, pick);
}

/** B3's trials at half its maximum: the goal's figures. */
export function b3AtHalf(l: OpenModelLatency): ShareTrials | undefined {
  return l.shares.find((s) => s.target === 'B3' && s.share === 0.5);
}

/** How the batch work yielded the core (bench/harness/idle-group.ts); results from before it used nice 19. */
function batchPriority(l: OpenModelLatency): string {
  if (l.batchPriority === 'idle cgroup')
    return 'a CPU cgroup marked idle: whatever on the call path wakes takes the core from it at once';
  return l.batchPriority === 'nice 19' ? 'nice 19: no idle CPU cgroup could be made here' : 'nice 19';
}

/** The origin's wait for its core beside the hop and alone (not measured before 2026-11-29's evening runs). */
const originWaits = (s: ShareTrials) => s.originWaited as ShareTrials['originWaited'] | undefined;

function waitNote(s: ShareTrials): string {
  const w = originWaits(s);
  return w === undefined
    ? ''
    : `; the origin waited ${fmt(w.withHop)} ms a second for its core beside B3, ${fmt(w.alone)} alone`;
}

/** The groups of core 1 the goal's row names, and how; the rest (idle targets, the bench) together. */
const CORE1_GROUPS: ReadonlyArray<[string, string]> = [
  ['origin', 'the origin'],
  ['control-plane', "ingest and ClickHouse (the control plane's process)"],
  ['kafka', 'Kafka'],
  ['redis', 'Redis'],
  ['postgres', 'PostgreSQL'],
];

/**
 * Where core 1's time went beside B3 and with the origin alone, in cores, group by group (B3's
 * own process, on core 0, left out); empty in results from before it was read.
 */
export function core1Note(half: ShareTrials, generator: string): string {
  const busy = half.groupsBusy as ShareTrials['groupsBusy'] | undefined;
  if (busy === undefined) return '';
  const named = [['load generator', generator] as [string, string], ...CORE1_GROUPS];
  const rest = (side: Record<string, number>) =>
    Object.entries(side)
      .filter(([group]) => group !== 'proxy-b3' && !named.some(([g]) => g === group))
      .reduce((sum, [, cores]) => sum + cores, 0);
  const cell = (group: string) => `${fmt(busy.withHop[group] ?? 0, 2)} / ${fmt(busy.alone[group] ?? 0, 2)}`;
  return `; core 1's work beside B3 / with the origin alone, in cores: ${named
    .map(([group, label]) => `${label} ${cell(group)}`)
    .join(', ')}, the rest ${fmt(rest(busy.withHop), 2)} / ${fmt(rest(busy.alone), 2)}`;
}

/**
 * The latency goal's verdict on B3's trials at half its maximum. Met: B3 added at most 2 ms at
 * p99 and 10 at p99.9 over the origin, and the origin's own trials at that rate were within those
 * bounds too. An origin whose own tail is over the goal at that rate (its core congested) leaves
 * a difference within the goal unresolved: the two sides' noise is larger than what is measured.
 */
export function latencyVerdict(half: ShareTrials): { met: boolean; label: string; reason: string } {
  const p99 = addedOver(half, (t) => t.p99);
  const p999 = addedOver(half, (t) => t.p999);
  if (!(p99 <= 2 && p999 <= 10)) return { met: false, label: '**not met**', reason: '' };
  const originP99 = bestOf(half.origin, (t) => t.p99);
  const originP999 = bestOf(half.origin, (t) => t.p999);
  if (originP99 <= 2 && originP999 <= 10) return { met: true, label: 'met', reason: '' };
  return {
    met: false,
    label: '**not resolved**',
    reason: `; not resolved: the origin alone had p99 ${fmt(originP99, 3)} / p99.9 ${fmt(originP999, 3)} ms at this rate, over the goal itself, so a difference within the goal is within the noise`,
  };
}

/**
 * What B3 itself says it added at that rate (its `added` histogram, the SLI of
 * docs/operations.md: arrival to origin request and origin answer to client answer, without the
 * origin leg), trial by trial: the bucket bounds its p99 and p99.9 fall within. The trial whose
 * p99 the row gives (the lower of the generator's) is named, so its own reading is not taken
 * for the other trial's.
 */
export function sliNote(half: ShareTrials): string {
  const read = half.hop.flatMap((t) => {
    const added = (t.spans as SpansDuring | undefined)?.added;
    return added === undefined || added.count === 0 ? [] : [{ trial: t, added }];
  });
  const bounds = (a: SpansDuring['added']) =>
    `p99 ≤ ${fmt(a.p99AtMostMs, 2)}${a.p999AtMostMs === undefined ? '' : `, p99.9 ≤ ${fmt(a.p999AtMostMs, 2)}`} ms`;
  const [first] = read;
  if (first === undefined) return '';
  if (read.length === 1) return `; B3's own added time (its SLI histogram): ${bounds(first.added)}`;
  const shown = bestOf(half.hop, (t) => t.p99);
  const named = (t: LatencyTrial) => (t.valid && t.p99 === shown ? " (the trial of the row's p99)" : '');
  return `; B3's own added time (its SLI histogram), trial by trial: ${read
    .map(({ trial, added }) => `${bounds(added)}${named(trial)}`)
    .join('; ')}`;
}

/** The most the hypervisor took of each core in B3's and the origin's trials at that rate. */
function stolenNote(half: ShareTrials): string {
  const stolen = mostStolen([...half.hop, ...half.origin]);
  return stolen === undefined
    ? ''
    : `; the hypervisor took up to ${percentOf(stolen[0])} of core 0 and ${percentOf(stolen[1])} of core 1 in a trial (steal time)`;
}

/**
 * What nginx added at the goal's rate in the same arrangement (`OpenModelLatency.peerAtGoalRate`),
 * beside its own origin trial: empty where the run did not measure it.
 */
export function peerNote(l: OpenModelLatency): string {
  const peer = l.peerAtGoalRate;
  if (peer === undefined) return '';
  return `; nginx at the same rate and arrangement added ${fmt(
    addedOver(peer, (t) => t.p99),
    3,
  )} / ${fmt(
    addedOver(peer, (t) => t.p999),
    3,
  )} ms p99 / p99.9 (its own p99 ${fmt(
    bestOf(peer.hop, (t) => t.p99),
    3,
  )} ms, the origin's at that rate ${fmt(
    bestOf(peer.origin, (t) => t.p99),
    3,
  )})`;
}

/**
 * What the relay (F, bench/load/relay.c) added at the goal's rate over the origin's trials there
 * (`OpenModelLatency.relayAtGoalRate`): empty where the run did not measure it.
 */
export function relayNote(l: OpenModelLatency): string {
  const relay = l.relayAtGoalRate;
  if (relay === undefined) return '';
  return `; a TCP hop in C that only passes bytes (the relay, vegeta → it → the origin, the same cores and rate) added ${fmt(
    addedOver(relay, (t) => t.p99),
    3,
  )} / ${fmt(
    addedOver(relay, (t) => t.p999),
    3,
  )} ms p99 / p99.9`;
}

/** What the do-nothing hop added over the direct round trip at quantile `i` (1: p99, 2: p99.9), ms. */
export function floorAdded(l: OpenModelLatency, i: 1 | 2): number | undefined {
  const f = l.machineFloor;
  return f === undefined ? undefined : (f.hop[i] - f.direct[i]) / 1000;
}

/**
 * What a hop that does nothing added at the goal's rate on this machine
 * (`OpenModelLatency.machineFloor`): empty where the run did not measure it.
 */
export function floorNote(l: OpenModelLatency): string {
  const p99 = floorAdded(l, 1);
  const p999 = floorAdded(l, 2);
  if (p99 === undefined || p999 === undefined) return '';
  return `; a hop that does nothing (C on pipes, the same cores and rate: the machine's floor) added ${fmt(p99, 3)} / ${fmt(p999, 3)} ms p99 / p99.9`;
}

/** The goals table's rows for latency. */
export function latencyGoalRows(l: OpenModelLatency): string {
  const half = b3AtHalf(l);
  if (half === undefined)
    return "| added p99 / p99.9 at 50 % of B3's own maximum | not measured | ≤ 2 / ≤ 10 ms | |\n";
  const verdict = latencyVerdict(half);
  return `| added p50 / p99 / p99.9 over the origin at 50 % of B3's own maximum (${half.rate}/s of ${l.maxima.B3.max}, open model, the proxy pinned apart), B3 − B1 | ${fmt(
    addedOver(half, (t) => t.p50),
    3,
  )} / ${fmt(
    addedOver(half, (t) => t.p99),
    3,
  )} / ${fmt(
    addedOver(half, (t) => t.p999),
    3,
  )} ms${waitNote(half)}${core1Note(half, generatorOf(l))}${sliNote(half)}${peerNote(l)}${relayNote(l)}${floorNote(l)}${stolenNote(half)}${verdict.reason} | ≤ 2 ms p99, ≤ 10 ms p99.9 | ${verdict.label} |\n`;
}

const invalidNote = (t: LatencyTrial) =>
  `${t.target} @${t.rate}/s (${Math.round((t.achievedRate / t.rate) * 100)} % of the rate${t.success < 1 ? `, ${(t.success * 100).toFixed(1)} % succeeded` : ''}${(t.unsuccessful ?? 0) > 0 ? `, ${t.unsuccessful} calls refused or failed behind an HTTP 200` : ''})`;

function gcCell(t: LatencyTrial): string {
  const gc = t.gc as GcDuring | undefined;
  return gc === undefined
    ? 'not read'
    : `${gc.minor} minor (${fmt(gc.minorMs, 0)} ms), ${gc.major} major (${fmt(gc.majorMs, 0)} ms), longest ${fmt(gc.longestMs, 1)} ms`;
}

/** A bucket bound, or n/a where the run did not read it. */
const bound = (ms: number | undefined) => (ms === undefined ? 'n/a' : fmt(ms, 2));

function spanCells(t: LatencyTrial): string {
  const spans = t.spans as SpansDuring | undefined;
  if (spans === undefined) return ' | | | ';
  const cell = (span: Span) =>
    `${spans[span].over1ms} of ${spans[span].count}, ${fmt(spans[span].p99AtMostMs, 2)} / ${bound(spans[span].p999AtMostMs)} ms`;
  return `${cell('own')} | ${cell('origin')} | ${cell('answer')} | ${cell('added')}`;
}

/** The hop's run-queue wait, and its main thread's part of it where measured (since 2026-12-05). */
function waitedCell(s: ShareTrials): string {
  const main = s.mainWaitedMsPerSecond;
  return main === undefined ? fmt(s.waitedMsPerSecond) : `${fmt(s.waitedMsPerSecond)} (main ${fmt(main)})`;
}

/** What the main thread's part of *waited* is, in reports that have it. */
function mainWaitNote(l: OpenModelLatency): string {
  if (!l.shares.some((s) => s.mainWaitedMsPerSecond !== undefined)) return '';
  return ` (*main*: its main thread's part, the event loop's, where a call's answer waits; the rest
is its other threads, such as the collector's helpers and a Kafka producer's thread, waiting on
the hop's one core behind the loop or each other, which delays no call by itself)`;
}

function originWaited(s: ShareTrials): string {
  const w = originWaits(s);
  return w === undefined ? 'n/a' : `${fmt(w.withHop)} / ${fmt(w.alone)}`;
}

/** Core 1's busy share beside the hop and alone (not measured before 2026-11-30's morning). */
function core1Busy(s: ShareTrials): string {
  const busy = s.core1Busy as ShareTrials['core1Busy'] | undefined;
  return busy === undefined ? 'n/a' : `${percentOf(busy.withHop)} / ${percentOf(busy.alone)}`;
}

/**
 * The most of each core the hypervisor took in any of `trials` (steal time), as "core 0 / core 1";
 * undefined where the run did not read it (results from before 2026-11-30's second session).
 */
export function mostStolen(
  trials: ReadonlyArray<{ stolen?: [number, number] }>,
): [number, number] | undefined {
  const read = trials.map((t) => t.stolen).filter((s): s is [number, number] => s !== undefined);
  if (read.length === 0) return undefined;
  return [Math.max(...read.map((s) => s[0])), Math.max(...read.map((s) => s[1]))];
}

const stolenCell = (stolen: [number, number] | undefined) =>
  stolen === undefined ? 'n/a' : `${percentOf(stolen[0])} / ${percentOf(stolen[1])}`;

/** Both cores' busy shares in the trial that carried a hop's maximum, which was the busier, what was stolen. */
function atMaximum(m: { max: number; tried: readonly RateTried[] }): string {
  const trial = m.tried.find((t) => t.carried && t.rate === m.max);
  if (trial?.cores === undefined) return 'n/a';
  const [core0, core1] = trial.cores;
  const stolen = trial.stolen === undefined ? '' : `; stolen ${stolenCell(trial.stolen)}`;
  return `${percentOf(core0)} / ${percentOf(core1)}${core1 > core0 ? ' (core 1)' : ' (the hop)'}${stolen}`;
}

/** Whether each trial began on a quiet stack (see `OpenModelLatency.eachTrialFromQuiet`). */
const fromQuiet = (l: OpenModelLatency) =>
  l.eachTrialFromQuiet === true
    ? `; every trial, of the searches too, began once the stack was quiet (under 0.3 of a core busy over half a second, waiting at most ${l.quietLimitSeconds ?? 10} s: the ingest of the trial before done)`
    : '';

/** The latency trials' load generator. */
export const generatorOf = (l: OpenModelLatency): string => l.generator ?? 'vegeta';

/** What the report says of a generator other than vegeta; empty for vegeta. */
function generatorNote(l: OpenModelLatency): string {
  if (l.generator === undefined) return '';
  return `
This run's latency trials used open-load (\`bench/load/open-load.c\`, \`--latency-generator
open-load\`) in place of vegeta: the same open model in C, 64 to 256 keep-alive connections, a
call's latency from when it was written, or from when it was due if it waited for a connection.
A trial is valid when every call was answered 200 and at most 1 % waited for a connection;
"on time" is the share that did not.
`;
}

/** What the report says of the trials' origin; empty in results from before it was chosen. */
export function originNote(l: OpenModelLatency): string {
  if (l.origin === undefined) return '';
  if (l.origin === 'node')
    return `
This run's latency trials were over the bench's Node origin (\`--latency-origin node\`), as the
saturation, one-core and completeness figures of this page are.
`;
  return `
The origin of these trials is the C origin (\`bench/load/origin.c\`, \`--latency-origin c\`, the
default since 2026-12-03): one thread on one epoll loop answering each request with the bench
call's result from a fixed buffer, nothing allocated a call, so its own tail is the machine's.
Runs before it used the bench's Node origin, whose own p99 at the goal's rate (5 to 9 ms beside
the generator on core 1) was over the goal itself and left the verdict unresolved. It stands on
the Node origin's port for these trials, every hop called for 1 s over it first; the saturation,
one-core and completeness figures of this page are over the Node origin, and the workers section
names its own.
`;
}

/** The wake-up probe's paragraph and table; empty where the run did not measure it. */
export function floorSection(l: OpenModelLatency): string {
  const f = l.machineFloor;
  if (f === undefined) return '';
  const ms = (q: readonly number[]) => q.map((us) => fmt(us / 1000, 3)).join(' / ');
  return `
The machine's floor (\`bench/load/wake-probe.c\`, on the quiet stack after the trials, B3's
arrangement): ${f.rate} round trips a second of each kind for ${f.seconds} s, 8 bytes through pipes, a
caller and an origin on core 1, directly (as ${generatorOf(l)} calls the origin) and through a hop alone on
core 0 that only passes the bytes on (as a proxy sits between them: four wake-ups across cores a
call). Nothing is parsed or allocated on the way, so what the hop adds is what this machine
charges any hop for crossing cores: the scheduler, and on a virtual machine the hypervisor waking
an idle virtual CPU.

| round trip | p50 / p99 / p99.9 / longest, ms |
| --- | --- |
| direct (caller → origin → caller, core 1) | ${ms(f.direct)} |
| through the do-nothing hop (core 0) | ${ms(f.hop)} |
| added by the hop, p99 / p99.9 | ${fmt(floorAdded(l, 1) ?? Number.NaN, 3)} / ${fmt(floorAdded(l, 2) ?? Number.NaN, 3)} |
`;
}

export function latencySection(l: OpenModelLatency): string {
  const peer = l.peerAtGoalRate;
  const relay = l.relayAtGoalRate;
  const atGoal = [...(peer === undefined ? [] : [peer]), ...(relay === undefined ? [] : [relay])];
  const rows = [...l.shares, ...atGoal]
    .map((s) => {
      const label = s === peer ? "N at B3's 50 %" : s === relay ? "F (relay) at B3's 50 %" : s.target;
      const triple = (trials: readonly LatencyTrial[]) =>
        `${fmt(
          bestOf(trials, (t) => t.p50),
          3,
        )} / ${fmt(
          bestOf(trials, (t) => t.p99),
          3,
        )} / ${fmt(
          bestOf(trials, (t) => t.p999),
          3,
        )}`;
      return `| ${label} | ${s === relay ? 'n/a' : percentOf(s.share)} | ${s.rate} | ${fmt(
        addedOver(s, (t) => t.p50),
        3,
      )} / ${fmt(
        addedOver(s, (t) => t.p99),
        3,
      )} / ${fmt(
        addedOver(s, (t) => t.p999),
        3,
      )} | ${triple(s.hop)} | ${triple(s.origin)} | ${fmt(s.hopCpuMicros)} | ${Math.round(s.hopCoreBusy * 100)} % | ${waitedCell(s)} | ${originWaited(s)} | ${core1Busy(s)} | ${stolenCell(mostStolen([...s.hop, ...s.origin]))} |`;
    })
    .join('\n');
  const maxima = LATENCY_HOPS.map((hop) => {
    const m = l.maxima[hop];
    const tried = m.tried.map(
      (t) =>
        `${t.rate}${t.carried ? ' ✓' : ` ✗ (p50 ${fmt(t.p50, 2)} ms, ${Math.round((t.achievedRate / t.rate) * 100)} % on time)`}`,
    );
    return `| ${hop} | ${m.max} | ${atMaximum(m)} | ${tried.join(', ')} |`;
  }).join('\n');
  const invalid = [...l.shares, ...atGoal].flatMap((s) => [...s.hop, ...s.origin]).filter((t) => !t.valid);
  const b3 = l.shares.filter((s) => s.target === 'B3').flatMap((s) => s.hop.map((t) => ({ s, t })));
  const gen = generatorOf(l);
  return `## Added latency over the origin (${gen}, open model, the hop pinned apart)
${generatorNote(l)}${originNote(l)}
Each hop alone on core 0 (all its threads); ${gen}, the origin and every other process of the
stack on core 1, the batch work there (ingest, ClickHouse, Kafka, PostgreSQL, the idle targets)
at the lowest priority (${batchPriority(l)}) and what a call may wait on (the origin, Redis) at the normal one. First each hop's own maximum in that arrangement: the highest rate at which every
call started on schedule, every call succeeded and the median stayed under ${CARRIED_P50_MS} ms (past it calls
queue in the hop), found by bisection with ${l.searchSeconds} s trials${l.searchResolution === undefined ? '' : ` to within ${Math.round(l.searchResolution * 100)} %`} from the rate its one pinned core gave
wrk (a rate missed only by its median is tried once more: one stall of the machine would otherwise
settle the search low${l.searchBoundedByReached === true ? `; a trial that fell behind schedule bounds the search at the rate ${gen}'s calls started at, the hop's throughput with every connection waiting` : ''}). Then ${l.trialSeconds} s trials at 25, 50 and 75 % of that maximum, each beside the origin alone at the
same rate in the same arrangement (B3 twice each, interleaved, the better trial of each side
taken)${fromQuiet(l)}. *Added* is the hop's p50 / p99 / p99.9 less the origin's, in ms; the hop's CPU is its own
process's per call at that rate, with how busy that kept its core; *waited* is how long its
threads were runnable but not running (the kernel's run-queue delay), in ms per second: what the
machine's other work cost its latency${mainWaitNote(l)}; *origin waited* is the same for the origin, in the hop's
trial and in the origin's own. The origin shares core 1 with ${gen}: called directly, each wakes
the other in turn; behind a hop on core 0, the hop wakes each (the origin with a request, ${gen}
with an answer) whenever its calls arrive, often while the other is running, and it waits. A
tail that grows with the origin's wait is this machine's arrangement more than the hop's work;
the hop's own spans below tell the two apart. *Core 1 busy* is that core's whole busy share
(every process on it and the kernel's interrupt work, from \`/proc/stat\`) in the hop's trial and
in the origin's own. A maximum found with core 1 busier than the hop's core (the maxima's table)
is core 1's, ${gen}'s and the origin's, more than the hop's: its shares then load core 1 as
heavily. *Stolen* is the share of a core's time the hypervisor gave to something else while the
core had work (\`/proc/stat\`'s steal time; this machine is a virtual one): no process's figures
show it, and every task on that core waited it out. The latency goal reads *not resolved* when the origin's own trials at that rate had a
tail over the goal: a difference within the goal is then within the noise of either side.${
    peer === undefined
      ? ''
      : ` *N at B3's 50 %* is nginx at the rate the goal is judged at (${peer.rate}/s, ${percentOf(peer.share)} of its own maximum), over the origin's trials of B3's 50 %${peer.hop.length > 1 ? ` (${peer.hop.length} trials, the better read)` : ''}: what a peer adds at that rate in this arrangement.`
  }${
    relay === undefined
      ? ''
      : ` *F (relay) at B3's 50 %* is \`bench/load/relay.c\` at that rate, over the same origin trials: a reverse proxy in C that passes the bytes of each connection to one of its own to the origin and back, one thread on one epoll loop, nothing parsed, allocated per call or logged. What it adds is what a hop on TCP costs in this arrangement (the loopback's socket calls and the wake-ups across cores) with no HTTP work at all. It keeps no pool of origin connections, as nginx and B3 do (each of the generator's connections is one more for the origin on the crowded core 1), so it is no floor under their figures.`
  }

| hop | share of its max | calls/s | added p50 / p99 / p99.9 | hop p50 / p99 / p99.9 | origin p50 / p99 / p99.9 | hop CPU µs a call | its core busy | waited, ms/s | origin waited, ms/s: with the hop / alone | core 1 busy: with the hop / alone | stolen from cores 0 / 1, most in a trial |
| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |
${rows}

Maxima (calls/s; ✓ carried, ✗ not):

| hop | maximum | cores 0 / 1 busy at it (the busier); stolen | rates tried, in order |
| --- | ---: | --- | --- |
${maxima}

Invalid trials: ${invalid.map(invalidNote).join(', ') || 'none'}.
${floorSection(l)}
B3's trials: its garbage collection (from its \`/metrics\`; every call in the process waits out
a pause) and where its time went (its span histograms: *own* from arrival to the origin
request, *origin* from there to the end of the origin's answer, which includes the proxy's loop
being busy when the answer arrives, *answer* from there to the end of the client's answer, the
spool write included; *added*, own and answer of one request together, what the proxy says it
added: the SLI of docs/operations.md): requests over 1 ms in each span, and the histogram
buckets its 99th and 99.9th percentiles fall within.

| calls/s | p99 / p99.9, ms | stolen from cores 0 / 1 | garbage collection | own: over 1 ms, p99 / p99.9 ≤ | origin: over 1 ms, p99 / p99.9 ≤ | answer: over 1 ms, p99 / p99.9 ≤ | added: over 1 ms, p99 / p99.9 ≤ |
| ---: | --- | --- | --- | --- | --- | --- | --- |
${b3.map(({ s, t }) => `| ${s.rate}${t.valid ? '' : ' (invalid)'} | ${fmt(t.p99, 2)} / ${fmt(t.p999, 2)} | ${stolenCell(t.stolen)} | ${gcCell(t)} | ${spanCells(t)} |`).join('\n') || '| not read | | | | | | | |'}
`;
}
