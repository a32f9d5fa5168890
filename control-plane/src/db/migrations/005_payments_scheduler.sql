CREATE TABLE payment_methods (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    processor text NOT NULL,
    processor_ref text NOT NULL,
    brand text NOT NULL,
    last4 text NOT NULL,
    exp_month integer NOT NULL,
    exp_year integer NOT NULL,
    is_default boolean NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX payment_methods_one_default ON payment_methods (customer_id) WHERE is_default;

-- One row per charge attempt. (purchase, period, attempt) is unique: two scheduler replicas
-- reaching the same renewal cannot both charge it.
CREATE TABLE payments (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    purchase_id text REFERENCES purchases (id),
    product_id text,
    plan_id text,
    amount bigint NOT NULL CHECK (amount >= 0),
    currency text NOT NULL,
    status text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    reason text NOT NULL CHECK (reason IN ('first_payment', 'renewal', 'dunning_retry', 'trial_conversion')),
    period_key text NOT NULL,
    attempt integer NOT NULL,
    processor text NOT NULL,
    processor_payment_intent text NOT NULL,
    transaction_reference text NOT NULL,
    failure_reason text,
    created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX payments_once_per_attempt ON payments (purchase_id, period_key, attempt) WHERE purchase_id IS NOT NULL;
CREATE INDEX payments_provider ON payments (provider_id, environment, id);

ALTER TABLE purchases ADD COLUMN retry_count integer NOT NULL DEFAULT 0;
ALTER TABLE purchases ADD COLUMN next_retry_at timestamptz;
ALTER TABLE purchases ADD COLUMN trial_reminder_sent boolean NOT NULL DEFAULT false;
ALTER TABLE purchases ADD COLUMN renewal_reminder_for timestamptz;
ALTER TABLE purchases ADD COLUMN setup_fee_due bigint NOT NULL DEFAULT 0;
