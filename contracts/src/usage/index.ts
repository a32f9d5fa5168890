export type { UsagePublisher } from './publisher';
export * from './reading';
export * from './settings';
export type { UsageSettlement } from './settlement';
