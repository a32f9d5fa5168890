-- A product's paywall can offer a promotion-code field (docs/coupons.md): the checkout sessions
-- the paywall opens for its plans get `allow_promotion_codes`, as a session made through the API
-- with `allowPromotionCodes: true` does. Off unless the provider turns it on.
ALTER TABLE products ADD COLUMN paywall_promotion_codes boolean NOT NULL DEFAULT false;
