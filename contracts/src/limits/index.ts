export {
  type CounterStore,
  type LeaseCall,
  type LeaseReply,
  LIMIT_PREFIX,
  leaseStep,
  MemoryCounterStore,
  openCounterStore,
  RedisCounterStore,
} from './counter';
export { type Gate, gateFor, scopeOf } from './gate';
export { type CounterScope, type Cycle, calendarPeriod, counterExpiry, counterKey } from './keys';
export {
  DEFAULT_LIMITER_OPTIONS,
  LeasedLimiter,
  type LimitDecision,
  type LimiterOptions,
  LimiterUnavailableError,
  type LimitTarget,
} from './limiter';
