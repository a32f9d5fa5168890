// Generated from the control plane's /openapi.json; do not edit.
// `npm run sdk:generate` writes it again after the API changed (sdk/test/schema.test.ts).

/** The operations that take an Idempotency-Key: method and path template. */
export const IDEMPOTENT_OPERATIONS: ReadonlyArray<readonly [string, string]> = [
  ['POST', '/v1/sdk/activate'],
  ['POST', '/v1/sdk/coupons'],
  ['POST', '/v1/sdk/customers/{ref}/credits'],
  ['POST', '/v1/sdk/purchases/{ref}/cancel'],
  ['POST', '/v1/sdk/purchases/{ref}/discount'],
  ['POST', '/v1/sdk/purchases/{ref}/reactivate'],
  ['POST', '/v1/ui/transactions/refunds'],
];
