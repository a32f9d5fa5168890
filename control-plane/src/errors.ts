/**
 * The closed list of machine codes this API answers with, and the one place that maps them to
 * HTTP statuses. Domain code throws DomainError subclasses and knows nothing about HTTP.
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_json: 400,
  // A JSON body nested deeper than MAX_JSON_DEPTH (64) levels.
  too_deep: 400,
  invalid_request: 400,
  // A request Node's HTTP parser could not read (a byte no request line or header may hold).
  malformed_request: 400,
  idempotency_key_required: 400,
  invalid_authorization_request: 400,
  // A processor's event whose signature does not verify with the connected signing secret.
  invalid_signature: 400,
  weak_password: 400,
  invalid_verification_code: 400,
  verification_expired: 400,
  // An analytics range with more buckets than a series may hold (the problem names the limit).
  range_too_large: 400,
  unauthorized: 401,
  invalid_api_key: 401,
  invalid_credentials: 401,
  // A console session that ended: signed out, idle too long, or past its absolute lifetime.
  session_expired: 401,
  card_declined: 402,
  forbidden: 403,
  // A console request that changes something without the session's CSRF token.
  csrf_failed: 403,
  // A console member whose role may not make this call (a viewer changing anything).
  role_forbidden: 403,
  signup_closed: 403,
  not_found: 404,
  payment_method_not_found: 404,
  route_not_found: 404,
  provider_not_found_in_environment: 404,
  product_not_found: 404,
  plan_not_found: 404,
  meter_not_found: 404,
  mcp_server_not_found: 404,
  customer_not_found: 404,
  purchase_not_found: 404,
  invoice_not_found: 404,
  checkout_session_not_found: 404,
  transaction_not_found: 404,
  webhook_endpoint_not_found: 404,
  event_not_found: 404,
  verification_not_found: 404,
  dispute_not_found: 404,
  payout_not_found: 404,
  test_clock_not_found: 404,
  member_not_found: 404,
  invitation_not_found: 404,
  api_key_not_found: 404,
  auto_top_up_not_found: 404,
  alert_not_found: 404,
  coupon_not_found: 404,
  // A sandbox-only operation asked with a live key: as if the route did not exist.
  sandbox_only: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  // A console sign-in of someone who belongs to several providers, without saying which.
  provider_required: 409,
  member_exists: 409,
  last_owner: 409,
  invitation_closed: 409,
  key_rolled: 409,
  reference_taken: 409,
  subdomain_taken: 409,
  product_archived: 409,
  plan_archived: 409,
  meter_archived: 409,
  meter_protected: 409,
  meter_name_taken: 409,
  customer_exists: 409,
  alert_exists: 409,
  coupon_code_taken: 409,
  // A coupon that exists but cannot be redeemed here: archived, past its redeem-by date, used up,
  // for other products, or an amount in another currency than the plan's.
  coupon_not_redeemable: 409,
  // A code typed on a checkout page that does not offer a promotion-code field (a top-up, or a
  // session made without allowPromotionCodes).
  promotion_codes_not_allowed: 409,
  insufficient_credits: 409,
  invalid_transition: 409,
  payments_not_configured: 409,
  payment_method_required: 409,
  checkout_session_closed: 409,
  checkout_session_in_progress: 409,
  no_higher_plan: 409,
  no_top_up: 409,
  refund_exceeds_payment: 409,
  refund_already_made: 409,
  early_end_unfinished: 409,
  // The payment processor refused a request the account's state there does not allow (a refund
  // of a payment refunded on its dashboard): its code is in the problem's processorCode.
  processor_refused: 409,
  dispute_exists: 409,
  dispute_closed: 409,
  dispute_exceeds_payment: 409,
  insufficient_balance: 409,
  test_clock_advancing: 409,
  invoice_not_open: 409,
  invoice_not_finalizable: 409,
  // An open invoice that no payment on request settles (a suspended trial's: checkout pays it).
  invoice_not_payable: 409,
  idempotency_request_in_progress: 409,
  payload_too_large: 413,
  too_many_records: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  headers_too_large: 431,
  rate_limited: 429,
  too_many_attempts: 429,
  // Another request was changing the same rows at that moment and PostgreSQL aborted this one
  // (a deadlock or a serialization failure): nothing was changed; retry (Stripe's lock_timeout).
  lock_timeout: 429,
  // The provider's origin could not be read: a problem with what they registered, not with us.
  origin_unreachable: 422,
  internal_error: 500,
  usage_bus_unavailable: 503,
  usage_store_unavailable: 503,
  usage_not_settled: 503,
  service_unavailable: 503,
  // PostgreSQL, Redis, Kafka or ClickHouse is unreachable: nothing was changed; retry.
  dependency_unavailable: 503,
  mail_unavailable: 503,
  // The provider's payment processor (Stripe) could not be reached or failed; retry.
  processor_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface FieldProblem {
  /** JSON pointer into the request part named by `location`. */
  path: string;
  message: string;
  location?: 'body' | 'querystring' | 'params' | 'headers';
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends DomainError {
  constructor(readonly errors: FieldProblem[]) {
    super('validation_failed', errors.map((e) => `${e.path} ${e.message}`).join('; '), { errors });
  }
}

export class NotFoundError extends DomainError {
  constructor(
    code: Extract<ErrorCode, `${string}not_found${string}`>,
    message: string,
    details?: Record<string, unknown>,
  ) {
    super(code, message, details);
  }
}

export class ConflictError extends DomainError {}

export class UnauthorizedError extends DomainError {
  constructor(code: 'unauthorized' | 'invalid_api_key' | 'session_expired', message: string) {
    super(code, message);
  }
}

/** A dependency (bus, usage store) is unreachable; the caller may retry. */
export class UnavailableError extends DomainError {
  constructor(
    code:
      | 'usage_bus_unavailable'
      | 'usage_store_unavailable'
      | 'usage_not_settled'
      | 'service_unavailable'
      | 'dependency_unavailable',
    message: string,
  ) {
    super(code, message);
  }
}

/** Seconds a client is asked to wait (`Retry-After`) before retrying a 503. */
export const RETRY_AFTER_SECONDS = 5;

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

const UNREACHABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'Connection is closed',
  "Stream isn't writeable",
];

/**
 * Whether PostgreSQL aborted the transaction because another one held what it needed, in a
 * cycle (40P01, deadlock detected) or in a way a serializable transaction cannot allow (40001):
 * the transaction was rolled back whole, so the request can be made again as it was.
 */
export function isTransactionConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('severity' in error)) return false;
  const { code } = error as { code?: unknown };
  return code === '40P01' || code === '40001';
}

/**
 * Whether an error says a dependency (PostgreSQL, Redis, Kafka, ClickHouse) could not be reached
 * or went away mid-request, rather than that the request or the code was wrong: a socket error,
 * a PostgreSQL connection-class state (08…, shutting down 57P0x, too many connections 53300), a
 * pool connect timeout, a closed Redis connection, or a Kafka connection or timeout error. Such
 * an error becomes a 503 the client may retry, never a 500.
 */
export function isDependencyOutage(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 3) return false;
  const { code, name, message, cause, errors } = error as {
    code?: unknown;
    name?: unknown;
    message?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string') {
    if (UNREACHABLE_CODES.has(code)) return true;
    if ('severity' in error && /^(08...|57P0[123]|53300)$/.test(code)) return true;
  }
  if (
    typeof name === 'string' &&
    (name === 'MaxRetriesPerRequestError' ||
      name === 'KafkaJSConnectionError' ||
      name === 'KafkaJSRequestTimeoutError' ||
      name === 'KafkaJSConnectionClosedError' ||
      name === 'KafkaJSNumberOfRetriesExceeded')
  )
    return true;
  if (typeof message === 'string' && UNREACHABLE_MESSAGES.some((m) => message.startsWith(m))) return true;
  if (Array.isArray(errors) && errors.some((e) => isDependencyOutage(e, depth + 1))) return true;
  return cause !== undefined && isDependencyOutage(cause, depth + 1);
}
