-- Disputes: a customer's bank takes a payment's money back until the dispute is decided.
-- needs_response → under_review (evidence submitted) → won (money returned) or lost.
CREATE TABLE disputes (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    payment_id text NOT NULL REFERENCES payments (id),
    customer_id text NOT NULL,
    amount bigint NOT NULL CHECK (amount > 0),
    currency text NOT NULL,
    reason text NOT NULL,
    status text NOT NULL CHECK (status IN ('needs_response', 'under_review', 'won', 'lost')),
    evidence text,
    processor_dispute text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    closed_at timestamptz
);
-- One open dispute per payment.
CREATE UNIQUE INDEX disputes_one_open ON disputes (payment_id) WHERE status IN ('needs_response', 'under_review');
CREATE INDEX disputes_provider ON disputes (provider_id, environment, id);

-- Payouts: the provider's processor balance sent to its bank. pending → paid or failed (the
-- money comes back to the balance).
CREATE TABLE payouts (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    amount bigint NOT NULL CHECK (amount > 0),
    currency text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'paid', 'failed')),
    -- The day a scheduled payout was made for (null: made on request); one per day and currency.
    scheduled_for date,
    arrival_date timestamptz NOT NULL,
    failure_reason text,
    processor_payout text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX payouts_once_per_day ON payouts (provider_id, environment, currency, scheduled_for)
    WHERE scheduled_for IS NOT NULL;
CREATE INDEX payouts_provider ON payouts (provider_id, environment, id);
CREATE INDEX payouts_pending ON payouts (arrival_date) WHERE status = 'pending';

-- Sandbox only: the failure a payout made on request reports when it arrives.
ALTER TABLE payouts ADD COLUMN sandbox_failure text;
