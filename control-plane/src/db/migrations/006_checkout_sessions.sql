CREATE TABLE checkout_sessions (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    kind text NOT NULL CHECK (kind IN ('plan', 'topup')),
    plan_id text REFERENCES plans (id),
    product_id text REFERENCES products (id),
    topup_credits bigint,
    amount bigint NOT NULL CHECK (amount >= 0),
    currency text NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'used', 'expired')),
    success_url text NOT NULL,
    cancel_url text,
    purchase_id text REFERENCES purchases (id),
    expires_at timestamptz NOT NULL,
    completed_at timestamptz,
    created_at timestamptz NOT NULL
);
CREATE INDEX checkout_sessions_expiry ON checkout_sessions (expires_at) WHERE status = 'active';

ALTER TABLE payments DROP CONSTRAINT payments_reason_check;
ALTER TABLE payments ADD CONSTRAINT payments_reason_check
    CHECK (reason IN ('first_payment', 'renewal', 'dunning_retry', 'trial_conversion', 'topup'));
