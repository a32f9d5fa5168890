-- A coupon for one customer alone (docs/coupons.md), as Stripe's promotion-code restriction
-- `customer`: only purchases and top-ups of that customer may redeem it.
ALTER TABLE coupons ADD COLUMN customer_id text REFERENCES customers (id);
