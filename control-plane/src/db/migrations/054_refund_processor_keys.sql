-- The idempotency key a refund was asked of the processor with (payments/refunder.ts): for a
-- request's Idempotency-Key or a purchase's early end, the key made of it and the payment, which
-- the processor keeps in the refund's metadata too (`refund_key`). A retry finds its refund here,
-- whether its first attempt recorded it or Stripe's event did, and is answered
-- refund_already_made without asking again. Null on rows written before it.
ALTER TABLE refunds ADD COLUMN processor_key text;
CREATE INDEX refunds_processor_key ON refunds (provider_id, environment, processor_key)
    WHERE processor_key IS NOT NULL;
