-- The refund of a purchase's unused time that the processor made when the purchase's period was
-- ended early (a plan switch, a cancellation now; purchases/proration.ts), written apart from the
-- transaction that ends it once the processor has answered. When that transaction rolls back
-- after the refund (an error after it, the commit lost), the row stays: a retry within the hold
-- prorates from the same moment, so it asks for the same amount under the same key and records
-- the processor's first refund rather than making a second one.
CREATE TABLE early_end_refunds (
    provider_id text NOT NULL REFERENCES providers (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- The purchase whose period ended early.
    purchase_id text NOT NULL,
    -- The moment its unused time was counted from.
    prorated_at timestamptz NOT NULL,
    amount bigint NOT NULL,
    currency text NOT NULL,
    processor_refund text NOT NULL,
    -- What ended it, in words for an error that names it ("a switch to Basic", "cancelling it").
    ending text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (provider_id, environment, purchase_id)
);
