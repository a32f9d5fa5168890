/** The one clock the control plane reads; tests and the scheduler can substitute a movable one. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

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
