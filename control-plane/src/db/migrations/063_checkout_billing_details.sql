-- What a checkout asks of the customer besides a card (docs/api.md, checkout sessions), as
-- Stripe Checkout's billing_address_collection and tax_id_collection: `required`, a billing
-- address, saved on the customer before anything is charged, so the first invoice names it; a
-- tax id the customer may give when buying as a business.
ALTER TABLE checkout_sessions
    ADD COLUMN billing_address_collection text NOT NULL DEFAULT 'auto'
        CHECK (billing_address_collection IN ('auto', 'required')),
    ADD COLUMN tax_id_collection boolean NOT NULL DEFAULT false;
