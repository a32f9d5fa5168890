-- A coupon's minimum purchase (docs/coupons.md), as Stripe's promotion-code restriction
-- `minimum_amount` with `minimum_amount_currency`: it is redeemed only on a purchase in that
-- currency whose price for a period plus its setup fee, before any discount, reaches the amount.
ALTER TABLE coupons
    ADD COLUMN minimum_amount bigint CHECK (minimum_amount > 0),
    ADD COLUMN minimum_amount_currency text,
    ADD CONSTRAINT coupons_minimum_amount_currency CHECK ((minimum_amount IS NULL) = (minimum_amount_currency IS NULL));
