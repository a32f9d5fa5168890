import { AsyncLocalStorage } from 'node:async_hooks';

/** The one clock the control plane reads; tests and the scheduler can substitute a movable one. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** The frozen time of the sandbox test clock the current work runs on, if any. */
const testTime = new AsyncLocalStorage<number>();

/** Runs `work` (and everything it awaits) at a test clock's frozen time. */
export function atTestTime<T>(time: Date, work: () => T): T {
  return testTime.run(time.getTime(), work);
}

/**
 * The control plane's clock: the base clock, except inside `atTestTime`, where it reads the test
 * clock's frozen time. Requests about a customer on a test clock, and the advances of that clock,
 * run inside it; nothing else can see it.
 */
export class ScopedClock implements Clock {
  constructor(private readonly base: Clock) {}

  now(): Date {
    const frozen = testTime.getStore();
    return frozen === undefined ? this.base.now() : new Date(frozen);
  }
}

/** A clock that stands still until moved: tests walk a purchase through months in milliseconds. */
export class MovableClock implements Clock {
  private current: number;

  constructor(start: Date = new Date()) {
    this.current = start.getTime();
  }

  now(): Date {
    return new Date(this.current);
  }

  advance(ms: number): Date {
    this.current += ms;
    return this.now();
  }

  set(date: Date): void {
    this.current = date.getTime();
  }
}
