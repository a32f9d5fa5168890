import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { type ThreadTimes, threadPart, threadPartsBetween, threadTimes } from '../bench/harness/threads';

describe("the bench's CPU by thread", () => {
  it("tells a process's main thread, Node's other threads and ClickHouse's apart", () => {
    expect(threadPart(100, 100, 'node', 'node')).toBe('main');
    expect(threadPart(100, 100, 'MainThread', 'MainThread')).toBe('main');
    for (const name of ['node', 'V8Worker', 'libuv-worker', 'DelayedTaskSche'])
      expect(threadPart(100, 101, name, 'MainThread')).toBe('node');
    // A thread Node made after the process took a title carries the title.
    expect(threadPart(100, 101, 'mcp-meter', 'mcp-meter')).toBe('node');
    for (const name of ['ThreadPool', 'MergeMutate', 'BgSchPool'])
      expect(threadPart(100, 101, name, 'node')).toBe('clickhouse');
  });

  it('counts what each thread used between two samples, a new thread from zero, a reused id too', () => {
    const before: ThreadTimes = new Map([
      [1, { part: 'main', seconds: 10 }],
      [2, { part: 'node', seconds: 3 }],
      [3, { part: 'clickhouse', seconds: 5 }],
      [4, { part: 'node', seconds: 9 }],
    ]);
    const after: ThreadTimes = new Map([
      [1, { part: 'main', seconds: 12.5 }],
      [2, { part: 'node', seconds: 3.25 }],
      // Thread 3 ended: dropped, never subtracted. Thread 4's id went to a new thread.
      [4, { part: 'node', seconds: 0.5 }],
      [5, { part: 'clickhouse', seconds: 1 }],
    ]);
    expect(threadPartsBetween(before, after)).toEqual({ main: 2.5, node: 0.75, clickhouse: 1 });
  });

  it("reads this process's threads from /proc: a busy worker thread counts as another Node thread", async () => {
    const before = threadTimes(process.pid);
    expect(before.get(process.pid)?.part).toBe('main');
    // A worker thread works until the kernel has counted 30 ticks (0.3 s) of CPU on it, however
    // busy the machine, and is sampled while still alive (an ended thread's time leaves /proc).
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const { readFileSync } = require('node:fs');
       const ticks = () => {
         const stat = readFileSync('/proc/thread-self/stat', 'utf8');
         const [user, system] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 13).map(Number);
         return user + system;
       };
       while (ticks() < 30) for (const end = Date.now() + 10; Date.now() < end; );
       parentPort.postMessage('done');
       setInterval(() => {}, 1000);`,
      { eval: true },
    );
    await new Promise((resolve) => worker.once('message', resolve));
    const spent = threadPartsBetween(before, threadTimes(process.pid));
    await worker.terminate();
    expect(spent.node).toBeGreaterThan(0.29);
    expect(spent.clickhouse).toBe(0);
  });
});
