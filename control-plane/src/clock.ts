/** The one clock the control plane reads; tests and the scheduler can substitute a movable one. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
