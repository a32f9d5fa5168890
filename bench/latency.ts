import { cores, hopAndRest } from './harness/cores';
import {
  coresBusyBetween,
  coresStolenBetween,
  coreTimes,
  cpuBetween,
  cpuSample,
  pinGroups,
  runQueueWait,
  setNice,
  stackGroups,
} from './harness/cpu';
import { type IdleGroup, leaveIdleGroup, toIdleGroup } from './harness/idle-group';
import type {
  LatencyGenerator,
  LatencyTrial,
  LoadGenerators,
  OriginKind,
  Target,
  WakeProbe,
} from './harness/load';
import {
  callOutcomes,
  freshGet,
  gcBetween,
  gcMetrics,
  spanBuckets,
  spansBetween,
  unsuccessfulBetween,
} from './harness/metrics-page';
import { type RateTried, SEARCH_RESOLUTION, searchOpenMax, triedAt } from './open-max';
import { PROXY_GROUP, RELAY_GROUP, type TargetName } from './targets';

/**
 * Added latency over the origin in the open model (issue 65). Each hop is measured pinned apart:
 * its process alone on core 0, the origin, vegeta and the rest of the stack on core 1, so what a
 * hop adds is its own work and not a fight for the core it shares with the load generator. First
 * each hop's own maximum in that arrangement (the highest rate it carries with every call started
 * on schedule, answered, and the median under 1 ms: no queue building), then trials at 25, 50
 * and 75 % of it, each beside the origin alone at the same rate, in the same arrangement.
 */

export const LATENCY_HOPS = ['N', 'BP', 'B3'] as const;
export type LatencyHop = (typeof LATENCY_HOPS)[number];
/**
 * A hop trials are run through: one of LATENCY_HOPS, or F, the relay (bench/load/relay.c, a TCP
 * hop in C that passes bytes and does nothing else), run only at the goal's rate: what a hop on
 * TCP costs in the trials' own arrangement with no HTTP work at all.
 */
export type TrialHop = LatencyHop | 'F';
const groupOfHop = (hop: TrialHop) => (hop === 'F' ? RELAY_GROUP : PROXY_GROUP[hop]);
export const LATENCY_SHARES = [0.25, 0.5, 0.75] as const;

/** A hop's trials at one share of its maximum, and the origin's at the same rate. */
export interface ShareTrials {
  target: TrialHop;
  share: number;
  rate: number;
  hop: LatencyTrial[];
  origin: LatencyTrial[];
  /** The hop's own CPU µs per call at this rate (its best trial), and its core's busy share. */
  hopCpuMicros: number;
  hopCoreBusy: number;
  /** How long the hop's threads waited, runnable, for a CPU: ms per second of its trials. */
  waitedMsPerSecond: number;
  /** Of it, its main thread's (the event loop's; absent in results from before 2026-12-05). */
  mainWaitedMsPerSecond?: number;
  /**
   * How long the origin's threads waited for a CPU, ms per second: in the hop's trial taken and
   * in the origin's own trials (the better one). The origin shares core 1 with vegeta: called
   * directly, each wakes the other in turn; behind a hop, the hop wakes both (the origin with a
   * request, vegeta with an answer), often while the other runs.
   */
  originWaited: { withHop: number; alone: number };
  /**
   * How busy core 1 (vegeta, the origin and the rest of the stack) was, 0 to 1, in the hop's
   * trial taken and in the origin's own (absent in results from before 2026-11-30's morning).
   */
  core1Busy?: { withHop: number; alone: number };
  /**
   * What each process group of the stack took, in cores, over the hop's trial taken and the
   * origin's own (the better): where core 1's time went beside the hop (absent in results from
   * before 2026-12-03's second session).
   */
  groupsBusy?: { withHop: Record<string, number>; alone: Record<string, number> };
}

/** How the batch work was kept off the call path's core: see `pinApart`. */
export type BatchPriority = 'idle cgroup' | 'nice 19';

export interface OpenModelLatency {
  trialSeconds: number;
  /** Absent in results from before the idle group (nice 19 then). */
  batchPriority?: BatchPriority;
  /**
   * Whether every trial waited for a quiet stack first (since 2026-11-30's second session; before,
   * only each hop's search and each share did, and an origin trial could carry the ingest of the
   * metered hop's trial before it).
   */
  eachTrialFromQuiet?: boolean;
  /** The longest wait for a quiet stack, s (absent: 10 s, before 2026-12-07). */
  quietLimitSeconds?: number;
  searchSeconds: number;
  /** Where each search ended (`SEARCH_RESOLUTION`; absent: after six steps, before 2026-12-03's second session). */
  searchResolution?: number;
  /**
   * Whether a search trial behind schedule bounded the search at the rate the generator's calls
   * reached (open-max.ts; absent: not, before 2026-12-07's second session, or with open-load).
   */
  searchBoundedByReached?: boolean;
  maxima: Record<LatencyHop, { max: number; tried: RateTried[] }>;
  shares: ShareTrials[];
  /**
   * nginx at the rate the goal is judged at (50 % of B3's maximum), over the origin's trials of
   * B3's at that rate: what a peer adds in the same arrangement at the same rate (absent in
   * results from before 2026-11-30's third session, and when that rate is past nginx's own maximum).
   */
  peerAtGoalRate?: ShareTrials;
  /**
   * The machine's floor at the goal's rate: round trips through a hop that does nothing, in the
   * trials' arrangement (bench/load/wake-probe.c), beside the same round trips made directly
   * (absent in results from before 2026-11-30's fourth session).
   */
  machineFloor?: WakeProbe;
  /**
   * The relay (F, bench/load/relay.c) at the goal's rate, over the origin's trials of B3's there:
   * what a hop on TCP that does nothing but pass bytes adds in the trials' own arrangement (vegeta
   * and the origin on core 1, the hop alone on core 0; absent in results from before
   * 2026-12-03).
   */
  relayAtGoalRate?: ShareTrials;
  /** The trials' generator when not vegeta (`--latency-generator`); absent: vegeta. */
  generator?: 'open-load';
  /**
   * The trials' origin (`--latency-origin`): absent, the bench's Node origin (every run before
   * 2026-12-03's second session).
   */
  origin?: OriginKind;
}

/** How long the wake-up probe runs at the goal's rate, s. */
export const FLOOR_SECONDS = 4;

export interface LatencyPlan {
  load: LoadGenerators;
  targets: Record<TargetName, Target>;
  /** The relay (F), when the stack runs one. */
  relay?: Target;
  named: ReadonlyMap<number, string>;
  /** Where each hop's search starts: the calls/s its one pinned core gave wrk (closed model). */
  start: Record<LatencyHop, number>;
  trialSeconds: number;
  searchSeconds: number;
  generator: LatencyGenerator;
  /** Which origin stands on the origin's port for the trials (the caller put it there). */
  origin: OriginKind;
  log: (line: string) => void;
}

const round100 = (rate: number) => Math.max(100, Math.round(rate / 100) * 100);
const rounds = (n: number) => Array.from({ length: n }, (_, i) => i);

/**
 * What a call may wait on besides the hop: the origin, and Redis (the proxy's limit leases and
 * snapshot reads; near a limit, or for a counter's first call, a call waits for its answer).
 */
const ORIGIN = 'origin';
const CALL_PATH = [ORIGIN, 'redis'];

/**
 * The hop alone on core 0, every other process of the stack on core 1, where the batch work
 * (ingest and ClickHouse, Kafka, the idle targets: all but the call path) runs at the lowest
 * priority, as an operator runs batch work beside a latency-critical service: in an idle CPU
 * cgroup where the machine lets the bench make one (harness/idle-group.ts), else at nice 19.
 * What goes in the idle group changes with the hop (the proxy measured is the batch work of
 * nginx's trials), so the previous hop's group is left first. Says which it used.
 */
function pinApart(named: ReadonlyMap<number, string>, hop: TrialHop): BatchPriority {
  const group = groupOfHop(hop);
  const rest = stackGroups(named).filter((g) => g !== group);
  const batch = rest.filter((g) => !CALL_PATH.includes(g));
  pinGroups(named, rest, cores().rest);
  pinGroups(named, [group], cores().hop);
  setNice(named, [group, ...CALL_PATH], 0);
  setNice(named, batch, 19);
  leaveIdleGroup(idleGroup);
  idleGroup = toIdleGroup(named, batch);
  return idleGroup === undefined ? 'nice 19' : 'idle cgroup';
}

/** The batch work's idle group while latency is measured, if the machine gave one. */
let idleGroup: IdleGroup | undefined;

/** How long `quiet` samples the stack's CPU at a time, and how long it waits at most. */
const QUIET_SAMPLE_MS = 500;
const QUIET_LIMIT_MS = 6_000;

/**
 * Waits (at most 6 s) until the stack is quiet: under 0.3 of a core busy over half a second (its
 * idle timers and the broker's housekeeping), the pipelines done with what earlier trials sent.
 * A stack still busy after 6 s is busy with something no wait ends soon (the machine's own
 * daemons, a neighbour, or ClickHouse merging what B3's search trials at 9,000 to 10,000 calls/s
 * stored, which outlasted 10 s four times in a row in the run of 2026-12-06 23:37 and runs at the
 * lowest priority in the trials): waiting longer only took the run past its 15 minutes.
 */
export async function quiet(named: ReadonlyMap<number, string>, log: (line: string) => void): Promise<void> {
  for (let waited = 0; waited < QUIET_LIMIT_MS; waited += QUIET_SAMPLE_MS) {
    const before = cpuSample(named);
    await new Promise((resolve) => setTimeout(resolve, QUIET_SAMPLE_MS));
    const seconds = Object.values(cpuBetween(before, cpuSample(named))).reduce((a, b) => a + b, 0);
    if (seconds / (QUIET_SAMPLE_MS / 1000) < 0.3) return;
  }
  log(`the stack did not quiet down within ${QUIET_LIMIT_MS / 1000} s; measuring anyway`);
}

/** The highest rate `hop` carries, pinned apart, each trial from a quiet stack (open-max.ts). */
async function searchMax(plan: LatencyPlan, hop: LatencyHop): Promise<{ max: number; tried: RateTried[] }> {
  const tried: RateTried[] = [];
  const max = await searchOpenMax(plan.start[hop], async (rate) => {
    // The batch work of the trial before (a metered hop's records being ingested) done first.
    await quiet(plan.named, plan.log);
    return triedAt(rate, tried, () =>
      plan.load.openModel(
        plan.generator,
        `${hop}-max`,
        plan.targets[hop],
        rate,
        plan.searchSeconds,
        cores().rest,
      ),
    );
  });
  return { max, tried };
}

/**
 * A trial, how long the threads of `groups` waited for a CPU during it (ms per second), and how
 * busy core 1 was; the trial keeps how much of each core the hypervisor took.
 */
function waiting(named: ReadonlyMap<number, string>, groups: readonly string[], run: () => LatencyTrial) {
  const before = groups.map((g) => runQueueWait(named, g));
  const mainBefore = groups.map((g) => runQueueWait(named, g, true));
  const coresBefore = coreTimes();
  const started = performance.now();
  const trial = run();
  const seconds = (performance.now() - started) / 1000;
  const coresAfter = coreTimes();
  const [, core1Busy] = hopAndRest(coresBusyBetween(coresBefore, coresAfter));
  const [stolen0, stolen1] = hopAndRest(coresStolenBetween(coresBefore, coresAfter));
  trial.stolen = [stolen0, stolen1];
  const waited = groups.map(
    (g, i) => (Math.max(0, runQueueWait(named, g) - (before[i] ?? 0)) * 1000) / seconds,
  );
  const mainWaited = groups.map(
    (g, i) => (Math.max(0, runQueueWait(named, g, true) - (mainBefore[i] ?? 0)) * 1000) / seconds,
  );
  return { trial, seconds, waited, mainWaited, core1Busy };
}

/** Each group's CPU seconds over `seconds`: the cores it kept busy. */
const perSecond = (used: Record<string, number>, seconds: number) =>
  Object.fromEntries(Object.entries(used).map(([group, cpu]) => [group, cpu / seconds]));

/** The origin alone at a rate: `waiting`'s figures and what each group of the stack took meanwhile. */
function originAlone(plan: LatencyPlan, rate: number) {
  const before = cpuSample(plan.named);
  const alone = waiting(plan.named, [ORIGIN], () =>
    plan.load.openModel(plan.generator, 'B1', plan.targets.B1, rate, plan.trialSeconds, cores().rest),
  );
  return { ...alone, groupsBusy: perSecond(cpuBetween(before, cpuSample(plan.named)), alone.seconds) };
}

/** What a hop's trials used: its CPU per call, its core's busy share, its and the origin's run-queue wait. */
function measured(plan: LatencyPlan, hop: TrialHop, run: () => LatencyTrial) {
  const group = groupOfHop(hop);
  const before = cpuSample(plan.named);
  const { trial, seconds, waited, mainWaited, core1Busy } = waiting(plan.named, [group, ORIGIN], run);
  const usedAll = cpuBetween(before, cpuSample(plan.named));
  const used = usedAll[group] ?? 0;
  return {
    groupsBusy: perSecond(usedAll, seconds),
    trial,
    cpuMicros: (used * 1e6) / Math.max(trial.requests, 1),
    busy: used / seconds,
    waitedMsPerSecond: waited[0] ?? 0,
    mainWaitedMsPerSecond: mainWaited[0] ?? 0,
    originWaitedMsPerSecond: waited[1] ?? 0,
    core1Busy,
  };
}

/** B3's collector pauses and spans over a trial, from its metrics page read before and after it. */
async function withB3Metrics<T extends { trial: LatencyTrial }>(b3: Target, run: () => T): Promise<T> {
  const page = `${new URL(b3.url).origin}/metrics`;
  const before = await freshGet(page);
  const measuredTrial = run();
  const after = await freshGet(page);
  measuredTrial.trial.gc = gcBetween(gcMetrics(before), gcMetrics(after));
  measuredTrial.trial.spans = spansBetween(spanBuckets(before), spanBuckets(after));
  // A refused or failed call reaches the generator as HTTP 200 with a JSON-RPC error.
  const unsuccessful = unsuccessfulBetween(callOutcomes(before), callOutcomes(after));
  measuredTrial.trial.unsuccessful = unsuccessful;
  if (unsuccessful > 0) measuredTrial.trial.valid = false;
  return measuredTrial;
}

/**
 * `pairs` pairs of trials at `rate`, the hop already pinned apart: the origin alone, then the
 * hop, each from a quiet stack (the origin's trial does not carry the ingest of the metered hop's
 * trial before it, nor the hop's the origin's); the better trial of each side read. With
 * `originOf`, trials at the same rate that already have the origin's, only the hop's are run and
 * the origin's are those.
 */
async function trialsAt(
  plan: LatencyPlan,
  hop: TrialHop,
  at: { share: number; rate: number; pairs: number; originOf?: ShareTrials },
): Promise<ShareTrials> {
  const { load, targets, named, log } = plan;
  const target = hop === 'F' ? plan.relay : targets[hop];
  if (target === undefined) throw new Error('the relay (F) was not started');
  const { rate } = at;
  const hopTrials: Array<ReturnType<typeof measured>> = [];
  const origin: Array<ReturnType<typeof originAlone>> = [];
  for (const _ of rounds(at.pairs)) {
    if (at.originOf === undefined) {
      await quiet(named, log);
      origin.push(originAlone(plan, rate));
    }
    const run = () => load.openModel(plan.generator, hop, target, rate, plan.trialSeconds, cores().rest);
    await quiet(named, log);
    hopTrials.push(
      hop === 'B3'
        ? await withB3Metrics(targets.B3, () => measured(plan, hop, run))
        : measured(plan, hop, run),
    );
  }
  const best = hopTrials.reduce((a, b) => (b.trial.p99 < a.trial.p99 ? b : a));
  const bestAlone = origin.reduce<(typeof origin)[number] | undefined>(
    (a, b) => (a === undefined || b.trial.p99 < a.trial.p99 ? b : a),
    undefined,
  );
  return {
    target: hop,
    share: at.share,
    rate,
    hop: hopTrials.map((t) => t.trial),
    origin: at.originOf?.origin ?? origin.map((t) => t.trial),
    hopCpuMicros: best.cpuMicros,
    hopCoreBusy: best.busy,
    waitedMsPerSecond: best.waitedMsPerSecond,
    mainWaitedMsPerSecond: best.mainWaitedMsPerSecond,
    originWaited: {
      withHop: best.originWaitedMsPerSecond,
      alone: at.originOf?.originWaited.alone ?? bestAlone?.waited[0] ?? 0,
    },
    core1Busy: {
      withHop: best.core1Busy,
      alone: at.originOf?.core1Busy?.alone ?? bestAlone?.core1Busy ?? 0,
    },
    groupsBusy: {
      withHop: best.groupsBusy,
      alone: at.originOf?.groupsBusy?.alone ?? bestAlone?.groupsBusy ?? {},
    },
  };
}

/**
 * Every hop's maximum, then its trials at each share: the origin and the hop in turn at the same
 * rate (B3, the metered proxy, twice each: its figures are the goal's), then nginx at the goal's
 * rate; each process free again at the end.
 */
export async function measureOpenModel(plan: LatencyPlan): Promise<OpenModelLatency> {
  const { named, log } = plan;
  const maxima = {} as OpenModelLatency['maxima'];
  const shares: ShareTrials[] = [];
  let peerAtGoalRate: ShareTrials | undefined;
  let relayAtGoalRate: ShareTrials | undefined;
  let machineFloor: WakeProbe | undefined;
  let batchPriority: BatchPriority = 'nice 19';
  try {
    for (const hop of LATENCY_HOPS) {
      batchPriority = pinApart(named, hop);
      maxima[hop] = await searchMax(plan, hop);
      log(`${hop} open-model maximum, pinned apart: ${maxima[hop].max} calls/s`);
    }
    for (const share of LATENCY_SHARES)
      for (const hop of LATENCY_HOPS) {
        const rate = round100(maxima[hop].max * share);
        if (maxima[hop].max === 0) continue;
        pinApart(named, hop);
        shares.push(await trialsAt(plan, hop, { share, rate, pairs: hop === 'B3' ? 2 : 1 }));
      }
    // The goal's rate again with nginx, over the origin's trials of B3's there: what a peer adds
    // at that rate in the same arrangement (two trials since 2026-12-03; one before).
    const half = shares.find((s) => s.target === 'B3' && s.share === 0.5);
    if (half !== undefined && half.rate <= maxima.N.max) {
      pinApart(named, 'N');
      peerAtGoalRate = await trialsAt(plan, 'N', {
        share: half.rate / maxima.N.max,
        rate: half.rate,
        // Two trials, the better read, as B3's and the relay's: the three compared alike.
        pairs: 2,
        originOf: half,
      });
    }
    // The same with the relay (F): what a hop on TCP that does nothing adds at that rate, the
    // loopback's socket calls and the wake-ups across cores with no HTTP work at all.
    if (half !== undefined && plan.relay !== undefined) {
      pinApart(named, 'F');
      // Two trials, the better read, as B3's: at the goal's rate core 1 runs near its capacity
      // and one trial of any side may carry a stall of the machine (the origin's own trials do).
      relayAtGoalRate = await trialsAt(plan, 'F', { share: 0.5, rate: half.rate, pairs: 2, originOf: half });
    }
    // What the machine charges any hop at that rate: the wake-up probe, on the quiet stack.
    if (half !== undefined) {
      pinApart(named, 'B3');
      await quiet(named, log);
      machineFloor = plan.load.wakeProbe(half.rate, FLOOR_SECONDS, Number(cores().hop), Number(cores().rest));
      log(
        `a do-nothing hop at ${half.rate}/s: p99 ${machineFloor.hop[1]} µs through it, ${machineFloor.direct[1]} µs directly`,
      );
    }
  } finally {
    leaveIdleGroup(idleGroup);
    idleGroup = undefined;
    pinGroups(named, stackGroups(named), cores().all);
    setNice(named, stackGroups(named), 0);
  }
  return {
    trialSeconds: plan.trialSeconds,
    batchPriority,
    eachTrialFromQuiet: true,
    quietLimitSeconds: QUIET_LIMIT_MS / 1000,
    searchSeconds: plan.searchSeconds,
    searchResolution: SEARCH_RESOLUTION,
    ...(plan.generator === 'vegeta' ? { searchBoundedByReached: true } : {}),
    maxima,
    shares,
    ...(peerAtGoalRate === undefined ? {} : { peerAtGoalRate }),
    ...(machineFloor === undefined ? {} : { machineFloor }),
    ...(relayAtGoalRate === undefined ? {} : { relayAtGoalRate }),
    ...(plan.generator === 'vegeta' ? {} : { generator: plan.generator }),
    origin: plan.origin,
  };
}
