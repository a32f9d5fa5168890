-- A retention offer taken in the customer portal instead of cancelling (docs/portal.md): one row
-- per offer taken, written in the transaction that redeems the offer's coupon on the purchase,
-- so the cancellation report (docs/analytics.md) counts the customers it kept, exactly. A
-- purchase may take an offer again once its discount is gone: each taking is a row.
CREATE TABLE retention_saves (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    purchase_id text NOT NULL,
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    product_id text NOT NULL,
    coupon_id text NOT NULL,
    saved_at timestamptz NOT NULL
);
CREATE INDEX retention_saves_window ON retention_saves (provider_id, environment, saved_at);
