export * from './analytics';
export type { UsagePublisher, UsageRecorder } from './publisher';
export * from './reading';
export * from './reported-units';
export * from './settings';
export type { UsageSettlement } from './settlement';
