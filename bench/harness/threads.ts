import { readdirSync, readFileSync } from 'node:fs';
import { CLK_TCK, statLineTimes } from './cpu';

/**
 * CPU by thread inside one of the stack's Node processes, from /proc/<pid>/task: how much of a
 * process's CPU a call is its main thread's (the event loop, where every call's JavaScript runs
 * and what a call waits on) and how much its other threads' (V8's collector helpers, libuv's
 * pool, worker threads such as the proxy's Kafka producer) or, where chdb runs in the process,
 * ClickHouse's own threads (inserts, merges).
 */

/** The parts a process's threads are counted in. */
export type ThreadPart = 'main' | 'node' | 'clickhouse';

/**
 * Names Node gives its threads: Node 20 leaves each thread the name its creator had (`node`, or
 * the process's title once it set one); Node 22 and 24 name them (`MainThread`, `V8Worker`,
 * `libuv-worker`, ...). ClickHouse names each of its threads by its pool (`ThreadPool`,
 * `MergeMutate`, `BgSchPool`, ...).
 */
const NODE_THREADS = new Set([
  'node',
  'MainThread',
  'V8Worker',
  'DelayedTaskSche',
  'SignalInspector',
  'libuv-worker',
  'WorkerThread',
]);

/** Which part a thread of `pid` is, by its id and name, and the main thread's name. */
export function threadPart(pid: number, tid: number, name: string, mainName: string): ThreadPart {
  if (tid === pid) return 'main';
  return name === mainName || NODE_THREADS.has(name) ? 'node' : 'clickhouse';
}

/** The name between a stat line's first '(' and its last ')' (a name may hold either). */
const nameIn = (stat: string) => stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));

/** CPU seconds (user + system) so far of each part of `pid`'s threads, by thread id. */
export type ThreadTimes = Map<number, { part: ThreadPart; seconds: number }>;

export function threadTimes(pid: number): ThreadTimes {
  const times: ThreadTimes = new Map();
  let tids: string[];
  let mainName: string;
  try {
    tids = readdirSync(`/proc/${pid}/task`);
    mainName = nameIn(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return times;
  }
  for (const entry of tids) {
    const tid = Number(entry);
    try {
      const stat = readFileSync(`/proc/${pid}/task/${entry}/stat`, 'utf8');
      const [utime = 0, stime = 0] = statLineTimes(stat);
      times.set(tid, {
        part: threadPart(pid, tid, nameIn(stat), mainName),
        seconds: (utime + stime) / CLK_TCK,
      });
    } catch {
      // The thread ended between the listing and the read: its time is not counted.
    }
  }
  return times;
}

/**
 * CPU seconds of each part between two samples of one process. A thread started in between
 * counts from zero; one that ended drops out (its last ticks are lost, never subtracted); an id
 * the kernel gave a new thread meanwhile reads less than before, and counts from zero too.
 */
export function threadPartsBetween(before: ThreadTimes, after: ThreadTimes): Record<ThreadPart, number> {
  const parts: Record<ThreadPart, number> = { main: 0, node: 0, clickhouse: 0 };
  for (const [tid, { part, seconds }] of after) {
    const earlier = before.get(tid)?.seconds ?? 0;
    parts[part] += seconds >= earlier ? seconds - earlier : seconds;
  }
  return parts;
}

/** Context switches so far, summed over every thread of the processes `pids`. */
export interface ContextSwitches {
  /** The thread gave its core up: it waited (an event loop with nothing to do sleeps in epoll). */
  voluntary: number;
  /** The kernel took the core from it for another task while it still had work. */
  involuntary: number;
}

export function contextSwitches(pids: readonly number[]): ContextSwitches {
  const sum: ContextSwitches = { voluntary: 0, involuntary: 0 };
  for (const pid of pids) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
        sum.voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
        sum.involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  }
  return sum;
}
