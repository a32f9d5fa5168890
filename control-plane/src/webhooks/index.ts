export { signatureHeader, verifyWebhook, WebhookVerificationError } from './verify';
