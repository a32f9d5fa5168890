import type { Environment } from '../usage-record';
import { LIMIT_PREFIX } from './counter';

export interface CounterScope {
  providerId: string;
  environment: Environment;
  customerId: string;
  productId: string;
  planId: string;
  periodStart: Date;
}

/** One counter per customer, product, plan and period: a new period starts from zero by itself. */
export function counterKey(s: CounterScope): string {
  return `${LIMIT_PREFIX}${s.environment}:${s.providerId}:${s.customerId}:${s.productId}:${s.planId}:${s.periodStart.getTime()}`;
}

/**
 * One credit counter per customer: `used` is the credits its admitted calls spent, the limit is
 * every credit ever made available to it (the entitlement's `credits.funded`). Shared by all of
 * the customer's credit-funded products, as the balance is.
 */
export function creditKey(s: Pick<CounterScope, 'providerId' | 'environment' | 'customerId'>): string {
  return `${CREDIT_PREFIX}${s.environment}:${s.providerId}:${s.customerId}`;
}

export const CREDIT_PREFIX = 'mcpmeter:credits:';

const DAY_MS = 86_400_000;
/** A credit counter is re-seeded from ClickHouse after this long without the limit's period to end it. */
export const CREDIT_COUNTER_TTL_MS = 35 * DAY_MS;
/** A counter outlives its period by a week (late settles, clock skew), then Redis drops it. */
const AFTER_PERIOD_MS = 7 * DAY_MS;
/** Periods without an end (one-time plans) are re-seeded from ClickHouse after this long. */
const OPEN_PERIOD_TTL_MS = 400 * DAY_MS;

export function counterExpiry(periodEnd: Date | null, now: Date): number {
  return periodEnd === null ? now.getTime() + OPEN_PERIOD_TTL_MS : periodEnd.getTime() + AFTER_PERIOD_MS;
}

export type Cycle = 'weekly' | 'monthly' | 'quarterly' | 'yearly' | 'custom' | null;

/**
 * The period of a server's free default plan, which has no purchase to anchor it: the UTC
 * calendar period of the plan's cycle (ISO week, month, quarter, year; custom cycles count
 * whole intervals from the Unix epoch). A plan without a cycle has one period that never ends.
 */
export function calendarPeriod(
  cycle: Cycle,
  intervalDays: number | null,
  now: Date,
): { start: Date; end: Date | null } {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  switch (cycle) {
    case 'weekly': {
      const day = (now.getUTCDay() + 6) % 7;
      const start = Date.UTC(y, m, now.getUTCDate() - day);
      return { start: new Date(start), end: new Date(start + 7 * DAY_MS) };
    }
    case 'monthly':
      return { start: new Date(Date.UTC(y, m, 1)), end: new Date(Date.UTC(y, m + 1, 1)) };
    case 'quarterly': {
      const q = m - (m % 3);
      return { start: new Date(Date.UTC(y, q, 1)), end: new Date(Date.UTC(y, q + 3, 1)) };
    }
    case 'yearly':
      return { start: new Date(Date.UTC(y, 0, 1)), end: new Date(Date.UTC(y + 1, 0, 1)) };
    case 'custom': {
      const length = Math.max(1, intervalDays ?? 30) * DAY_MS;
      const start = Math.floor(now.getTime() / length) * length;
      return { start: new Date(start), end: new Date(start + length) };
    }
    default:
      return { start: new Date(0), end: null };
  }
}
