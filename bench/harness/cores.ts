import { readFileSync } from 'node:fs';

/**
 * Which CPUs the bench puts what on. The one-core, limit-check and latency trials use two of
 * them: the hop alone on the first the bench may use, everything else on the second (the
 * arrangement this machine's two cores allow, kept the same on larger machines so the figures
 * compare). Between those trials every process may use every CPU the bench may use, not just
 * those two. On a machine with four or more, the scaling trials (bench/scaling.ts) give the
 * proxy's workers one half and the load generator, the origin and the pipeline the other.
 */
export interface BenchCores {
  /** The CPUs this process may run on (its affinity), in order. */
  usable: number[];
  /** The hop's CPU in the trials that pin one apart (taskset's list). */
  hop: string;
  /** Everything else's CPU in those trials. */
  rest: string;
  /** Every usable CPU: where the stack goes back to after a pinned trial. */
  all: string;
}

/** A kernel CPU list ("0-3,8,10-11", as /proc/<pid>/status's Cpus_allowed_list), expanded. */
export function parseCpuList(list: string): number[] {
  const cpus = new Set<number>();
  for (const part of list.trim().split(',')) {
    if (part === '') continue;
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (m === null) throw new Error(`not a CPU list: ${JSON.stringify(list)}`);
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (last < first) throw new Error(`not a CPU list: ${JSON.stringify(list)}`);
    for (let cpu = first; cpu <= last; cpu++) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The same list written for taskset: each CPU, comma-separated. */
export const cpuList = (cpus: readonly number[]): string => cpus.join(',');

/** The bench's CPUs from the CPUs it may use; it needs two, to put a hop apart from the rest. */
export function benchCores(usable: readonly number[]): BenchCores {
  const [hop, rest] = usable;
  if (hop === undefined || rest === undefined)
    throw new Error(
      `the proxy bench needs two CPUs, to put a hop on one and the rest on the other; this process may use ${usable.length}`,
    );
  return { usable: [...usable], hop: String(hop), rest: String(rest), all: cpuList(usable) };
}

/** This process's CPUs, from /proc/self/status (Linux, as the bench's taskset is). */
export function ownCpus(): number[] {
  const status = readFileSync('/proc/self/status', 'utf8');
  const line = /^Cpus_allowed_list:\s*(.+)$/m.exec(status);
  if (line?.[1] === undefined) throw new Error('/proc/self/status has no Cpus_allowed_list');
  return parseCpuList(line[1]);
}

/** The scaling trials' CPUs: the proxy's workers', the rest's, and the worker counts tried. */
export interface ScalingPlan {
  proxy: number[];
  rest: number[];
  steps: number[];
}

/**
 * The scaling trials' plan on a machine of `usable` CPUs: the first half (rounded down) for the
 * proxy's workers, the rest for wrk, the origin and the pipeline, and the worker counts tried
 * (1, 2, 4, … and the half itself). Undefined under four CPUs: there the generator, the origin
 * and the pipeline cannot have cores of their own beside two workers', and the bench estimates
 * instead (bench/workers.ts).
 */
export function scalingPlan(usable: readonly number[]): ScalingPlan | undefined {
  if (usable.length < 4) return undefined;
  return splitPlan(
    usable.slice(0, Math.floor(usable.length / 2)),
    usable.slice(Math.floor(usable.length / 2)),
  );
}

/** The plan for a given split (the bench's `--scaling-cpus proxy/rest`, e.g. "0/1" to try the trials on two). */
export function splitPlan(proxy: readonly number[], rest: readonly number[]): ScalingPlan {
  if (proxy.length === 0 || rest.length === 0) throw new Error('a scaling plan needs CPUs on both sides');
  if (proxy.some((cpu) => rest.includes(cpu)))
    throw new Error('a CPU cannot be on both sides of a scaling plan');
  const steps: number[] = [];
  for (let k = 1; k < proxy.length; k *= 2) steps.push(k);
  steps.push(proxy.length);
  return { proxy: [...proxy], rest: [...rest], steps };
}

/** `--scaling-cpus`'s "proxy/rest", each a CPU list: "0/1", "0-3/4-7". */
export function parseSplit(text: string): ScalingPlan {
  const [proxy, rest, more] = text.split('/');
  if (proxy === undefined || rest === undefined || more !== undefined)
    throw new Error('--scaling-cpus is "<proxy CPUs>/<rest CPUs>", e.g. 0-3/4-7');
  return splitPlan(parseCpuList(proxy), parseCpuList(rest));
}

let own: BenchCores | undefined;

/** The bench's CPUs on this machine, read once. */
export function cores(): BenchCores {
  own ??= benchCores(ownCpus());
  return own;
}

/**
 * The pinned trials' two CPUs' figures out of a by-CPU array (/proc/stat's order): the hop's CPU
 * first, then the rest's. Where the bench cannot pin (one CPU: it refuses to run those trials),
 * the first two.
 */
export function hopAndRest(byCpu: readonly number[]): [number, number] {
  let hop = 0;
  let rest = 1;
  try {
    hop = Number(cores().hop);
    rest = Number(cores().rest);
  } catch {} // fewer than two CPUs: no pinned trial runs
  return [byCpu[hop] ?? 0, byCpu[rest] ?? 0];
}
