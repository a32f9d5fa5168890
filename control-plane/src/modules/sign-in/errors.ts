import { DomainError } from '../../errors';

/** An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 6750): answered as `{error, error_description}`. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
  }
}

/**
 * A sign-in the hosted page or the JSON login could not complete, in the API's error vocabulary
 * (its status comes from ERROR_STATUS); a throttled one says when to try again.
 */
export class SignInError extends DomainError {
  constructor(
    override readonly code:
      | 'invalid_credentials'
      | 'too_many_attempts'
      | 'weak_password'
      | 'invalid_verification_code'
      | 'verification_expired'
      | 'verification_not_found'
      | 'mail_unavailable',
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(code, message);
  }
}
