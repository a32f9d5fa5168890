import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { DomainError, ERROR_STATUS } from '../src/errors';
import { translate } from '../src/modules/processors/stripe';

/** What `translate` throws for an error the SDK makes of Stripe's answer `raw`. */
function translated(raw: Record<string, unknown>): { code: string; status: number; details: unknown } {
  const error = Stripe.errors.StripeError.generate(
    raw as Parameters<typeof Stripe.errors.StripeError.generate>[0],
  );
  try {
    translate(error);
  } catch (thrown) {
    if (!(thrown instanceof DomainError)) throw thrown;
    return { code: thrown.code, status: ERROR_STATUS[thrown.code], details: thrown.details };
  }
  throw new Error('translate returned');
}

/**
 * Stripe's answers as stripe-node makes errors of them, in our vocabulary: every one a DomainError
 * (never a 500), the retryable ones 5xx (so an Idempotency-Key is not kept with them).
 */
describe('Stripe errors in our vocabulary', () => {
  it.each([
    [
      { statusCode: 401, type: 'invalid_request_error', message: 'Invalid API Key' },
      'payments_not_configured',
      409,
    ],
    [
      { statusCode: 403, type: 'invalid_request_error', message: 'restricted key' },
      'payments_not_configured',
      409,
    ],
    [{ statusCode: 429, type: 'invalid_request_error', code: 'rate_limit' }, 'processor_unavailable', 503],
    [{ statusCode: 429, type: 'invalid_request_error', code: 'lock_timeout' }, 'processor_unavailable', 503],
    [
      { statusCode: 409, type: 'idempotency_error', code: 'idempotency_key_in_use' },
      'processor_unavailable',
      503,
    ],
    [{ statusCode: 500, type: 'api_error', message: 'boom' }, 'processor_unavailable', 503],
    [
      { statusCode: 400, type: 'idempotency_error', message: 'Keys for idempotent requests…' },
      'idempotency_key_reused',
      422,
    ],
    [
      { statusCode: 400, type: 'invalid_request_error', code: 'charge_already_refunded' },
      'processor_refused',
      409,
    ],
    [{ statusCode: 404, type: 'invalid_request_error', code: 'resource_missing' }, 'processor_refused', 409],
  ])('%o is %s (%i)', (raw, code, status) => {
    expect(translated(raw)).toMatchObject({ code, status });
  });

  it('says a request still running under the key is to be retried, not that Stripe is away', () => {
    const error = Stripe.errors.StripeError.generate({
      statusCode: 409,
      type: 'idempotency_error',
      code: 'idempotency_key_in_use',
      message: 'There is currently another in-progress request using this Idempotent Key',
    } as Parameters<typeof Stripe.errors.StripeError.generate>[0]);
    expect(() => translate(error)).toThrow(/still carrying out a request with this idempotency key; retry/);
  });

  it("names Stripe's code of a refusal, or its type when it has none", () => {
    expect(
      translated({ statusCode: 400, type: 'invalid_request_error', code: 'charge_disputed' }).details,
    ).toEqual({
      processor: 'stripe',
      processorCode: 'charge_disputed',
    });
    expect(translated({ statusCode: 400, type: 'invalid_request_error' }).details).toEqual({
      processor: 'stripe',
      processorCode: 'invalid_request_error',
    });
  });

  it("lets an error that is not Stripe's through as it is", () => {
    const mine = new TypeError('not Stripe');
    expect(() => translate(mine)).toThrow(mine);
  });
});
