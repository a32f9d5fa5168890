/**
 * Proxy workers (issue 65), a part of \`npm run bench:proxy\`: what more workers give on this
 * machine. The metered proxy of the bench stack (B3: one process) and the same proxy with
 * PROXY_WORKERS=2 (W2: a supervisor and two workers on one port), on the same control plane,
 * origin, customer and MCP server, each driven at saturation by wrk in turn, rounds alternating
 * which goes first. Reports calls/s and CPU per call of the proxy's processes (W2's workers
 * summed), and the ratios the issue's goal reads: W2 calls/s ÷ B3's (≥ 1.3 here, where wrk and
 * the origin share the same two cores) at no more CPU per call. Beside them B3 given half of
 * wrk's connections (B3h, as many as each worker is given) and each target's context switches a
 * call, which tell the split of the calls from a second process's cost.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { NODE_FLAGS } from '../deploy/node-flags';
import { cpuBetween, cpuSample } from './harness/cpu';
import type { LoadGenerators, OriginKind } from './harness/load';
import { unsuccessfulSince } from './harness/metrics-page';
import { type BenchProcesses, waitFor } from './harness/processes';
import { contextSwitches } from './harness/threads';
import type { BenchStack } from './proxy-stack';
import { median } from './targets';

/** W2's supervisor's name among the bench's processes; its workers are `proxy-w2`. */
const SUPERVISOR = 'proxy-w2-supervisor';

/** The pids whose parent is `pid`: a supervisor's workers. */
export function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {} // gone meanwhile
  }
  return found;
}

interface Trial {
  rps: number;
  errors: number;
  /** Tool calls the proxy ended other than as a success behind an HTTP 200 (absent in older runs). */
  unsuccessful?: number;
  cpuMicros: number;
  /** Every process's CPU over the trial, in cores: how near the machine was to all it has. */
  machineCores: number;
  /** The proxy's processes' context switches a call, every thread (absent in older runs). */
  switches?: { voluntary: number; involuntary: number };
  /** W2's supervisor's part of its CPU a call (absent in older runs and for B3). */
  supervisorMicros?: number;
}

interface Summary {
  rps: number;
  cpuMicros: number;
  machineCores: number;
  errors: number;
  /** Tool calls the proxy ended other than as a success behind an HTTP 200 (absent in older runs). */
  unsuccessful?: number;
  switches?: { voluntary: number; involuntary: number };
  supervisorMicros?: number;
}

/** The trials' targets: B3 with wrk's connections and with half of them, and W2. */
type Name = 'B3' | 'B3h' | 'W2';

export interface WorkersResult {
  /** The origin the trials called (absent in runs from before the C origin: the Node one). */
  origin?: OriginKind;
  rounds: number;
  trialSeconds: number;
  cores: number;
  B3: Summary;
  W2: Summary;
  /**
   * B3 given half of wrk's connections, as many as each of W2's workers is given (absent in
   * older runs): what splitting the calls alone costs a call, with no second process.
   */
  B3h?: Summary & { connections: number };
  throughputRatio: number;
  throughputRatioRange: [number, number];
  cpuPerCallRatio: number;
  trials: Record<'B3' | 'W2', Trial[]> & { B3h?: Trial[] };
}

/** Starts W2 beside the stack's B3, then rounds of both at saturation. */
export async function measureWorkers(
  stack: BenchStack,
  procs: BenchProcesses,
  load: LoadGenerators,
  options: {
    rounds: number;
    trialSeconds: number;
    origin: OriginKind;
    connections: number;
    log: (line: string) => void;
  },
): Promise<WorkersResult> {
  const { rounds: ROUNDS, trialSeconds: TRIAL_SECONDS, log } = options;
  const b3 = stack.targets.B3;
  const b3Port = new URL(b3.url).port;
  // W2: the same proxy as B3, with two workers, on a port of its own.
  const w2Port = String(await freePort());
  const supervisor = procs.spawnLogged(SUPERVISOR, process.execPath, [...NODE_FLAGS, 'deploy/start.mjs'], {
    ...stack.env,
    SERVICES: 'proxy',
    PROXY_PORT: w2Port,
    PROXY_WORKERS: '2',
    PROXY_SPILL_DIR: join(procs.work, 'spill-w2'),
  });
  await waitFor(`http://127.0.0.1:${w2Port}/healthz`);
  for (let i = 0; i < 100 && childrenOf(supervisor.pid as number).length < 2; i++)
    await new Promise((r) => setTimeout(r, 100));
  const workers = childrenOf(supervisor.pid as number);
  // Each worker counts in W2's CPU, as the supervisor does (apart, to say what it takes).
  for (const pid of workers) procs.named.set(pid, 'proxy-w2');
  log(`W2: supervisor ${supervisor.pid}, workers ${workers.join(', ')}`);
  const w2 = { ...b3, url: b3.url.replace(`:${b3Port}/`, `:${w2Port}/`) };

  // Warm W2 up (connections, JIT: the first rounds of a cold service run slower), then the rounds.
  for (let i = 0; i < 2; i++) {
    load.wrk(`warm-w2-${i}`, w2, TRIAL_SECONDS);
  }
  const trials: Record<Name, Trial[]> = { B3: [], B3h: [], W2: [] };
  const groups = { B3: ['proxy-b3'], B3h: ['proxy-b3'], W2: ['proxy-w2', SUPERVISOR] } as const;
  const half = Math.max(1, Math.floor(options.connections / 2));
  for (let round = 0; round < ROUNDS; round++) {
    const order: readonly Name[] = round % 2 === 0 ? ['B3', 'B3h', 'W2'] : ['W2', 'B3h', 'B3'];
    for (const name of order) {
      const group: readonly string[] = groups[name];
      const pids = [...procs.named].filter(([, n]) => group.includes(n)).map(([pid]) => pid);
      // Read from the proxy's page outside the CPU window.
      const unsuccessful = await unsuccessfulSince((name === 'W2' ? w2 : b3).url);
      const before = cpuSample(procs.named);
      const switchedBefore = contextSwitches(pids);
      const started = performance.now();
      const result = load.wrk(
        `${name}-${round}`,
        name === 'W2' ? w2 : b3,
        TRIAL_SECONDS,
        undefined,
        name === 'B3h' ? half : options.connections,
      );
      const switched = contextSwitches(pids);
      const used = cpuBetween(before, cpuSample(procs.named));
      const seconds = (performance.now() - started) / 1000;
      const calls = Math.max(1, result.requests);
      const cpuMicros = (group.reduce((sum, n) => sum + (used[n] ?? 0), 0) / calls) * 1e6;
      const supervisorMicros = name === 'W2' ? ((used[SUPERVISOR] ?? 0) / calls) * 1e6 : undefined;
      const machineCores = Object.values(used).reduce((a, b) => a + b, 0) / seconds;
      const switches = {
        voluntary: (switched.voluntary - switchedBefore.voluntary) / calls,
        involuntary: (switched.involuntary - switchedBefore.involuntary) / calls,
      };
      const refused = await unsuccessful();
      trials[name].push({
        rps: result.rps,
        errors: result.errors,
        unsuccessful: refused,
        cpuMicros,
        machineCores,
        switches,
        supervisorMicros,
      });
      log(
        `${name} round ${round}: ${Math.round(result.rps)} calls/s, ${cpuMicros.toFixed(1)} µs CPU a call, machine ${machineCores.toFixed(2)} cores busy, context switches a call ${switches.voluntary.toFixed(3)} + ${switches.involuntary.toFixed(3)}, ${result.errors} errors, ${refused} calls refused or failed`,
      );
    }
  }
  const summary = (name: Name): Summary => ({
    rps: median(trials[name].map((t) => t.rps)),
    cpuMicros: median(trials[name].map((t) => t.cpuMicros)),
    machineCores: median(trials[name].map((t) => t.machineCores)),
    errors: trials[name].reduce((s, t) => s + t.errors, 0),
    unsuccessful: trials[name].reduce((s, t) => s + (t.unsuccessful ?? 0), 0),
    switches: {
      voluntary: median(trials[name].map((t) => t.switches?.voluntary ?? 0)),
      involuntary: median(trials[name].map((t) => t.switches?.involuntary ?? 0)),
    },
    ...(name === 'W2' ? { supervisorMicros: median(trials[name].map((t) => t.supervisorMicros ?? 0)) } : {}),
  });
  const one = summary('B3');
  const two = summary('W2');
  const ratios = trials.B3.map((t, i) => (trials.W2[i]?.rps ?? 0) / t.rps);
  return {
    origin: options.origin,
    rounds: ROUNDS,
    trialSeconds: TRIAL_SECONDS,
    cores: cpus().length,
    B3: one,
    W2: two,
    B3h: { ...summary('B3h'), connections: half },
    throughputRatio: median(ratios),
    throughputRatioRange: [Math.min(...ratios), Math.max(...ratios)],
    cpuPerCallRatio: two.cpuMicros / one.cpuMicros,
    trials,
  };
}

const f = (n: number, digits = 0) => n.toFixed(digits);

/** Which origin the trials called, and why the C one. */
export function workersOriginNote(origin: OriginKind | undefined): string {
  return origin === 'c'
    ? "`bench/load/origin.c`, a fixed answer from one epoll loop in C: the bench's Node origin takes about half the proxy's CPU a call, on the two cores a second worker needs"
    : "the bench's Node origin";
}

/** The throughput ratio the issue asks of two workers. */
const W2_GOAL = 1.3;

/** The goals table's row for workers. */
export function workersGoalRow(w: WorkersResult): string {
  const refused = (w.B3.unsuccessful ?? 0) + (w.W2.unsuccessful ?? 0);
  const met =
    refused > 0
      ? `**invalid**: ${refused} calls refused or failed`
      : w.throughputRatio >= W2_GOAL && w.cpuPerCallRatio <= 1
        ? 'met'
        : '**not met**';
  return `| two proxy workers ÷ one process (W2 / B3), metered calls/s at saturation; CPU per call | ${f(w.throughputRatio, 2)} (rounds ${f(w.throughputRatioRange[0], 2)}–${f(w.throughputRatioRange[1], 2)}); ${f(w.cpuPerCallRatio, 2)} | ≥ ${W2_GOAL}; ≤ 1.0 | ${met} |\n`;
}

/** Context switches a call, voluntary + involuntary, as the table shows them. */
const switchesText = (s: Summary | undefined) =>
  s?.switches === undefined ? '–' : `${f(s.switches.voluntary, 3)} + ${f(s.switches.involuntary, 3)}`;

/** What splitting the calls and a second process each cost a call, from B3h (absent in older runs). */
function whereW2sCostGoes(w: WorkersResult): string {
  const { B3: one, W2: two, B3h: half } = w;
  if (half === undefined || one.switches === undefined || two.switches === undefined) return '';
  const taken =
    one.switches.involuntary > 0 ? two.switches.involuntary / one.switches.involuntary : Number.NaN;
  const split = half.cpuMicros - one.cpuMicros;
  const rest = two.cpuMicros - half.cpuMicros;
  return `
Where W2's extra CPU a call goes (${f(two.cpuMicros - one.cpuMicros, 1)} µs over B3's): B3 given ${half.connections} connections, as
many as each of W2's workers is given, so that each turn of its event loop has fewer calls to
share the turn's fixed costs among, cost ${f(half.cpuMicros, 1)} µs a call, ${f(split, 1)} more than with all of them:
the split of the calls alone, in one process. The remaining ${f(rest, 1)} µs a call comes with two proxy
processes sharing the ${w.cores} cores with wrk and the origin: W2's processes had their core taken
${f(two.switches.involuntary, 3)} times a call (B3 ${f(one.switches.involuntary, 3)}${Number.isFinite(taken) ? `, ${f(taken, 1)}×` : ''}), each time resuming on
caches another process used meanwhile, and gave it up ${f(two.switches.voluntary, 3)} times a call (B3
${f(one.switches.voluntary, 3)}: an event loop with no call to serve sleeps, and its next call pays the
wake-up).${two.supervisorMicros === undefined ? '' : ` The supervisor took ${f(two.supervisorMicros, 2)} µs of W2's CPU a call.`}
`;
}

/**
 * Why a cheaper proxy does not reach the goal on this machine: with B3's process given a whole
 * core (its calls/s 1 / p), two workers at no more CPU a call reach at most cores / (p + o)
 * calls/s, o being the rest of the machine's CPU a call (the generator, the origin, the pipeline),
 * so the ratio is at most cores × p / (p + o); the goal needs p ≥ goal × o / (cores − goal).
 */
export function fasterProxyNote(w: WorkersResult): string {
  const { B3: one, cores } = w;
  if (!(one.rps > 0) || cores <= W2_GOAL) return '';
  const p = one.cpuMicros;
  const o = (one.machineCores / one.rps) * 1e6 - p;
  if (!(o > 0)) return '';
  const needed = (W2_GOAL * o) / (cores - W2_GOAL);
  return `Nor would a cheaper proxy get there: were B3's process given a whole core, its calls/s
would be one core's worth of its CPU a call (p, ${f(p, 1)} µs), and ${cores} workers at no more CPU a call
could carry at most ${cores} cores' worth of p + o, o being the rest of the machine's CPU a call (${f(o, 1)} µs:
wrk, the origin and the pipeline, the ${f(one.machineCores, 2)} cores busy over B3's calls/s less the proxy's). That is
${cores} × p / (p + o) = ${f((cores * p) / (p + o), 2)}× at most; ${W2_GOAL}× needs p ≥ ${f(W2_GOAL / (cores - W2_GOAL), 2)} × o = ${f(needed, 1)} µs, a proxy that costs
more a call. On this machine the goal can be met only by a dearer proxy, or with the generator,
the origin and the pipeline on cores of their own.
`;
}

export function workersSection(w: WorkersResult, scaled = false): string {
  const { B3: one, W2: two, B3h: half } = w;
  return `## Workers: one proxy process and two (PROXY_WORKERS=2)

| | B3: one proxy process | B3 with ${half === undefined ? 'half the' : half.connections} connections | W2: PROXY_WORKERS=2 | W2 ÷ B3 | goal |
| --- | ---: | ---: | ---: | ---: | --- |
| metered calls/s, wrk at saturation | ${f(one.rps)} | ${half === undefined ? '–' : f(half.rps)} | ${f(two.rps)} | ${f(w.throughputRatio, 2)} (rounds ${f(w.throughputRatioRange[0], 2)}–${f(w.throughputRatioRange[1], 2)}) | ≥ ${W2_GOAL} |
| CPU µs per call, the proxy's processes (W2: both workers and the supervisor) | ${f(one.cpuMicros, 1)} | ${half === undefined ? '–' : f(half.cpuMicros, 1)} | ${f(two.cpuMicros, 1)} | ${f(w.cpuPerCallRatio, 2)} | ≤ 1.0 |
| context switches a call, the proxy's processes: voluntary + involuntary | ${switchesText(one)} | ${switchesText(half)} | ${switchesText(two)} | | |
| the machine's cores busy over the trial, every process (of ${w.cores}) | ${f(one.machineCores, 2)} | ${half === undefined ? '–' : f(half.machineCores, 2)} | ${f(two.machineCores, 2)} | | |
| errors (non-2xx, socket) | ${one.errors} | ${half === undefined ? '–' : half.errors} | ${two.errors} | | 0 |
| tool calls refused or failed behind an HTTP 200 (the proxy's metrics page) | ${one.unsuccessful ?? '–'} | ${half?.unsuccessful ?? '–'} | ${two.unsuccessful ?? '–'} | | 0 |

Median of ${w.rounds} rounds of ${w.trialSeconds} s, the targets in turn each round (alternating
which goes first); the throughput ratio is taken round by round, then the median. B3 and W2 are
the same service on the same split stack (one control plane with ingest, Redis, Kafka), the same
MCP server, customer and origin (${workersOriginNote(w.origin)}): every call is metered (Kafka → ingest →
ClickHouse) and limit-checked. Neither is pinned: W2's two workers and B3's one process compete with wrk, the origin and
the rest of the stack for the same ${w.cores} cores. Exactness across workers is not timed here:
\`test/e2e/proxy-workers.test.ts\` proves 0 overshoot for one customer through both workers, and a
killed worker's spool and leases settled.

With one proxy process the machine already had ${f(one.machineCores, 2)} of its ${w.cores} cores busy
(the proxy, wrk, the origin, Kafka, ingest and ClickHouse): a second worker can only take what is
left, ${f(Math.max(0, w.cores - one.machineCores), 2)} of a core, and the workers then compete with the origin and wrk for it.
Even a second worker that cost nothing more a call could not pass ${f(w.cores / one.machineCores, 2)}× B3's calls/s
here (the ${w.cores} cores over the ${f(one.machineCores, 2)} that B3's calls/s kept busy): the load generator, the
origin and the pipeline take the rest of the machine's CPU a call.
${fasterProxyNote(w)}${
  scaled
    ? 'What more cores give a proxy with cores of its own is measured below (scaling across cores).'
    : `What more cores give a proxy is measured only on a machine with cores to spare (four or more:
the bench then measures 1 to half of them in workers, the generator on the other half); here it is
estimated from the CPU per call: at ${f(two.cpuMicros, 1)} µs a call, each core given to the proxy alone
carries about ${f(1e6 / two.cpuMicros)} metered calls/s.`
}
${whereW2sCostGoes(w)}`;
}
