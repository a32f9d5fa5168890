-- A default card's expiry announced once (customer.card_expiring, payments/card-expiry.ts): in the
-- month it expires, to a customer who will be charged again. One row per card, written in the
-- event's transaction, so replicas and later passes never announce it twice.
CREATE TABLE card_expiry_notices (
    payment_method_id text PRIMARY KEY REFERENCES payment_methods (id),
    event_id text NOT NULL,
    created_at timestamptz NOT NULL
);

-- Every scheduler pass looks for the default cards expiring this month: by their month's index.
CREATE INDEX payment_methods_default_expiry ON payment_methods ((exp_year * 12 + exp_month - 1))
    WHERE is_default AND detached_at IS NULL;
