-- What a checkout session is due before any coupon (docs/api.md, checkout sessions; Stripe's
-- amount_subtotal): `amount` is what is due now, less the coupon the session applies, and a
-- promotion code taken off again brings it back to this. Sessions made before it without a
-- coupon were due their subtotal; those made with one have none known (null).
ALTER TABLE checkout_sessions ADD COLUMN amount_subtotal bigint CHECK (amount_subtotal >= amount);
UPDATE checkout_sessions SET amount_subtotal = amount WHERE coupon_id IS NULL;
