export { createMeter, type MeterClient, type MeterOptions } from './client';
export { type Answer, MeterApiError, orThrow, type Problem } from './errors';
export { type Page, paginate } from './paginate';
export {
  decide,
  type PaywallDecision,
  type PaywallOptions,
  paywallExpress,
  paywallFastify,
  paywallHono,
} from './paywall';
export { DEFAULT_RETRY, type RetryPolicy, retryAfterMs } from './retry';
export type { components, operations, paths } from './schema';
export { signatureHeader, verifyWebhook, WebhookVerificationError } from './webhooks';
