import { createHmac, timingSafeEqual } from 'node:crypto';

/** Why a webhook was refused; answer 401 and do not process it. */
export class WebhookVerificationError extends Error {
  constructor(
    readonly reason:
      | 'missing_header'
      | 'malformed_header'
      | 'timestamp_out_of_tolerance'
      | 'no_matching_signature',
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** `t=<unix seconds>,v1=<hex>` (several v1 entries while a secret rotates), spec 6.3. */
export function signatureHeader(
  rawBody: string | Buffer,
  secrets: readonly string[],
  timestamp: number,
): string {
  const signed = Buffer.concat([Buffer.from(`${timestamp}.`), Buffer.from(rawBody)]);
  return [
    `t=${timestamp}`,
    ...secrets.map((s) => `v1=${createHmac('sha256', s).update(signed).digest('hex')}`),
  ].join(',');
}

/**
 * Verifies `SV-Signature` over the raw body bytes as received (never a re-serialised body):
 * HMAC-SHA256 of `<t>.<body>` keyed with the whole `whsec_` secret, compared in constant time,
 * with the timestamp within `toleranceSeconds` (default 5 minutes) of now in either direction.
 * Pass several secrets during a rotation. Returns the parsed event; throws
 * WebhookVerificationError otherwise.
 */
export function verifyWebhook<T = unknown>(
  rawBody: string | Buffer,
  header: string | string[] | undefined,
  secret: string | readonly string[],
  options: { toleranceSeconds?: number; now?: number } = {},
): T {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value === '')
    throw new WebhookVerificationError('missing_header', 'SV-Signature header missing');
  let timestamp: number | undefined;
  const signatures: Buffer[] = [];
  for (const part of value.split(',')) {
    const at = part.indexOf('=');
    const key = part.slice(0, at).trim();
    const v = part.slice(at + 1).trim();
    if (key === 't' && /^\d+$/.test(v)) timestamp = Number(v);
    else if (key === 'v1' && /^[0-9a-f]{64}$/.test(v)) signatures.push(Buffer.from(v, 'hex'));
  }
  if (timestamp === undefined || signatures.length === 0)
    throw new WebhookVerificationError(
      'malformed_header',
      'SV-Signature must be t=<timestamp>,v1=<hex digest>',
    );
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (Math.abs(now - timestamp) > tolerance)
    throw new WebhookVerificationError(
      'timestamp_out_of_tolerance',
      'SV-Signature timestamp is outside the tolerance',
    );
  const signed = Buffer.concat([Buffer.from(`${timestamp}.`), Buffer.from(rawBody)]);
  const secrets = typeof secret === 'string' ? [secret] : secret;
  const matched = secrets.some((s) => {
    const expected = createHmac('sha256', s).update(signed).digest();
    return signatures.some((candidate) => timingSafeEqual(candidate, expected));
  });
  if (!matched)
    throw new WebhookVerificationError('no_matching_signature', 'No SV-Signature entry matches the secret');
  return JSON.parse(Buffer.from(rawBody).toString('utf8')) as T;
}
