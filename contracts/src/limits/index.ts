export {
  type CounterStore,
  fractionStep,
  LEASE_TOMBSTONE_MS,
  type LeaseCall,
  type LeaseReply,
  LIMIT_PREFIX,
  leaseStep,
  MemoryCounterStore,
  openCounterStore,
  RedisCounterStore,
} from './counter';
export { type Gate, gateFor, scopeOf } from './gate';
export {
  type CounterScope,
  CREDIT_COUNTER_TTL_MS,
  CREDIT_PREFIX,
  type Cycle,
  calendarPeriod,
  counterExpiry,
  counterKey,
  creditKey,
} from './keys';
export {
  type CounterSeed,
  DEFAULT_LIMITER_OPTIONS,
  type LeaseCharge,
  type LeaseWatcher,
  type LimitDecision,
  type LimiterOptions,
  LimiterUnavailableError,
  type LimitTarget,
} from './lease-types';
export { LeasedLimiter } from './limiter';
