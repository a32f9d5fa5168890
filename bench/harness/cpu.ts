import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { cores } from './cores';
import type { WrkResult } from './load';

/**
 * CPU accounting of a bench's processes, from /proc: CPU seconds by process group (the bench's
 * own children by the names they were started with, the infrastructure by its command line), and
 * trials with one group pinned alone on core 0.
 */

/**
 * CPU seconds (user + system) by process group, from /proc, and the system part of them: the
 * kernel's time on the process's behalf, for a hop almost all of it its socket calls. wrk and
 * vegeta are the bench's children and counted through its cutime. A process that exits between
 * two samples drops out (its last ticks are lost, never subtracted).
 */
export type CpuSample = Map<string, { group: string; seconds: number; system: number }>;
/** The kernel's clock ticks a second, the unit of a stat line's times. */
export const CLK_TCK = 100;

/**
 * utime, stime, cutime and cstime (ticks) of a `/proc/.../stat` line: the fields after its name,
 * which ends at the line's last ')' (a name may hold either parenthesis).
 */
export function statLineTimes(stat: string): number[] {
  return stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .slice(11, 15)
    .map(Number);
}

function statTimes(pid: string | number): number[] | undefined {
  try {
    return statLineTimes(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}
export function cpuSample(named: ReadonlyMap<number, string>): CpuSample {
  const sample: CpuSample = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const times = statTimes(pid);
    if (times === undefined) continue;
    const [utime = 0, stime = 0, cutime = 0, cstime = 0] = times;
    if (pid === process.pid) {
      sample.set(`${pid}`, { group: 'bench', seconds: (utime + stime) / CLK_TCK, system: stime / CLK_TCK });
      sample.set(`${pid}/children`, {
        group: 'load generator',
        seconds: (cutime + cstime) / CLK_TCK,
        system: cstime / CLK_TCK,
      });
      continue;
    }
    sample.set(`${pid}`, {
      group: groupOf(named, pid),
      seconds: (utime + stime) / CLK_TCK,
      system: stime / CLK_TCK,
    });
  }
  return sample;
}

/** Which of the stack's processes `pid` is ('other' when none). */
export function groupOf(named: ReadonlyMap<number, string>, pid: number): string {
  const group = named.get(pid);
  if (group !== undefined) return group;
  let cmdline = '';
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {}
  return cmdline.includes('kafka.Kafka')
    ? 'kafka'
    : cmdline.includes('redis-server')
      ? 'redis'
      : cmdline.startsWith('nginx')
        ? 'nginx'
        : cmdline.includes('postgres')
          ? 'postgres'
          : 'other';
}

/** How busy a pinned trial kept each side: the measured group's core, and the rest in cores. */
export interface CoresBusy {
  hop: number;
  rest: number;
}

export const percent = (share: number) => `${Math.round(share * 100)}%`;

/**
 * Two trials with `group` (all its threads) alone on core 0 and every other process of the stack
 * on core 1 (origin, nginx, the other hops, the control plane, PostgreSQL, Redis, Kafka; wrk is
 * started there), then every process free again. Each trial comes with the CPU its side used per
 * second of wall time: the hop's own near 1.0 means the figure is its core's; short of that, the
 * other core (wrk and the origin) or waiting held it back.
 */
export function onOneCore(
  named: ReadonlyMap<number, string>,
  group: string,
  trial: () => WrkResult,
): Array<{ result: WrkResult; busy: CoresBusy }> {
  const stack = stackGroups(named);
  pinGroups(
    named,
    stack.filter((g) => g !== group),
    cores().rest,
  );
  pinGroups(named, [group], cores().hop);
  const trials = [0, 1].map(() => {
    const before = cpuSample(named);
    const started = performance.now();
    const result = trial();
    const used = cpuBetween(before, cpuSample(named));
    const seconds = (performance.now() - started) / 1000;
    const rest = Object.entries(used).reduce((sum, [g, s]) => (g === group ? sum : sum + s), 0);
    return { result, busy: { hop: (used[group] ?? 0) / seconds, rest: rest / seconds } };
  });
  pinGroups(named, stack, cores().all);
  return trials;
}

/** Every group of the stack's processes: the bench's own and the infrastructure's. */
export const stackGroups = (named: ReadonlyMap<number, string>) => [
  ...new Set([...named.values(), 'kafka', 'redis', 'postgres', 'nginx']),
];

/**
 * How long the threads of `group`'s processes waited, runnable, for a CPU (the kernel's run-queue
 * delay, /proc/<pid>/task/<tid>/schedstat), in seconds since they started: what the machine's
 * other work cost a hop's latency. With `mainOnly`, only each process's main thread (its event
 * loop, where a call's answer waits): a wait of its other threads (the collector's helpers, a
 * Kafka producer's thread) delays no call by itself.
 */
export function runQueueWait(named: ReadonlyMap<number, string>, group: string, mainOnly = false): number {
  let nanoseconds = 0;
  for (const [pid, name] of named) {
    if (name !== group) continue;
    try {
      for (const task of mainOnly ? [String(pid)] : readdirSync(`/proc/${pid}/task`)) {
        const fields = readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ');
        nanoseconds += Number(fields[1] ?? 0);
      }
    } catch {} // gone meanwhile
  }
  return nanoseconds / 1e9;
}

/**
 * Sets the CPU priority (nice, 0 to 19) of every thread of every process of `groups`, and of the
 * process's autogroup where the kernel groups by session (there a thread's own nice weighs only
 * within its group): the bench's batch work (ingest, ClickHouse, Kafka, idle targets) yields the
 * core to the hop, the origin and the load generator while latency is measured.
 */
export function setNice(named: ReadonlyMap<number, string>, groups: readonly string[], nice: number): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || !groups.includes(groupOf(named, Number(entry)))) continue;
    try {
      writeFileSync(`/proc/${entry}/autogroup`, String(nice));
    } catch {} // no autogroups here, or gone meanwhile
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${entry}/task`);
    } catch {} // gone meanwhile
    for (const task of tasks)
      try {
        setPriority(Number(task), nice);
      } catch {} // ended meanwhile
  }
}

/** Moves every process of `groups` (all its threads) to `cpus` (taskset's list, as '0,1'). */
export function pinGroups(named: ReadonlyMap<number, string>, groups: readonly string[], cpus: string): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || !groups.includes(groupOf(named, Number(entry)))) continue;
    try {
      execFileSync('taskset', ['-a', '-p', '-c', cpus, entry], { stdio: 'ignore' });
    } catch {} // gone meanwhile
  }
}
export function cpuBetween(
  before: CpuSample,
  after: CpuSample,
  part: 'seconds' | 'system' = 'seconds',
): Record<string, number> {
  const used: Record<string, number> = {};
  for (const [key, now] of after) {
    const earlier = before.get(key);
    // A pid seen again after a restart counts from zero, as a new process.
    const fresh = earlier === undefined || earlier.seconds > now.seconds;
    used[now.group] = (used[now.group] ?? 0) + (fresh ? now[part] : now[part] - earlier[part]);
  }
  return used;
}

/**
 * Each CPU's time so far (jiffies) as `[busy, total, stolen]` by CPU number, from /proc/stat's
 * text. *Stolen* is the steal column: time a virtual machine's CPU wanted to run and the
 * hypervisor ran something else; it is within the total, not the busy time.
 */
export function parseCoreTimes(procStat: string): Array<[number, number, number]> {
  const times: Array<[number, number, number]> = [];
  for (const line of procStat.split('\n')) {
    const match = /^cpu(\d+) (.*)$/.exec(line);
    if (match === null) continue;
    // user nice system idle iowait irq softirq steal (guest time is within user already).
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = (
      match[2] as string
    )
      .trim()
      .split(/\s+/)
      .map(Number);
    const busy = user + nice + system + irq + softirq;
    times[Number(match[1])] = [busy, busy + idle + iowait + steal, steal];
  }
  return times;
}

/** Each CPU's `[busy, total, stolen]` time so far: see `parseCoreTimes`. */
export const coreTimes = () => parseCoreTimes(readFileSync('/proc/stat', 'utf8'));

type CoreTimes = ReadonlyArray<readonly number[]>;

/** What share of each CPU's time between two `coreTimes` samples column `at` of them took, 0 to 1. */
function sharesBetween(before: CoreTimes, after: CoreTimes, at: number): number[] {
  return after.map((now, cpu) => {
    const then = before[cpu] ?? [];
    const elapsed = (now[1] ?? 0) - (then[1] ?? 0);
    return elapsed > 0 ? ((now[at] ?? 0) - (then[at] ?? 0)) / elapsed : 0;
  });
}

/**
 * How busy each CPU was between two `coreTimes` samples (0 to 1): every process's work and the
 * kernel's (interrupts, softirqs: loopback delivery), which a per-process sum leaves out.
 */
export const coresBusyBetween = (before: CoreTimes, after: CoreTimes) => sharesBetween(before, after, 0);

/**
 * How much of each CPU's time between two `coreTimes` samples the hypervisor took (0 to 1): a
 * virtual CPU that was not running while its tasks waited, which no process's figures show.
 */
export const coresStolenBetween = (before: CoreTimes, after: CoreTimes) => sharesBetween(before, after, 2);
