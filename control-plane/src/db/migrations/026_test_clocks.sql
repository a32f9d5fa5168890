-- Sandbox test clocks (as Stripe has them): a customer created on a clock lives at the clock's
-- frozen time; its purchases renew, convert, retry and bill only when the clock is advanced,
-- never on the scheduler's ordinary passes.
CREATE TABLE test_clocks (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment = 'sandbox'),
    name text,
    frozen_time timestamptz NOT NULL,
    -- Set while an advance runs: a second advance waits its turn (409), a crashed one is
    -- taken over once this is old.
    advancing_since timestamptz,
    created_at timestamptz NOT NULL
);
CREATE INDEX test_clocks_provider ON test_clocks (provider_id, id);

ALTER TABLE customers ADD COLUMN test_clock_id text REFERENCES test_clocks (id);
CREATE INDEX customers_test_clock ON customers (test_clock_id) WHERE test_clock_id IS NOT NULL;
