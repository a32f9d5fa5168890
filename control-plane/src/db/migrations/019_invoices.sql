-- Invoices: one per purchase and period boundary ("first" for the first payment, else the ISO
-- time the closing period ended). The unique key is what makes period billing idempotent: two
-- scheduler replicas, or a rerun after a crash, cannot issue a second invoice for the same close.
CREATE TABLE invoices (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    customer_id text NOT NULL REFERENCES customers (id),
    purchase_id text NOT NULL REFERENCES purchases (id),
    product_id text NOT NULL,
    plan_id text NOT NULL,
    period_key text NOT NULL,
    status text NOT NULL CHECK (status IN ('draft', 'open', 'paid', 'uncollectible', 'void')),
    billing_reason text NOT NULL,
    currency text NOT NULL,
    -- The usage period the invoice closes (null when it bills no usage).
    usage_period_start timestamptz,
    usage_period_end timestamptz,
    -- Units counted for that period, before free units: late records are billed on the next
    -- invoice as the difference they make to this count's price.
    usage_units bigint,
    free_units bigint,
    lines jsonb NOT NULL,
    total bigint NOT NULL CHECK (total >= 0),
    amount_paid bigint NOT NULL DEFAULT 0,
    attempt_count integer NOT NULL DEFAULT 0,
    payment_id text,
    created_at timestamptz NOT NULL,
    finalized_at timestamptz,
    paid_at timestamptz,
    closed_at timestamptz
);
CREATE UNIQUE INDEX invoices_once_per_period ON invoices (purchase_id, period_key);
CREATE INDEX invoices_customer ON invoices (provider_id, environment, customer_id, id);
CREATE INDEX invoices_provider ON invoices (provider_id, environment, id);

ALTER TABLE payments ADD COLUMN invoice_id text;
ALTER TABLE payments DROP CONSTRAINT payments_reason_check;
ALTER TABLE payments ADD CONSTRAINT payments_reason_check
    CHECK (reason IN ('first_payment', 'renewal', 'dunning_retry', 'trial_conversion', 'topup', 'final_usage'));

-- Whether the purchase's periods close with a usage charge (post-paid usage-based and hybrid
-- plans). Kept on the purchase so the scheduler's due query can hold those periods until the
-- usage of the period is settled in the usage store.
ALTER TABLE purchases ADD COLUMN bills_usage boolean NOT NULL DEFAULT false;
UPDATE purchases p SET bills_usage = true
  FROM plans pl
 WHERE pl.id = p.plan_id AND (pl.type = 'hybrid' OR (pl.type = 'usage-based' AND pl.billing_model = 'post-paid'));

-- Unused free units carried into the current period (plans with rolloverUnusedUnits).
ALTER TABLE purchases ADD COLUMN rollover_units bigint NOT NULL DEFAULT 0 CHECK (rollover_units >= 0);
