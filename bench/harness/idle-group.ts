import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { groupOf } from './cpu';

/**
 * The bench's batch work (ingest and ClickHouse, Kafka, PostgreSQL, the idle targets) in a CPU
 * cgroup marked idle (`cpu.idle`, Linux 5.15+): the scheduler then treats it as SCHED_IDLE
 * against everything outside it. A task outside it that wakes (the origin with a request, the
 * load generator with an answer) takes the core at once, where beside batch work at nice 19 it
 * could wait out the rest of that work's slice: the scheduler protects a running task's slice
 * from a waking one whatever their weights. The batch work still gets every cycle the call path
 * leaves.
 *
 * Needs root and a writable CPU controller: cgroup v1's `cpu` hierarchy or cgroup v2's root with
 * the `cpu` controller on. Where neither is there, nothing moves and the caller says so (the
 * batch work then runs at nice 19 alone).
 */

const NAME = 'mcpmeter-bench-batch';

/** Where an idle group can be made: the hierarchy's root directory and how a process names it there. */
interface Hierarchy {
  root: string;
  /** Picks the line of /proc/<pid>/cgroup that gives a process's path in this hierarchy. */
  matches: (line: string) => boolean;
}

function hierarchy(): Hierarchy | undefined {
  const v1 = '/sys/fs/cgroup/cpu';
  if (existsSync(join(v1, 'cpu.shares'))) return { root: v1, matches: inCpuV1 };
  const v2 = '/sys/fs/cgroup';
  try {
    if (readFileSync(join(v2, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('cpu'))
      return { root: v2, matches: inV2 };
  } catch {} // not cgroup v2 at /sys/fs/cgroup
  return undefined;
}

/** A /proc/<pid>/cgroup line of cgroup v1's hierarchy with the `cpu` controller (alone or with others). */
export const inCpuV1 = (line: string) => /^\d+:([^:]*,)?cpu(,[^:]*)?:/.test(line);
/** A /proc/<pid>/cgroup line of cgroup v2's one hierarchy. */
export const inV2 = (line: string) => line.startsWith('0::');

/**
 * The path of a process's group in the hierarchy whose lines `matches` picks, from its
 * /proc/<pid>/cgroup ("id:controllers:path" a line); the root where no line matches.
 */
export function groupPath(procCgroup: string, matches: (line: string) => boolean): string {
  const line = procCgroup.split('\n').find(matches);
  if (line === undefined) return '/';
  return line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
}

/** Processes moved into the idle group, with the group each came from, to put them back. */
export interface IdleGroup {
  dir: string;
  moved: Map<number, string>;
}

/**
 * Moves every process of `groups` (all its threads; children it starts later follow) into the
 * idle group; undefined when no idle group can be made here.
 */
export function toIdleGroup(
  named: ReadonlyMap<number, string>,
  groups: readonly string[],
): IdleGroup | undefined {
  const found = hierarchy();
  if (found === undefined) return undefined;
  const dir = join(found.root, NAME);
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'cpu.idle'), '1');
  } catch {
    try {
      rmdirSync(dir);
    } catch {} // not made, or in use
    return undefined;
  }
  const moved = new Map<number, string>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || !groups.includes(groupOf(named, Number(entry)))) continue;
    try {
      const from = groupPath(readFileSync(`/proc/${entry}/cgroup`, 'utf8'), found.matches);
      writeFileSync(join(dir, 'cgroup.procs'), entry);
      if (from !== `/${NAME}`) moved.set(Number(entry), join(found.root, from));
    } catch {} // gone meanwhile, or a kernel thread
  }
  return { dir, moved };
}

/** Puts every moved process back where it was and removes the group. */
export function leaveIdleGroup(group: IdleGroup | undefined): void {
  if (group === undefined) return;
  for (const [pid, from] of group.moved)
    try {
      writeFileSync(join(from, 'cgroup.procs'), String(pid));
    } catch {} // gone meanwhile
  // Processes the moved ones started since (PostgreSQL's backends) follow their parents' group.
  const parent = join(group.dir, '..');
  try {
    for (const pid of readFileSync(join(group.dir, 'cgroup.procs'), 'utf8').split('\n'))
      if (pid !== '')
        try {
          writeFileSync(join(parent, 'cgroup.procs'), pid);
        } catch {} // gone meanwhile
    rmdirSync(group.dir);
  } catch {} // removed already, or a process still in it (it goes with the group's next use)
}
