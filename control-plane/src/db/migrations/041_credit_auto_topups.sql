-- Auto top-up (issue 64): when a customer's credit balance falls under `threshold`, one
-- off-session charge of the default card buys `packs` of the top-up pack of the customer's plan
-- of `product_id`. One setting per customer (credits are one balance per customer). `attempts`
-- counts every charge tried (the processor's idempotency key carries it); `failures` the ones in
-- a row that failed, which stop the setting at three; `retry_at` holds a failed one back.
CREATE TABLE credit_auto_topups (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL UNIQUE REFERENCES customers (id),
    product_id text NOT NULL REFERENCES products (id),
    threshold bigint NOT NULL CHECK (threshold >= 0),
    packs integer NOT NULL CHECK (packs BETWEEN 1 AND 100),
    status text NOT NULL CHECK (status IN ('active', 'stopped')),
    attempts integer NOT NULL DEFAULT 0,
    failures integer NOT NULL DEFAULT 0,
    retry_at timestamptz,
    last_failure text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX credit_auto_topups_active ON credit_auto_topups (provider_id, environment) WHERE status = 'active';
