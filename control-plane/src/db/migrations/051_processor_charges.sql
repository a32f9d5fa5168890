-- Every charge the processor made, written apart from the transaction that records it as a
-- payment (payments/journal.ts): when that transaction rolls back after the processor took the
-- money, the row stays 'unrecorded'; a retry of the same attempt finds its key here and records
-- it, and after an hour with none the scheduler refunds it at the processor.
CREATE TABLE processor_charges (
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- The key the processor was called with: the attempt's key, with a generation after a refund.
    idempotency_key text NOT NULL,
    -- The attempt's key (purchase or customer, period, attempt).
    attempt_key text NOT NULL,
    customer_id text NOT NULL REFERENCES customers (id),
    -- The payment that recorded it; while unrecorded, the id the processor's metadata names.
    payment_id text NOT NULL,
    processor text NOT NULL,
    processor_payment_intent text NOT NULL,
    amount bigint NOT NULL,
    currency text NOT NULL,
    status text NOT NULL CHECK (status IN ('unrecorded', 'recorded', 'refunding', 'refunded', 'refund_failed')),
    processor_refund text,
    failure_reason text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, environment, idempotency_key)
);
CREATE INDEX processor_charges_attempt ON processor_charges (provider_id, environment, attempt_key);
CREATE INDEX processor_charges_open ON processor_charges (created_at) WHERE status IN ('unrecorded', 'refunding');
