CREATE TABLE purchases (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    product_id text NOT NULL REFERENCES products (id),
    plan_id text NOT NULL REFERENCES plans (id),
    status text NOT NULL CHECK (status IN ('pending', 'trialing', 'active', 'past_due', 'suspended', 'cancelled', 'expired')),
    amount bigint NOT NULL,
    currency text NOT NULL,
    billing_cycle text,
    is_recurring boolean NOT NULL,
    auto_renew boolean NOT NULL,
    cancel_at_period_end boolean NOT NULL DEFAULT false,
    period_start timestamptz NOT NULL,
    period_end timestamptz,
    anchor_day integer NOT NULL,
    trial_end timestamptz,
    ended_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
-- One purchase in force per customer and product: a plan switch ends the old one first.
CREATE UNIQUE INDEX purchases_one_live ON purchases (customer_id, product_id)
    WHERE status IN ('pending', 'trialing', 'active', 'past_due', 'suspended');
CREATE INDEX purchases_provider ON purchases (provider_id, environment, id);
