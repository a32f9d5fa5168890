-- Customers remove cards (issue 64: the portal's payment methods). A removed card keeps its row,
-- marked detached: its processor customer (Stripe's cus_…) stays known for the next card, and
-- the payments it made still name it. Only cards not detached are listed, charged or default.
ALTER TABLE payment_methods ADD COLUMN detached_at timestamptz;
CREATE INDEX payment_methods_customer ON payment_methods (customer_id) WHERE detached_at IS NULL;
