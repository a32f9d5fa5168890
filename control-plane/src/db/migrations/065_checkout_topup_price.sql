-- A top-up checkout's price before any coupon (docs/coupons.md): `amount` is what is due now,
-- less the coupon the session applies, and a promotion code taken off again brings it back to
-- this. Sessions made before coupons applied to top-ups were due their whole price.
ALTER TABLE checkout_sessions ADD COLUMN topup_price bigint CHECK (topup_price >= 0);
UPDATE checkout_sessions SET topup_price = amount WHERE kind = 'topup';
ALTER TABLE checkout_sessions
    ADD CONSTRAINT checkout_sessions_topup_price CHECK ((kind = 'topup') = (topup_price IS NOT NULL));
