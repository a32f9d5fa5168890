CREATE TABLE refunds (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    payment_id text NOT NULL REFERENCES payments (id),
    amount bigint NOT NULL CHECK (amount > 0),
    currency text NOT NULL,
    reason text,
    metadata jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    processor_refund text,
    failure_reason text,
    created_at timestamptz NOT NULL
);
CREATE INDEX refunds_payment ON refunds (payment_id);
