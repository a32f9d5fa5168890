-- A product's retention offer (docs/portal.md): the coupon its portal's cancel page offers a
-- customer about to cancel, as Stripe's portal offers a coupon on its cancellation flow. Null:
-- none offered.
ALTER TABLE products ADD COLUMN retention_coupon_id text REFERENCES coupons (id);
