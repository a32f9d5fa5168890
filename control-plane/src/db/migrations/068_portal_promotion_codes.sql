-- The customer portal can take a promotion code when a customer changes plans (docs/coupons.md),
-- as Stripe's portal does once promotion codes are enabled in its configuration: per product
-- here, as the paywall's setting is. Off unless the provider turns it on.
ALTER TABLE products ADD COLUMN portal_promotion_codes boolean NOT NULL DEFAULT false;
-- Codes tried on a portal session that matched no coupon: ten end the guessing on it, as on a
-- checkout session. Taken before a code is looked up, given back when it matches.
ALTER TABLE portal_sessions ADD COLUMN promotion_code_attempts integer NOT NULL DEFAULT 0;
