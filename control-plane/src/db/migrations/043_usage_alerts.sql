-- Spend and usage alerts (issue 64): a provider's on a plan (every customer holding it) or one
-- customer's own. `allowance_percent`: the calls of a purchase's period reached this percent of
-- its plan's limit. `credit_balance`: the credit balance fell below this many credits.
-- usage_alert_firings: each crossing once per period (the purchase's period for allowances; for
-- balances, the funding since which it fell: the latest movement that added credits), which
-- the primary key makes exactly once however many evaluations race.
CREATE TABLE usage_alerts (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    plan_id text REFERENCES plans (id),
    customer_id text REFERENCES customers (id),
    kind text NOT NULL CHECK (kind IN ('allowance_percent', 'credit_balance')),
    threshold bigint NOT NULL CHECK (threshold >= 0),
    created_at timestamptz NOT NULL,
    CHECK ((plan_id IS NULL) <> (customer_id IS NULL))
);
CREATE UNIQUE INDEX usage_alerts_one ON usage_alerts
    (provider_id, environment, COALESCE(plan_id, ''), COALESCE(customer_id, ''), kind, threshold);

CREATE TABLE usage_alert_firings (
    alert_id text NOT NULL REFERENCES usage_alerts (id) ON DELETE CASCADE,
    customer_id text NOT NULL REFERENCES customers (id),
    period_key text NOT NULL,
    value bigint NOT NULL,
    fired_at timestamptz NOT NULL,
    PRIMARY KEY (alert_id, customer_id, period_key)
);
