/**
 * Scaling across cores (issue 65), a part of `npm run bench:proxy` on a machine with four or more
 * CPUs: the metered proxy with 1, 2, 4, … workers, each count confined to as many CPUs of the
 * proxy's half of the machine, while wrk, the origin and the pipeline run on the other half. So
 * what more cores give the proxy is measured, not estimated, wherever a machine has cores to
 * spare. On two CPUs the bench cannot give the generator cores of its own and reports the
 * estimate of bench/workers.ts instead; `--scaling-cpus 0/1` runs these trials there anyway (one
 * worker on CPU 0), to try them.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '@mcp-meter/contracts/kit';
import { NODE_FLAGS } from '../deploy/node-flags';
import { cores, cpuList, type ScalingPlan } from './harness/cores';
import { coresBusyBetween, coreTimes, cpuBetween, cpuSample, pinGroups, stackGroups } from './harness/cpu';
import type { LoadGenerators, OriginKind } from './harness/load';
import { unsuccessfulSince } from './harness/metrics-page';
import { type BenchProcesses, waitFor } from './harness/processes';
import type { BenchStack } from './proxy-stack';
import { median } from './targets';
import { childrenOf } from './workers';

/** One worker count's trials, medians over rounds. */
export interface ScalingStep {
  workers: number;
  /** The CPUs its processes were confined to (taskset's list). */
  cpus: string;
  connections: number;
  rps: number;
  /** The proxy's processes' CPU a call, every worker and the supervisor. */
  cpuMicros: number;
  /** How busy the proxy's CPUs were, on average (0 to 1): near 1, the proxy had no more to give. */
  proxyCpusBusy: number;
  /** How busy the other half's CPUs were (wrk, the origin, the pipeline): near 1, they held it back. */
  restCpusBusy: number;
  errors: number;
  unsuccessful: number;
  rounds: Array<{ rps: number; cpuMicros: number; proxyCpusBusy: number; restCpusBusy: number }>;
}

export interface ScalingResult {
  plan: ScalingPlan;
  /** Asked for with --scaling-cpus rather than planned from the machine's CPUs. */
  forced: boolean;
  origin: OriginKind;
  rounds: number;
  trialSeconds: number;
  /** wrk's connections for each worker (a step with k workers has k times as many). */
  connectionsPerWorker: number;
  wrkThreads: number;
  steps: ScalingStep[];
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(values.length, 1);

/** Each worker count in turn: started on its CPUs, warmed, driven at saturation, stopped. */
export async function measureScaling(
  stack: BenchStack,
  procs: BenchProcesses,
  load: LoadGenerators,
  options: {
    plan: ScalingPlan;
    forced: boolean;
    rounds: number;
    trialSeconds: number;
    origin: OriginKind;
    connections: number;
    log: (line: string) => void;
  },
): Promise<ScalingResult> {
  const { plan, log } = options;
  const b3 = stack.targets.B3;
  const b3Port = new URL(b3.url).port;
  const rest = cpuList(plan.rest);
  // wrk keeps up with about one core's worth of the origin's answers a thread: one a pair of the
  // other half's CPUs, the rest of them left to the origin and the pipeline.
  const wrkThreads = Math.max(1, Math.floor(plan.rest.length / 2));
  const steps: ScalingStep[] = [];
  try {
    for (const workers of plan.steps) {
      const cpus = cpuList(plan.proxy.slice(0, workers));
      const name = `proxy-s${workers}`;
      const port = String(await freePort());
      // Started under taskset, so every worker it forks inherits the same CPUs.
      const child: ChildProcess = procs.spawnLogged(
        name,
        'taskset',
        ['-c', cpus, process.execPath, ...NODE_FLAGS, 'deploy/start.mjs'],
        {
          ...stack.env,
          SERVICES: 'proxy',
          PROXY_PORT: port,
          PROXY_WORKERS: String(workers),
          PROXY_SPILL_DIR: join(procs.work, `spill-s${workers}`),
        },
      );
      try {
        await waitFor(`http://127.0.0.1:${port}/healthz`);
        const pid = child.pid as number;
        for (let i = 0; i < 100 && workers > 1 && childrenOf(pid).length < workers; i++)
          await new Promise((r) => setTimeout(r, 100));
        for (const worker of workers > 1 ? childrenOf(pid) : []) procs.named.set(worker, name);
        const target = { ...b3, url: b3.url.replace(`:${b3Port}/`, `:${port}/`) };
        const connections = options.connections * workers;
        // Everything else of the stack on the other half, wrk there too.
        pinGroups(
          procs.named,
          stackGroups(procs.named).filter((g) => g !== name),
          rest,
        );
        load.wrk(`scale-${workers}-warm`, target, options.trialSeconds, rest, connections, wrkThreads);
        const rounds: ScalingStep['rounds'] = [];
        let errors = 0;
        let unsuccessful = 0;
        for (let round = 0; round < options.rounds; round++) {
          const refused = await unsuccessfulSince(target.url);
          const before = cpuSample(procs.named);
          const coresBefore = coreTimes();
          const started = performance.now();
          const result = load.wrk(
            `scale-${workers}-${round}`,
            target,
            options.trialSeconds,
            rest,
            connections,
            wrkThreads,
          );
          const busy = coresBusyBetween(coresBefore, coreTimes());
          const used = cpuBetween(before, cpuSample(procs.named));
          const seconds = (performance.now() - started) / 1000;
          const trial = {
            rps: result.rps,
            cpuMicros: ((used[name] ?? 0) / Math.max(result.requests, 1)) * 1e6,
            proxyCpusBusy: mean(plan.proxy.slice(0, workers).map((cpu) => busy[cpu] ?? 0)),
            restCpusBusy: mean(plan.rest.map((cpu) => busy[cpu] ?? 0)),
          };
          rounds.push(trial);
          errors += result.errors;
          unsuccessful += await refused();
          log(
            `${workers} worker(s) on CPUs ${cpus}, round ${round + 1}: ${Math.round(trial.rps)} calls/s, ${trial.cpuMicros.toFixed(1)} µs CPU a call, the proxy's CPUs ${Math.round(trial.proxyCpusBusy * 100)} % busy, the rest's ${Math.round(trial.restCpusBusy * 100)} % (${seconds.toFixed(1)} s), ${result.errors} errors`,
          );
        }
        steps.push({
          workers,
          cpus,
          connections,
          rps: median(rounds.map((r) => r.rps)),
          cpuMicros: median(rounds.map((r) => r.cpuMicros)),
          proxyCpusBusy: median(rounds.map((r) => r.proxyCpusBusy)),
          restCpusBusy: median(rounds.map((r) => r.restCpusBusy)),
          errors,
          unsuccessful,
          rounds,
        });
      } finally {
        for (const [pid, group] of procs.named) if (group === name) procs.named.delete(pid);
        await procs.stopLogged(child);
      }
    }
  } finally {
    pinGroups(procs.named, stackGroups(procs.named), cores().all);
  }
  return {
    plan,
    forced: options.forced,
    origin: options.origin,
    rounds: options.rounds,
    trialSeconds: options.trialSeconds,
    connectionsPerWorker: options.connections,
    wrkThreads,
    steps,
  };
}

const f = (n: number, digits = 0) => n.toFixed(digits);
const pct = (share: number) => `${Math.round(share * 100)} %`;

/** A step whose other half was busier than this was held back by the generator's side. */
const REST_BOUND = 0.9;

/**
 * What "near-linear" is taken to mean for the goal (the issue gives no figure): each worker count
 * carries at least this share of its count times one worker's calls/s.
 */
export const NEAR_LINEAR = 0.8;

/** The goals table's row for scaling across cores, when it was measured. */
export function scalingGoalRow(s: ScalingResult): string {
  const one = s.steps.find((step) => step.workers === 1);
  const refused = s.steps.reduce((sum, step) => sum + step.errors + step.unsuccessful, 0);
  const shares = s.steps.map((step) =>
    one !== undefined && one.rps > 0 ? step.rps / one.rps / step.workers : 0,
  );
  const most = s.steps.at(-1);
  const verdict =
    refused > 0
      ? `**invalid**: ${refused} calls failed or refused`
      : s.steps.length < 2
        ? 'not measured (one worker count)'
        : shares.every((share) => share >= NEAR_LINEAR)
          ? 'met'
          : '**not met**';
  return `| metered calls/s with 1 to ${s.plan.proxy.length} workers on CPUs of their own (the generator on others), ÷ one worker's | ${s.steps.map((step, i) => `${step.workers}: ${f((shares[i] ?? 0) * step.workers, 2)}`).join(', ')}${most === undefined ? '' : `; ${f(most.rps)} calls/s with ${most.workers}`} | near-linear (≥ ${NEAR_LINEAR} a worker) | ${verdict} |\n`;
}

/** The report's section: calls/s by worker count, against one worker's. */
export function scalingSection(s: ScalingResult): string {
  const one = s.steps.find((step) => step.workers === 1);
  const rows = s.steps
    .map((step) => {
      const ratio = one !== undefined && one.rps > 0 ? step.rps / one.rps : Number.NaN;
      const held = step.restCpusBusy >= REST_BOUND ? ' (the other half full: held back there)' : '';
      return `| ${step.workers} | ${step.cpus} | ${f(step.rps)} | ${Number.isFinite(ratio) ? `${f(ratio, 2)} (${f(ratio / step.workers, 2)} a worker)` : '–'} | ${f(step.cpuMicros, 1)} | ${pct(step.proxyCpusBusy)} | ${pct(step.restCpusBusy)}${held} | ${step.errors} | ${step.unsuccessful} |`;
    })
    .join('\n');
  const counts = s.plan.proxy.length === 1 ? 'one worker' : `1 to ${s.plan.proxy.length} workers`;
  return `## Scaling across cores: ${counts} on CPUs of their own

${s.forced ? `Asked for with \`--scaling-cpus\`: the proxy's CPUs ${cpuList(s.plan.proxy)}, the rest ${cpuList(s.plan.rest)}.` : `This machine's CPUs split in two: ${cpuList(s.plan.proxy)} for the proxy's workers, ${cpuList(s.plan.rest)} for wrk (${s.wrkThreads} thread${s.wrkThreads === 1 ? '' : 's'}), the origin and the pipeline.`}
Each worker count is a fresh proxy (\`PROXY_WORKERS\`, started under \`taskset\` on as many of
the proxy's CPUs), warmed for ${s.trialSeconds} s, then ${s.rounds} rounds of ${s.trialSeconds} s at saturation with
${s.connectionsPerWorker} of wrk's connections a worker; medians. Every call is metered (Kafka → ingest → ClickHouse)
and limit-checked, over the same origin (${s.origin === 'c' ? '`bench/load/origin.c`' : "the bench's Node origin"}), customer and MCP server as B3.
*Busy* is each side's CPUs' average busy share from \`/proc/stat\`: the proxy's near 100 % means
the figure is what its cores give; the other half near it, that wrk, the origin or the pipeline
ran out first.

| workers | CPUs | metered calls/s | ÷ one worker | CPU µs a call, the proxy's processes | the proxy's CPUs busy | the other half's busy | errors | refused or failed |
| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |
${rows}
`;
}
