// The receiver's side of webhook signatures lives in the SDK; this path stays for existing imports.
export { signatureHeader, verifyWebhook, WebhookVerificationError } from '@mcp-meter/sdk/webhooks';
