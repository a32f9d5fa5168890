-- The metadata a charge was asked with (payments/service.ts), kept so a retry of its attempt asks
-- the processor with the very same parameters: Stripe answers a reused idempotency key only when
-- they match the first request's, and the first request named ids (its payment, its invoice) that
-- rolled back with its transaction. Null on rows written before it.
ALTER TABLE processor_charges ADD COLUMN metadata jsonb;
