-- Coupons (docs/coupons.md): a percentage or a fixed amount off a purchase's invoices, once, for
-- some months, or for as long as it lasts; redeemed by id through the API or by its code at
-- checkout. Only the name changes after creation, as with Stripe's coupons, so what a purchase
-- redeemed is what it keeps.
CREATE TABLE coupons (
    id text PRIMARY KEY,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    name text NOT NULL,
    -- What a customer types at checkout, matched without regard to case; null: by id only.
    code text,
    -- Hundredths of a percent (1250 = 12.5 %), or a fixed amount in minor units of `currency`.
    percent_off_bps integer CHECK (percent_off_bps BETWEEN 1 AND 10000),
    amount_off bigint CHECK (amount_off > 0),
    currency text,
    duration text NOT NULL CHECK (duration IN ('once', 'repeating', 'forever')),
    duration_in_months integer CHECK (duration_in_months BETWEEN 1 AND 120),
    max_redemptions integer CHECK (max_redemptions > 0),
    times_redeemed integer NOT NULL DEFAULT 0 CHECK (times_redeemed >= 0),
    redeem_by timestamptz,
    -- Products it applies to; empty: every product.
    product_ids text[] NOT NULL DEFAULT '{}',
    -- Only for customers who have never paid (Stripe's first_time_transaction restriction).
    first_time_only boolean NOT NULL DEFAULT false,
    metadata jsonb NOT NULL DEFAULT '{}',
    status text NOT NULL CHECK (status IN ('active', 'archived')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CHECK ((percent_off_bps IS NULL) <> (amount_off IS NULL)),
    CHECK ((amount_off IS NULL) = (currency IS NULL)),
    CHECK ((duration = 'repeating') = (duration_in_months IS NOT NULL)),
    -- The redemption's guarded UPDATE keeps this; the constraint makes any other path fail too.
    CHECK (max_redemptions IS NULL OR times_redeemed <= max_redemptions)
);
CREATE INDEX coupons_tenant ON coupons (provider_id, environment, id);
-- One active coupon per code: an archived coupon frees its code.
CREATE UNIQUE INDEX coupons_code ON coupons (provider_id, environment, lower(code))
    WHERE code IS NOT NULL AND status = 'active';

-- The discount a purchase redeemed, with the coupon's terms as they were (they cannot change,
-- but the purchase must not depend on that) and when it stops applying: null until a `once`
-- discount's first invoice is issued, or while a `forever` one lasts.
ALTER TABLE purchases ADD COLUMN discount jsonb;

-- A coupon chosen for a checkout session (by the provider, or by the customer typing its code
-- on the hosted page when the session allows promotion codes), redeemed when it is paid; and the
-- codes typed there that matched no coupon, which stop the page's guessing after ten.
ALTER TABLE checkout_sessions ADD COLUMN coupon_id text REFERENCES coupons (id),
    ADD COLUMN allow_promotion_codes boolean NOT NULL DEFAULT false,
    ADD COLUMN promotion_code_failures integer NOT NULL DEFAULT 0;
