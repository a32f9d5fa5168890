export { createMeter, type MeterClient, type MeterOptions } from './client.js';
export { type Answer, MeterApiError, orThrow, type Problem } from './errors.js';
export { type Page, paginate } from './paginate.js';
export {
  decide,
  type PaywallDecision,
  type PaywallOptions,
  paywallExpress,
  paywallFastify,
  paywallHono,
} from './paywall.js';
export { DEFAULT_RETRY, type RetryPolicy, retryAfterMs } from './retry.js';
export type { components, operations, paths } from './schema.js';
export { signatureHeader, verifyWebhook, WebhookVerificationError } from './webhooks.js';
