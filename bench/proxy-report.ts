import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoresBusy } from './harness/cpu';
import { percent } from './harness/cpu';
import type { OriginKind } from './harness/load';
import type { OpenModelLatency } from './latency';
import { generatorOf, latencyGoalRows, latencySection } from './latency-report';
import { type LimitCheckResult, limitCheckLatencyGoalRow, limitCheckLatencySection } from './limit-check';
import { ratioRoomNote } from './ratio-room';
import { type ScalingResult, scalingGoalRow, scalingSection } from './scaling';
import { median, PROXY_GROUP, type TargetName } from './targets';
import { type WorkersResult, workersGoalRow, workersSection } from './workers';

/**
 * The proxy bench's results (bench/proxy.ts): what a run measured, as JSON, a chart of CPU per
 * call by process, and the report bench/results/proxy.md, whose text states the method.
 */

export interface SaturationRow {
  target: TargetName;
  rounds: Array<{
    rps: number;
    requests: number;
    errors: number;
    /**
     * Tool calls the proxy ended other than as a success (HTTP 200 with a JSON-RPC error, which
     * wrk counts as answered), from its metrics page; absent for hops with none and older runs.
     */
    unsuccessful?: number;
    usPerCall: Record<string, number>;
    /** The system part of `usPerCall` (absent in runs from before it was measured). */
    systemUsPerCall?: Record<string, number>;
    /**
     * CPU µs per call by thread of the service's processes (harness/threads.ts), keyed
     * `<group>/<main|node|clickhouse>` (absent in runs from before it was measured).
     */
    threadsUsPerCall?: Record<string, number>;
  }>;
}

export interface Result {
  date: string;
  machine: string;
  method: {
    trialSeconds: number;
    rounds: number;
    connections: number;
    latencySeconds: number;
    /** The whole run's wall time, the stack's start included (absent in runs from before 2026-12-06). */
    runSeconds?: number;
  };
  saturation: SaturationRow[];
  /** The reference workload's CPU ms, once per round (absent in runs from before it). */
  reference?: number[];
  pinned: Record<string, number>;
  /** How busy each pinned trial kept the hop's core and the rest (absent in runs from before it). */
  pinnedBusy?: Record<string, CoresBusy>;
  /** Each pinned proxy trial's tool calls refused or failed behind an HTTP 200 (absent for other hops and older runs). */
  pinnedUnsuccessful?: Record<string, number>;
  /** The origin the one-core trials called (absent in runs from before the C origin: the Node one). */
  pinnedOrigin?: OriginKind;
  /** Added latency over the origin, each hop pinned apart (absent in runs from before it). */
  openModel?: OpenModelLatency;
  /** One proxy process against two workers (absent in runs from before it). */
  workers?: WorkersResult;
  /** 1 to the proxy's half of the machine's CPUs in workers, on a machine with four or more (absent on fewer). */
  scaling?: ScalingResult;
  /** The goal ratios of the run before, to say how they moved. */
  /** The run before this one's goal ratios, and its machine (absent in results of older runs). */
  previous?: { date: string; machine?: string; aOverN: number; b3OverBp: number };
  redisCommandsPerCall: number;
  completeness: { answered: number; recorded: number; ratio: number };
  /** The control plane's limit check on one pinned core (absent in runs from before it). */
  limits?: LimitCheckResult;
}

const THREAD_ROWS: Array<[string, string]> = [
  ['main', 'main thread (the event loop)'],
  ['node', 'other Node threads'],
  ['clickhouse', 'ClickHouse threads (chdb)'],
];

/**
 * CPU a call by thread of the service's processes, for the targets whose rounds measured it; ''
 * when none did (results from before it was measured).
 */
function threadsSection(r: Result): string {
  const measured = r.saturation.filter((s) => s.rounds.some((x) => x.threadsUsPerCall !== undefined));
  if (measured.length === 0) return '';
  const cell = (s: SaturationRow, key: string) => {
    const values = s.rounds.flatMap((x) => {
      const v = x.threadsUsPerCall?.[key];
      return v === undefined ? [] : [v];
    });
    return values.length === 0 ? undefined : median(values);
  };
  const processes: Array<[string, (s: SaturationRow) => string]> = [
    ['the service', (s) => PROXY_GROUP[s.target]],
    ['the control plane', () => 'control-plane'],
  ];
  const rows = processes.flatMap(([who, groupOf]) =>
    THREAD_ROWS.flatMap(([part, label]) => {
      const values = measured.map((s) => cell(s, `${groupOf(s)}/${part}`));
      if (values.every((v) => v === undefined || v < 0.05)) return [];
      return [
        `| ${who}: ${label} | ${values.map((v) => (v === undefined ? '–' : v.toFixed(1))).join(' | ')} |`,
      ];
    }),
  );
  return `
CPU µs per call by thread (median over rounds, user and system time): the service's own process
(the proxy's for B2, B3 and B3m; A's whole service) and the control plane's (ingest and chdb,
which store B3's and B3m's records). A dash: the target has no such process of its own.
A process's main thread runs its event loop: every call's JavaScript and socket calls, and what a
call waits for. Its other Node threads are V8's collector helpers, libuv's pool and the proxy's
Kafka producer thread (Node 20 gives them all one name). ClickHouse's threads are chdb's own,
inserts and merges. In a column whose records the control plane does not store (B2 meters
nothing; A stores its own), its figures are what it did meanwhile: merges of earlier inserts and
the rollups.

| thread | ${measured.map((s) => s.target).join(' | ')} |
| --- |${measured.map(() => ' ---: |').join('')}
${rows.join('\n')}
`;
}

/** Median over rounds of each process group's CPU µs per call. */
export function cpuOf(row: SaturationRow): Record<string, number> {
  const groups = new Set(row.rounds.flatMap((r) => Object.keys(r.usPerCall)));
  return Object.fromEntries([...groups].map((g) => [g, median(row.rounds.map((r) => r.usPerCall[g] ?? 0))]));
}

const GROUPS: Array<[string, string]> = [
  ['load generator', 'wrk'],
  ['origin', 'origin'],
  ['nginx', 'nginx'],
  ['passthrough', 'bare hop BP'],
  ['passthrough-net', 'bare hop BPn (net client)'],
  ['proxy-b2', 'proxy B2'],
  ['proxy-b3', 'proxy B3'],
  ['all-in-one', 'all-in-one service'],
  ['kafka', 'Kafka'],
  ['control-plane', 'control plane + ingest + chdb'],
  ['redis', 'Redis'],
  ['postgres', 'PostgreSQL'],
  ['bench', 'bench script'],
  ['other', 'other'],
];

export function printCpu(saturation: SaturationRow[], log: (line: string) => void) {
  for (const row of saturation) {
    const cpu = cpuOf(row);
    const group = PROXY_GROUP[row.target];
    const system = median(row.rounds.map((r) => r.systemUsPerCall?.[group] ?? 0));
    log(
      `${row.target}: ${Math.round(median(row.rounds.map((r) => r.rps)))} calls/s; CPU µs/call ${GROUPS.filter(
        ([g]) => (cpu[g] ?? 0) >= 0.5,
      )
        .map(
          ([g, label]) =>
            `${label} ${(cpu[g] ?? 0).toFixed(1)}${g === group ? ` (system ${system.toFixed(1)})` : ''}`,
        )
        .join(', ')}`,
    );
  }
}

/** A pair's CPU-per-call ratio, round by round (its two trials ran back to back), then the median and spread. */
function pairedRatio(r: Result, a: TargetName, b: TargetName) {
  const row = (t: TargetName) => r.saturation.find((s) => s.target === t);
  const over = row(b)?.rounds ?? [];
  const ratios = (row(a)?.rounds ?? [])
    .map(
      (x, i) =>
        (x.usPerCall[PROXY_GROUP[a]] ?? Number.NaN) / (over[i]?.usPerCall[PROXY_GROUP[b]] ?? Number.NaN),
    )
    .filter(Number.isFinite);
  return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
}

/** The goals' two CPU ratios of a run: the all-in-one over nginx, the metered proxy over the bare hop. */
export function goalRatios(r: Result): { aOverN: number; b3OverBp: number } {
  return { aOverN: pairedRatio(r, 'A', 'N').median, b3OverBp: pairedRatio(r, 'B3', 'BP').median };
}

export function writeResults(root: string, r: Result, log: (line: string) => void) {
  writeFileSync(join(root, 'bench', 'results', 'proxy.json'), `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(join(root, 'bench', 'results', 'proxy.svg'), plot(r));
  writeFileSync(join(root, 'bench', 'results', 'proxy.md'), report(r));
  log('written bench/results/proxy.{md,json,svg}');
}

/** Stacked bars: CPU µs per call of each target, by process. */
export function plot(r: Result): string {
  const colors = [
    '#bbb',
    '#8da0cb',
    '#66c2a5',
    '#a6d854',
    '#fc8d62',
    '#e78ac3',
    '#ffd92f',
    '#e5c494',
    '#b3b3b3',
    '#1b9e77',
    '#d95f02',
    '#7570b3',
    '#666',
  ];
  const rows = r.saturation.map((row) => ({ target: row.target, cpu: cpuOf(row) }));
  const max = Math.max(...rows.map((row) => Object.values(row.cpu).reduce((a, b) => a + b, 0)), 1);
  const width = 760;
  const barH = 26;
  const left = 60;
  const scale = (width - left - 180) / max;
  const parts: string[] = [];
  rows.forEach((row, i) => {
    let x = left;
    const y = 30 + i * (barH + 10);
    parts.push(`<text x="${left - 8}" y="${y + 18}" text-anchor="end" font-size="13">${row.target}</text>`);
    GROUPS.forEach(([group], g) => {
      const w = (row.cpu[group] ?? 0) * scale;
      if (w <= 0) return;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${colors[g]}"/>`,
      );
      x += w;
    });
    const total = Object.values(row.cpu).reduce((a, b) => a + b, 0);
    parts.push(`<text x="${(x + 6).toFixed(1)}" y="${y + 18}" font-size="12">${total.toFixed(0)} µs</text>`);
  });
  const legendY = 30 + rows.length * (barH + 10) + 10;
  GROUPS.forEach(([, label], g) => {
    const x = left + (g % 4) * 170;
    const y = legendY + Math.floor(g / 4) * 18;
    parts.push(
      `<rect x="${x}" y="${y}" width="12" height="12" fill="${colors[g]}"/><text x="${x + 16}" y="${y + 11}" font-size="11">${label}</text>`,
    );
  });
  const height = legendY + Math.ceil(GROUPS.length / 4) * 18 + 10;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<text x="${left}" y="18" font-size="14">CPU µs per call by process, wrk at saturation (${r.date.slice(0, 10)})</text>
${parts.join('\n')}
</svg>
`;
}

/**
 * What held a pinned trial back: when the hop had time to spare on its core while the other core
 * (wrk, the origin, the rest of the stack) was full, the calls/s measured the other core; the
 * hop's own ceiling is the trial's calls per second of the hop's CPU.
 */
function pinnedBound(hop: string, busy: CoresBusy | undefined, rps: number): string {
  if (busy === undefined || busy.hop >= 0.9 || busy.hop <= 0) return '';
  const perCall = (busy.hop * 1e6) / rps;
  return `; its core ${percent(busy.hop)} busy while the other core (wrk, the origin, the rest of the stack) carried ${busy.rest.toFixed(2)} of a core: held back there, not by ${hop}, whose ${perCall.toFixed(1)} µs of CPU a call in that trial come to about ${Math.round(rps / busy.hop / 100) * 100} calls a second of its core`;
}

/** The one-core trials' key for B3 over the bench's Node origin, beside its trial over the C origin. */
export const B3_OVER_NODE = 'B3, Node origin';

/** B3's one-core figure over the Node origin, when the run also measured it. */
function overNodeToo(r: Result): string {
  const rps = r.pinned[B3_OVER_NODE];
  const busy = r.pinnedBusy?.[B3_OVER_NODE];
  if (rps === undefined) return '';
  return `; over the bench's Node origin ${Math.round(rps)}${busy === undefined ? '' : ` (its core ${percent(busy.hop)} busy, everything else ${busy.rest.toFixed(2)} of a core)`}`;
}

/** Which origin the one-core trials called, and why. */
function pinnedOriginNote(origin: OriginKind | undefined): string {
  return origin === 'c'
    ? `The origin is the C one (\`bench/load/origin.c\`, \`--pinned-origin c\`, as in the trials below): beside the bench's Node origin, which costs about half a metered call's CPU, wrk and the pipeline, core 1 was full before the hop's core was (in the run of 2026-12-05 19:10, B3 16,903 calls/s with its core 85 % busy, nginx 16,458 at 47 %). *${B3_OVER_NODE}* is B3 over the Node origin, in the same run, before the switch: a slower origin's answers arrive together, so each turn of the hop's event loop carries more calls and its fixed costs are shared among them; the goal's figure is the better of the two.`
    : "The origin is the bench's Node one, which costs about half a metered call's CPU on core 1 beside wrk and the pipeline (`--pinned-origin c` calls the C one instead).";
}

/** A target's tool calls refused or failed behind an HTTP 200 over its rounds; '–' for a hop with no metrics page. */
function unsuccessfulOf(row: SaturationRow): string {
  const counted = row.rounds.flatMap((x) => (x.unsuccessful === undefined ? [] : [x.unsuccessful]));
  return counted.length === 0 ? '–' : String(counted.reduce((a, b) => a + b, 0));
}

/** The targets whose saturation rounds ended calls other than as a success: their figures count them as calls. */
export function unsuccessfulTargets(r: Pick<Result, 'saturation'>): TargetName[] {
  return r.saturation.filter((s) => s.rounds.some((x) => (x.unsuccessful ?? 0) > 0)).map((s) => s.target);
}

export function report(r: Result): string {
  const row = (t: TargetName) => r.saturation.find((s) => s.target === t);
  const cpu = (t: TargetName) => {
    const s = row(t);
    return s === undefined ? {} : cpuOf(s);
  };
  const own = (t: TargetName) => cpu(t)[PROXY_GROUP[t]] ?? Number.NaN;
  const all = (t: TargetName) => Object.values(cpu(t)).reduce((a, b) => a + b, 0);
  const fmt = (v: number, d = 1) => (Number.isNaN(v) ? 'invalid' : v.toFixed(d));
  const fmtPart = (v: number) => (Number.isNaN(v) ? 'n/a' : v.toFixed(1));
  // A goal on a target whose rounds refused or failed calls is read from calls that did not run.
  const invalid = unsuccessfulTargets(r);
  const goal = (ok: boolean, on: readonly TargetName[] = []) =>
    on.some((t) => invalid.includes(t))
      ? `**invalid**: ${on.filter((t) => invalid.includes(t)).join(', ')} refused or failed calls`
      : ok
        ? 'met'
        : '**not met**';
  const paired = (a: TargetName, b: TargetName) => pairedRatio(r, a, b);
  const spread = (x: { min: number; max: number }, d = 2) => `${fmt(x.min, d)}–${fmt(x.max, d)}`;
  // A: the all-in-one service's CPU per call (its one process) over nginx's.
  const aN = paired('A', 'N');
  const b3Bp = paired('B3', 'BP');
  const aOverN = aN.median;
  const b3OverBp = b3Bp.median;
  // The hop's own CPU split, round by round then the median: system time (the kernel, on its
  // behalf) and user time (its code, runtime and libraries).
  const ownPart = (t: TargetName, part: 'system' | 'user') => {
    const values = (row(t)?.rounds ?? []).flatMap((x) => {
      const system = x.systemUsPerCall?.[PROXY_GROUP[t]];
      if (system === undefined) return [];
      return [part === 'system' ? system : (x.usPerCall[PROXY_GROUP[t]] ?? 0) - system];
    });
    return values.length === 0 ? Number.NaN : median(values);
  };
  const ownSpread = (t: TargetName) => {
    const values = (row(t)?.rounds ?? []).map((x) => x.usPerCall[PROXY_GROUP[t]] ?? Number.NaN);
    return values.length === 0 ? 'n/a' : spread({ min: Math.min(...values), max: Math.max(...values) }, 0);
  };
  const reference = r.reference ?? [];
  // Something outside the stack (a compiler, an editor's indexer) that ran during a trial took
  // cores from it: such trials are named, so a reader knows which figures it touched.
  const disturbed = r.saturation.flatMap((s) =>
    s.rounds.flatMap((x, i) =>
      (x.usPerCall.other ?? 0) > 0.1 * (x.usPerCall[PROXY_GROUP[s.target]] ?? 0)
        ? [`${s.target} round ${i + 1} (${fmt(x.usPerCall.other ?? 0)} µs/call)`]
        : [],
    ),
  );
  const noise =
    reference.length === 0
      ? 'not measured in this run.'
      : `a fixed JavaScript workload (allocation, JSON, a map; no load running) on core 0 took ${reference
          .map((v) => v.toFixed(0))
          .join(
            ', ',
          )} ms, round by round (the slowest ${fmt(Math.max(...reference) / Math.min(...reference), 2)}× the fastest). The virtual machine's neighbours move memory-bound work by that much from one minute to the next, whatever runs here; a single trial can be off by as much, which is why no figure here comes from one trial.`;
  // How a goal ratio moved since the run before this one, and on which machine if another.
  const cpuOfMachine = (machine: string) => machine.split(',')[0] ?? machine;
  const elsewhere =
    r.previous?.machine === undefined || cpuOfMachine(r.previous.machine) === cpuOfMachine(r.machine)
      ? ''
      : ` on ${cpuOfMachine(r.previous.machine)}`;
  const moved = (k: 'aOverN' | 'b3OverBp') =>
    r.previous === undefined
      ? ''
      : `; ${fmt(r.previous[k], 2)} in the run of ${r.previous.date.slice(0, 10)}${elsewhere}`;
  const cpuRows = GROUPS.filter(([g]) => r.saturation.some((s) => (cpuOf(s)[g] ?? 0) >= 0.05))
    .map(([g, label]) => `| ${label} | ${r.saturation.map((s) => fmt(cpuOf(s)[g] ?? 0)).join(' | ')} |`)
    .join('\n');
  return `# Proxy benchmark (wrk and ${r.openModel === undefined ? 'vegeta' : generatorOf(r.openModel)})

Run ${r.date} on ${r.machine}${r.method.runSeconds === undefined ? '' : `, in ${Math.floor(r.method.runSeconds / 60)} min ${Math.round(r.method.runSeconds % 60)} s from start to results (the issue asks for under 15)`}. Everything (load generator, origin, nginx, proxies, control plane,
Redis, Kafka, ClickHouse) shares this machine: the ratios, measured in one run, are what count.
Method below the tables; the plot is [proxy.svg](proxy.svg).

## Goals (issues 28 and 65)

| measure | now | goal | |
| --- | --- | --- | --- |
| proxy process CPU per metered call (B3) | ${fmt(own('B3'))} µs | ≤ 60 µs | ${goal(own('B3') <= 60, ['B3'])} |
| all-in-one service CPU per metered call ÷ nginx proxy_pass (A / N), wrk at saturation | ${fmt(aOverN, 2)} (rounds ${spread(aN)}; ${fmt(own('A'))} / ${fmt(own('N'))} µs)${moved('aOverN')} | ≤ 2.0 | ${goal(aOverN <= 2, ['A'])} |
| B3 CPU per call / BP CPU per call: what metering and gating add to a bare hop | ${fmt(b3OverBp, 2)} (rounds ${spread(b3Bp)}; ${fmt(own('B3'))} / ${fmt(own('BP'))} µs)${moved('b3OverBp')} | ≤ 1.15 | ${goal(b3OverBp <= 1.15, ['B3'])} |
| metered calls/s, one proxy process pinned to one core (B3)${r.pinnedOrigin === 'c' ? ', over the C origin' : ''} | ${Math.round(r.pinned.B3 ?? 0)}${pinnedBound('B3', r.pinnedBusy?.B3, r.pinned.B3 ?? 0)}${overNodeToo(r)} | ≥ 20,000 | ${(r.pinnedUnsuccessful?.B3 ?? 0) + (r.pinnedUnsuccessful?.[B3_OVER_NODE] ?? 0) > 0 ? '**invalid**: B3 refused or failed calls' : goal(Math.max(r.pinned.B3 ?? 0, r.pinned[B3_OVER_NODE] ?? 0) >= 20_000)} |
${r.openModel === undefined ? '' : latencyGoalRows(r.openModel)}${r.workers === undefined ? '' : workersGoalRow(r.workers)}${r.scaling === undefined ? '' : scalingGoalRow(r.scaling)}| Redis commands per call (B3) | ${r.redisCommandsPerCall.toFixed(4)} | ≤ 0.1 | ${goal(r.redisCommandsPerCall <= 0.1)} |
| control-plane limit check (\`POST /v1/sdk/limits\`), checks/s on one pinned core | ${r.limits === undefined ? 'not measured' : `${Math.round(r.limits.rps)} (${r.limits.counted} counted for ${r.limits.answered} answered, ${r.limits.errors} errors)`} | ≥ 5,000, exact | ${goal((r.limits?.rps ?? 0) >= 5000)} |
${limitCheckLatencyGoalRow(r.limits)}| completeness: B3 records in ClickHouse / calls the origin answered, over an open-model trial | ${r.completeness.ratio.toFixed(4)} (${r.completeness.recorded} / ${r.completeness.answered}) | 1.0000 | ${goal(r.completeness.ratio === 1)} |
${ratioRoomNote({ A: own('A'), N: own('N'), B3: own('B3'), BP: own('BP'), BPn: own('BPn') })}
## Maximum throughput and CPU per call, wrk at saturation

Median of ${r.method.rounds} rounds of ${r.method.trialSeconds} s, ${r.method.connections} connections, every target in turn each round.
Ratios (the goals above, B3m / B3 below) are taken round by round, between trials that ran back to
back, then the median; "rounds" gives their spread.

| | ${r.saturation.map((s) => s.target).join(' | ')} |
| --- |${r.saturation.map(() => ' ---: |').join('')}
| calls/s | ${r.saturation.map((s) => Math.round(median(s.rounds.map((x) => x.rps)))).join(' | ')} |
| errors (non-2xx, socket) | ${r.saturation.map((s) => s.rounds.reduce((a, x) => a + x.errors, 0)).join(' | ')} |
| tool calls refused or failed behind an HTTP 200 (the proxy's metrics page) | ${r.saturation.map((s) => unsuccessfulOf(s)).join(' | ')} |
| **CPU µs per call, the hop's own process** | ${r.saturation.map((s) => `**${fmt(own(s.target))}**`).join(' | ')} |
| the same, lowest–highest round | ${r.saturation.map((s) => ownSpread(s.target)).join(' | ')} |
| of which system time (the kernel: socket calls) | ${r.saturation.map((s) => fmtPart(ownPart(s.target, 'system'))).join(' | ')} |
| of which user time (the hop's code and runtime) | ${r.saturation.map((s) => fmtPart(ownPart(s.target, 'user'))).join(' | ')} |
| the hop's own CPU a call ÷ the bench origin's in B1 (Node on this machine) | ${r.saturation.map((s) => fmt(paired(s.target, 'B1').median, 2)).join(' | ')} |
| CPU µs per call, every process | ${r.saturation.map((s) => fmt(all(s.target))).join(' | ')} |

System time is the kernel's work on the process's behalf: for every hop nearly all of it the
same four socket calls a call (read the request, write it to the origin, read the answer, write
it to the client), where a write on loopback also delivers the bytes to the reader and wakes it.
User time is the hop's own code, its runtime and libraries: metering and gating are user time.
The row "÷ the bench origin's" divides each hop's CPU a call by the origin's in B1's trials (a
Node HTTP server that answers at once, driven by wrk directly), round by round: a Node baseline
from the same machine and run, so hops measured on machines of different speed compare there
(the origin cost ${fmt(own('B1'))} µs a call in this run; 85 on the slower machine of issue 65's first runs).

CPU µs per call by process (median over rounds):

| process | ${r.saturation.map((s) => s.target).join(' | ')} |
| --- |${r.saturation.map(() => ' ---: |').join('')}
${cpuRows}
${threadsSection(r)}
Trials in which processes outside the stack ("other") took more than a tenth of the hop's own CPU:
${disturbed.join(', ') || 'none'}.

Targets: B1 the origin directly; N nginx \`proxy_pass\` with upstream keep-alive (1 worker); BP a
bare uWebSockets.js + undici hop; BPn the same hop with a lean HTTP/1.1 keep-alive client over
\`net\` in place of undici (\`bench/load/passthrough.ts\`, a prototype for the comparison); B2 the proxy with metering off; B3 the proxy, every call metered
(Kafka → ingest → ClickHouse); B3m B3 with MCP 2026-07-28 calls; A the all-in-one service
(\`npm start\`: proxy, control plane, ingest and chdb in one process, every call metered). B3's
and B3m's records are consumed by the control-plane process, A's in its own process: "every process" counts
them. The services (B2, B3, A, the control plane) start as \`npm start\` starts them, with the V8
flags of \`deploy/node-flags.ts\`; the bare hops BP and BPn with Node's defaults. B3m / B3 (the modern era's cost): ${fmt(paired('B3m', 'B3').median, 2)} (rounds ${spread(paired('B3m', 'B3'))}).

## One core

The hop's process alone on core 0 (all its threads); wrk, the origin and every other process of
the stack on core 1; the best of two trials. "Busy" is CPU time per second of the trial: the hop's
own core near 100% means the figure is what one core of it gives; short of that, something else
held it back (core 1, where wrk and the origin run, near its whole core). ${pinnedOriginNote(r.pinnedOrigin)}

| | ${Object.keys(r.pinned).join(' | ')} |
| --- |${Object.keys(r.pinned)
    .map(() => ' ---: |')
    .join('')}
| calls/s | ${Object.values(r.pinned)
    .map((v) => Math.round(v))
    .join(' | ')} |
${
  r.pinnedBusy === undefined
    ? ''
    : `| the hop's core busy | ${Object.keys(r.pinned)
        .map((k) => (r.pinnedBusy?.[k] === undefined ? '' : percent(r.pinnedBusy[k].hop)))
        .join(' | ')} |
| everything else, in cores | ${Object.keys(r.pinned)
        .map((k) => (r.pinnedBusy?.[k] === undefined ? '' : fmt(r.pinnedBusy[k].rest, 2)))
        .join(' | ')} |
`
}${
  r.pinnedUnsuccessful === undefined
    ? ''
    : `| tool calls refused or failed behind an HTTP 200 | ${Object.keys(r.pinned)
        .map((k) => r.pinnedUnsuccessful?.[k] ?? '–')
        .join(' | ')} |
`
}
The control plane's limit check (\`POST /v1/sdk/limits\`, one unit consumed per check, 32
connections): the control-plane process (with ingest and chdb, as it runs here) alone on core 0,
PostgreSQL, Redis, Kafka and wrk on core 1, after a 5 s warm-up; the best of two trials${r.limits?.busy === undefined ? '' : ` (the control plane's core ${percent(r.limits.busy.hop)} busy, everything else ${fmt(r.limits.busy.rest, 2)} of a core)`}. Exact:
the units counted (read back once the pipeline stored the checks' records) against the checks
wrk saw answered, the difference being checks in flight when wrk stopped.
${r.limits?.latency === undefined ? '' : `\n${limitCheckLatencySection(r.limits)}`}
${r.openModel === undefined ? '' : `${latencySection(r.openModel)}\n`}${r.workers === undefined ? '' : `${workersSection(r.workers, r.scaling !== undefined)}\n`}${r.scaling === undefined ? '' : `${scalingSection(r.scaling)}\n`}## Method

- Load generators: wrk (Debian; 1 thread, closed model: each connection sends its next call when
  the last is answered) for maximum throughput and CPU per call; vegeta (Go module
  \`github.com/tsenart/vegeta/v12\`, built with \`go install\`; open model: calls start on
  schedule whatever the target does) for latency${r.openModel?.generator === undefined ? '' : ' (this run: open-load, in its place; see the latency section)'}. Both read the tool-neutral scenarios in
  \`bench/scenarios/\` (\`bench/scenarios/README.md\` runs them by hand against a deployed proxy).
- CPU: user + system time of every process from \`/proc\`, sampled around each trial (for B3, B3m
  and A also after it, until the hop has published every record of the trial, which for A means
  stored, and 2 s more while the consumer stores B3's and B3m's), divided by the calls wrk counted. The load generator is counted through the bench's children.
- Noise: everything shares two cores; rounds take every target in turn so drift reaches all alike,
  compared targets side by side (nginx and A, BP and B3, B3 and B3m), every other round in reverse
  order; medians over rounds, ratios round by round. A throughput figure is the machine's, not the
  product's: read the ratios.
- The machine's own noise: ${noise}
- No timing is asserted in tests. \`npm run bench:proxy -- --cpu-only\` is the quick loop (one
  round, printed, nothing written).
`;
}
